"""Compilation targets (CPU via LLVM)."""
from workbench.target.target import Target

__all__ = ["Target"]
