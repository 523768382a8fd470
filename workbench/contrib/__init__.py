"""TVM's ``tvm.contrib`` helpers that make sense without a C++ runtime: ``utils.tempdir``.

Floor 1: standard library only, so every layer (rpc's local session, tests) may use it.
"""
from workbench.contrib import utils

__all__ = ["utils"]
