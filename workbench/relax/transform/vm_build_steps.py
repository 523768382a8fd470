"""TVM's build-pipeline steps whose work Workbench's VM does elsewhere or does not need.

TVM's ``"default_build"`` pipeline (and pipelines users copy from it, such as a model's own
``@register_pipeline``) lists passes by name. Workbench's lowering reaches the same VM form
with fewer passes, so these names exist to let such pipelines run; each returns the module
unchanged, and its docstring says why that computes the same result:

- ``RewriteDataflowReshape``: TVM turns reshape-only kernels into ``R.reshape`` views, a copy
  saved; Workbench runs the kernel (same values).
- ``RemovePurityChecking``: TVM drops purity wrappers before VM code generation; Workbench's
  code generator calls ``call_pure_packed`` directly.
- ``RewriteCUDAGraph``: TVM captures CUDA graphs only for CUDA targets with the config
  ``relax.backend.use_cuda_graph``; for CPU targets TVM leaves the module as it is, too.
- ``KillAfterLastUse``: TVM frees a tensor after its last use; Workbench's VM releases
  registers by reference count, so values are the same (peak memory may differ).
- ``LowerRuntimeBuiltin``: TVM maps allocation and shape builtins to ``vm.builtin.*`` here;
  Workbench's ``VMShapeLower`` and code generator do it.
- ``ComputePrimValue``: TVM computes symbolic ``R.prim_value`` expressions in a TIR function;
  Workbench's ``VMShapeLower`` computes them on the VM's shape heap.
- ``AttachExternModules(ext_mods)``: with no modules nothing is attached, as in TVM; external
  (C/C++ source or object) modules are not supported and raise.
"""
from __future__ import annotations

from typing import Any, Sequence

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext


class _Unchanged(Pass):
    """A TVM build step Workbench's VM does not need: the module is returned as it is."""

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        return mod


class RewriteDataflowReshape(_Unchanged):
    """Reshape kernels stay kernel calls (TVM: views); same values (module docstring)."""

    name = "RewriteDataflowReshape"


class RemovePurityChecking(_Unchanged):
    """Nothing to remove: the code generator calls pure packed functions directly."""

    name = "RemovePurityChecking"


class RewriteCUDAGraph(_Unchanged):
    """No CUDA graphs on CPU targets (TVM also leaves CPU modules unchanged)."""

    name = "RewriteCUDAGraph"


class KillAfterLastUse(_Unchanged):
    """The VM releases registers by reference count; no explicit kill instructions."""

    name = "KillAfterLastUse"


class LowerRuntimeBuiltin(_Unchanged):
    """Builtins are lowered by VMShapeLower and the VM code generator."""

    name = "LowerRuntimeBuiltin"


class ComputePrimValue(_Unchanged):
    """Symbolic PrimValues are computed by VMShapeLower on the shape heap."""

    name = "ComputePrimValue"


class AttachExternModules(Pass):
    """``AttachExternModules(ext_mods)``: attaches external modules to the module (TVM's
    pass). Only an empty list is supported (then the module is unchanged)."""

    name = "AttachExternModules"

    def __init__(self, extern_modules: Sequence[Any] | None = None):
        mods = list(extern_modules or [])
        if mods:
            raise NotImplementedError(
                f"AttachExternModules: {len(mods)} external module(s) given "
                f"({type(mods[0]).__name__}, ...); Workbench cannot link external C/C++ "
                "source or object modules into a VM executable -- pass an empty list")
        self.extern_modules: list[Any] = mods

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        return mod


__all__ = ["RewriteDataflowReshape", "RemovePurityChecking", "RewriteCUDAGraph",
           "KillAfterLastUse", "LowerRuntimeBuiltin", "ComputePrimValue", "AttachExternModules"]
