"""Workbench: a tensor-program compiler, runtime and auto-tuner for Jupyter."""
