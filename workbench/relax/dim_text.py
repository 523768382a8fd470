"""Text of shape dimensions as Relax shows them: ``n * 3``, ``n // 2`` (int64 constants bare,
as TVM's Relax printer writes them), falling back to the TIR printer for anything unusual."""
from __future__ import annotations

from typing import Any, Callable

from workbench.tir.expr import Add, FloorDiv, FloorMod, IntImm, Max, Min, Mul, PrimExpr, Sub, Var

_INFIX: dict[type, tuple[str, int]] = {Add: ("+", 1), Sub: ("-", 1), Mul: ("*", 2),
                                        FloorDiv: ("//", 2), FloorMod: ("%", 2)}


def dim_text(e: PrimExpr, var_name: Callable[[Var], str] | None = None,
             fallback: Callable[[PrimExpr], str] | None = None) -> str:
    """``e`` as text; ``var_name`` names variables, ``fallback`` prints other expressions."""
    return _text(e, var_name or (lambda v: v.name), fallback or _tir_text)[0]


def _tir_text(e: PrimExpr) -> str:
    from workbench.tir.printer import expr_text
    return expr_text(e)


def _text(e: Any, name: Callable, fallback: Callable) -> tuple[str, int]:
    if isinstance(e, IntImm):
        return str(e.value), 3
    if isinstance(e, Var):
        return name(e), 3
    infix = _INFIX.get(type(e))
    if infix is not None:
        sym, prec = infix
        a, pa = _text(e.a, name, fallback)
        b, pb = _text(e.b, name, fallback)
        a = f"({a})" if pa < prec else a
        b = f"({b})" if pb <= prec else b  # left-associative: parenthesise the right side
        return f"{a} {sym} {b}", prec
    if isinstance(e, (Min, Max)):
        fn = "T.min" if isinstance(e, Min) else "T.max"
        return f"{fn}({_text(e.a, name, fallback)[0]}, {_text(e.b, name, fallback)[0]})", 3
    return fallback(e), 0


def dims_text(dims: Any) -> str:
    """``(n, 3)`` for a sequence of dims, ``(unknown shape)`` for None."""
    if dims is None:
        return "(unknown shape)"
    parts = [dim_text(d) for d in dims]
    return f"({parts[0]},)" if len(parts) == 1 else f"({', '.join(parts)})"


__all__ = ["dim_text", "dims_text"]
