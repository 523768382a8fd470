"""Per-function Relax passes (TVM's ``relax.transform.function_pass`` / ``FunctionPass``).

A function pass calls ``pass_func(func, mod, ctx) -> func`` on every Relax function of the
module (not on PrimFuncs, nor on functions offloaded to an external codegen or composite
patterns, as TVM skips them) and puts each result back under the same name. Returning the
same object leaves the function as it was.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext, PassInfo, make_pass_decorator
from workbench.relax.expr import Function

__all__ = ["FunctionPass", "function_pass"]

FunctionPassFunc = Callable[[Function, IRModule, PassContext], Function]


class FunctionPass(Pass):
    """A pass made from ``pass_func(func, mod, ctx) -> func`` (see :func:`function_pass`)."""

    def __init__(self, pass_func: FunctionPassFunc, info: PassInfo) -> None:
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
            if not isinstance(func, Function) or _skipped(func):
                continue
            new = self.pass_func(func, out, ctx)
            if not isinstance(new, Function):
                raise TypeError(f"function pass {self.name} returned a {type(new).__name__} "
                                f"for {name}, not a relax Function")
            if new is not func:
                out[name] = new
        return out


def _skipped(func: Function) -> bool:
    return "Codegen" in func.attrs or "Composite" in func.attrs


def function_pass(pass_func: Any = None, opt_level: int | None = None,
                  name: str | None = None, required: Iterable[str] | None = None,
                  traceable: bool = False) -> Any:
    """Make a Relax function pass from ``pass_func(func, mod, ctx) -> func``, or from a class
    with ``transform_function(self, func, mod, ctx)`` (the result is then a class whose
    instances are passes). Without ``pass_func``, a decorator; ``opt_level`` is required."""
    return make_pass_decorator("function_pass", FunctionPass, "transform_function", pass_func,
                               opt_level, name, required, traceable)
