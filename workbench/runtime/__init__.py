"""Workbench runtime: devices, arrays, modules, packed functions, time_evaluator.

Floor 1: this package knows nothing of the IR. It loads compiled kernels (object code or a
shared library following the kernel ABI of docs/internals.md), checks arguments, calls them,
and times them. ``workbench.runtime.profiling`` and ``workbench.runtime.relax_vm`` are
subpackages imported on their own.
"""
from .device import Device, cpu, device
from .evaluator import BenchmarkResult, TimeEvaluator, time_evaluator
from .module import Module, enabled, load_module
from .convert import convert
from .ndarray import NDArray, Tensor, empty, from_dlpack, tensor
from .packed_func import PackedFunc, ParamInfo
from .registry import get_global_func, list_global_func_names, register_func, remove_global_func
from .loader import preload_gomp

# Before any library that brings its own libgomp (PyTorch) is imported: see loader's docstring.
preload_gomp()

def __getattr__(name: str) -> object:
    """``runtime.ShapeTuple`` (TVM's name) from the VM's objects, loaded on first use so that
    importing the runtime does not import the VM."""
    if name == "ShapeTuple":
        from .relax_vm.objects import ShapeTuple
        return ShapeTuple
    raise AttributeError(f"module 'workbench.runtime' has no attribute {name!r}")


__all__ = [
    "Device", "cpu", "device",
    "NDArray", "Tensor", "tensor", "empty", "from_dlpack", "convert",
    "Module", "load_module", "enabled", "PackedFunc", "ParamInfo",
    "BenchmarkResult", "TimeEvaluator", "time_evaluator",
    "register_func", "get_global_func", "list_global_func_names", "remove_global_func",
]
