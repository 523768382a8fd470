"""Workbench: a tensor-program compiler, runtime and auto-tuner for Jupyter, with TVM's names.

Typical use::

    import workbench as wb
    from workbench import te
    A = te.placeholder((1024,), name="A")
    B = te.compute(A.shape, lambda i: A[i] * 2.0, name="B")
    rt = wb.compile(te.create_prim_func([A, B]), target="llvm")
    a = wb.nd.array(np.ones(1024, "float32")); b = wb.nd.empty((1024,), "float32")
    rt["main"](a, b)
"""
from workbench import nd, options, runtime
from workbench.runtime import Device, cpu, device, get_global_func, register_func
from workbench.ir import IRModule
from workbench import ir, target, te, tir, topi, relax
from workbench import rpc  # Dask is imported only when a cluster is used
from workbench.target import Target
from workbench.driver import build, compile, lower

__version__ = "0.1.0"

__all__ = [
    "nd", "options", "runtime", "Device", "cpu", "device", "get_global_func", "register_func",
    "IRModule", "ir", "target", "te", "tir", "topi", "relax", "rpc", "Target", "build",
    "compile", "lower",
]
