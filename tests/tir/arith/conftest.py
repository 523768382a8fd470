import os
import sys

# arith_tiled_matmul.py is a helper module next to the tests (also runnable as a timing script).
sys.path.insert(0, os.path.dirname(__file__))
