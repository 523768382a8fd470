"""The CUDA backends' pattern tables. ``import workbench.relax.backend.cuda.cublas`` registers
the cuBLAS patterns (their codegen, ``relax.ext.cublas``, is not part of Workbench: the
patterns partition a module, and a codegen registered under that name compiles the parts)."""
