import sys
from pathlib import Path

# The case list shares the relax tests' model helpers.
sys.path.insert(0, str(Path(__file__).resolve().parent))
