"""``workbench.compile`` / ``build`` / ``lower``: the top-level entry points, as in TVM."""
from __future__ import annotations

from typing import Any

from workbench.codegen.build import build as _build_tir
from workbench.ir.module import IRModule
from workbench.tir.function import PrimFunc
from workbench.tir.transform.pipeline import Instrument, lower as _lower


def lower(mod: IRModule | PrimFunc, instrument: Instrument | None = None) -> IRModule:
    """Run the TIR lowering pipeline and return the lowered module (for inspection)."""
    return _lower(mod, instrument)


def build(mod: IRModule | PrimFunc, target: Any = "llvm", name: str | None = None,
          instrument: Instrument | None = None, default_schedule: bool = False):
    """Compile the PrimFuncs of ``mod`` for ``target`` into a runtime Module.

    ``default_schedule=True`` first gives every PrimFunc not marked ``tir.is_scheduled`` its
    default CPU schedule (``workbench.dlight.default_schedule``): the plain loop nest of a te
    kernel becomes a parallel, vectorized, tiled one without writing a schedule."""
    if default_schedule:
        from workbench.dlight import default_schedule as _default_schedule
        mod = _default_schedule(mod, target)
    return _build_tir(mod, target, name=name, instrument=instrument)


def compile(mod: IRModule | PrimFunc, target: Any = "llvm", **kwargs: Any):  # noqa: A001
    """Compile a module, as ``tvm.compile``: a module with Relax (graph) functions gives a VM
    ``Executable`` (``relax.build``; keyword arguments ``params``, ``fuse``, ``plan_memory``,
    ``relax_pipeline``, ``instrument``, ``database``, ``default_schedule``); PrimFuncs alone
    give a runtime Module with one function each (``default_schedule=True``: see
    :func:`build`)."""
    if isinstance(mod, IRModule) and _has_relax_function(mod):
        from workbench.relax.vm_build import build as relax_build  # floor 4, imported lazily
        return relax_build(mod, target, **kwargs)
    return build(mod, target, **kwargs)


def _has_relax_function(mod: IRModule) -> bool:
    return any(not isinstance(f, PrimFunc) and type(f).__name__ == "Function"
               for _, f in mod.items())
