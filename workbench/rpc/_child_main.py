"""Entry point of a worker's child process: ``python -m workbench.rpc._child_main R W name``
(see :mod:`workbench.rpc.child`). A fresh interpreter, so nobody's ``__main__`` runs here."""
import sys

from workbench.rpc.child import child_main

if __name__ == "__main__":
    child_main(sys.argv)
