"""Per-PrimFunc passes (TVM's ``tir.transform.prim_func_pass`` / ``PrimFuncPass``).

A PrimFunc pass calls ``pass_func(func, mod, ctx) -> func`` on every PrimFunc of the module
and puts each result back under the same name; returning ``None`` removes the function, as in
TVM.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext, PassInfo, make_pass_decorator
from workbench.tir.function import PrimFunc

__all__ = ["PrimFuncPass", "prim_func_pass"]


class PrimFuncPass(Pass):
    """A pass made from ``pass_func(func, mod, ctx) -> func | None``."""

    def __init__(self, pass_func: Callable[[PrimFunc, IRModule, PassContext], Any],
                 info: PassInfo) -> None:
        self.pass_func = pass_func
        self._info = info

    @property
    def info(self) -> PassInfo:
        return self._info

    @property
    def name(self) -> str:  # type: ignore[override]
        return self._info.name

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        out = mod.copy()
        for name, func in list(mod.items()):
            if not isinstance(func, PrimFunc):
                continue
            new = self.pass_func(func, out, ctx)
            if new is None:
                del out[name]
            elif not isinstance(new, PrimFunc):
                raise TypeError(f"prim_func pass {self.name} returned a {type(new).__name__} "
                                f"for {name}, not a PrimFunc")
            elif new is not func:
                out[name] = new
        return out


def prim_func_pass(pass_func: Any = None, opt_level: int | None = None,
                   name: str | None = None, required: Iterable[str] | None = None,
                   traceable: bool = False) -> Any:
    """Make a PrimFunc pass from ``pass_func(func, mod, ctx)``, or from a class with
    ``transform_function(self, func, mod, ctx)``. Without ``pass_func``, a decorator;
    ``opt_level`` is required."""
    return make_pass_decorator("prim_func_pass", PrimFuncPass, "transform_function",
                               pass_func, opt_level, name, required, traceable)
