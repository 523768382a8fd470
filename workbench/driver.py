"""``workbench.compile`` / ``build`` / ``lower``: the top-level entry points, as in TVM."""
from __future__ import annotations

from typing import Any

from workbench.codegen.build import build as _build_tir
from workbench.ir.module import IRModule
from workbench.ir.transform import Pass
from workbench.target import Target
from workbench.tir.function import PrimFunc
from workbench.tir.transform.pipeline import Instrument, lower as _lower


def lower(mod: IRModule | PrimFunc, instrument: Instrument | None = None) -> IRModule:
    """Run the TIR lowering pipeline and return the lowered module (for inspection)."""
    return _lower(mod, instrument)


def build(mod: IRModule | PrimFunc, target: Any = None, name: str | None = None,
          instrument: Instrument | None = None, default_schedule: bool = False,
          pipeline: Any = None):
    """Compile the PrimFuncs of ``mod`` for ``target`` (default: the innermost
    ``with target:``, else the host ``llvm``) into a runtime Module.

    ``default_schedule=True`` first gives every PrimFunc not marked ``tir.is_scheduled`` its
    default CPU schedule (``workbench.dlight.default_schedule``): the plain loop nest of a te
    kernel becomes a parallel, vectorized, tiled one without writing a schedule.
    ``pipeline`` (TVM's ``tir_pipeline``): None or ``"default"``, or a Pass run on the module
    before the lowering pipeline, which always runs."""
    target = _target(target)
    if isinstance(mod, PrimFunc):
        mod = IRModule.from_expr(mod)
    if pipeline not in (None, "default"):
        if not isinstance(pipeline, Pass):
            raise TypeError(f"build: the TIR pipeline must be 'default', None or a Pass, got "
                            f"{pipeline!r}")
        with target:
            mod = pipeline(mod)
    if default_schedule:
        from workbench.dlight import default_schedule as _default_schedule
        mod = _default_schedule(mod, target)
    return _build_tir(mod, target, name=name, instrument=instrument)


def compile(mod: IRModule | PrimFunc, target: Any = None, *,  # noqa: A001
            relax_pipeline: Any = None, tir_pipeline: Any = None, **kwargs: Any):
    """Compile a module, as ``tvm.compile``: a module with Relax (graph) functions gives a VM
    ``Executable`` (``relax.build``, which takes ``relax_pipeline`` / ``tir_pipeline`` and
    the keyword arguments ``params``, ``fuse``, ``plan_memory``, ``instrument``,
    ``database``, ``default_schedule``); PrimFuncs alone give a runtime Module with one
    function each (``tir_pipeline`` and ``default_schedule=True``: see :func:`build`).
    ``target`` defaults to the innermost ``with target:``, else the host ``llvm``."""
    if isinstance(mod, IRModule) and _has_relax_function(mod):
        from workbench.relax.vm_build import build as relax_build  # floor 4, imported lazily
        return relax_build(mod, target, relax_pipeline=relax_pipeline,
                           tir_pipeline=tir_pipeline, **kwargs)
    return build(mod, target, pipeline=tir_pipeline, **kwargs)


def _target(target: Any) -> Target:
    if target is None:
        return Target.current() or Target("llvm")
    return target if isinstance(target, Target) else Target(target)


def _has_relax_function(mod: IRModule) -> bool:
    return any(not isinstance(f, PrimFunc) and type(f).__name__ == "Function"
               for _, f in mod.items())
