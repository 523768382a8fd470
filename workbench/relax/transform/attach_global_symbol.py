"""``AttachGlobalSymbol``: every function gets the external name it is called by (TVM's pass).

Contract: ``AttachGlobalSymbol()(mod)`` returns a module where every PrimFunc's
``global_symbol`` attr is its name in the module (kernels are found by that name in the
compiled library) and every non-private Relax function keeps or gets its name as
``global_symbol``. Private Relax functions (fused ones are gone by now) stay private.
"""
from __future__ import annotations

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.tir.function import PrimFunc


class AttachGlobalSymbol(Pass):
    """The pass object: ``mod = AttachGlobalSymbol()(mod)``."""

    name = "AttachGlobalSymbol"

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        out = mod.copy()
        for name, func in mod.items():
            if isinstance(func, PrimFunc) and func.attrs.get("global_symbol") != name:
                out[name] = func.with_attr("global_symbol", name)
        return out


__all__ = ["AttachGlobalSymbol"]
