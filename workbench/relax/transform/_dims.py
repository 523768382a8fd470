"""Shape dimensions that graph rewrites can compare and multiply whether they are constants or
symbolic (a dynamic sequence length ``s``, ``3 * s``).

A :class:`Dim` is a monomial ``coef * v1 * v2 * ...`` over tir Vars, which covers what the
importers put in shapes (``s``, ``1``, ``4 * s`` after a reshape that merges dims). Two Dims
are equal when they are the same monomial -- the same variables by identity, as everywhere in
the IR -- and a constant Dim equals the int of its value, so pattern code written for int
shapes (``shape[-2:] == (s, h)``, ``d in (1, f)``, ``math.prod``) keeps working unchanged on
symbolic ones. A dim that is not a monomial (``s + 1``, ``s // 2``) has no Dim: the shape is
then unknown to the passes, which leave such code alone (as they did for every symbolic shape).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

from workbench.relax.struct_info import TensorStructInfo
from workbench.tir import expr as E


@dataclass(frozen=True, eq=False)
class Dim:
    """``coef`` times the product of ``syms`` (Vars, sorted by name then identity); ``expr``
    is a PrimExpr with that value, for building new shapes."""

    coef: int
    syms: tuple[E.Var, ...] = ()
    expr: Any = field(default=None, repr=False)

    @property
    def value(self) -> int | None:
        """The int value of a constant dim, else None."""
        return None if self.syms else self.coef

    def _key(self) -> tuple:
        return (self.coef, tuple(id(v) for v in self.syms))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Dim):
            return self._key() == other._key()
        if isinstance(other, int) or hasattr(other, "__index__"):
            return not self.syms and self.coef == int(other)  # type: ignore[call-overload]
        return NotImplemented

    def __ne__(self, other: object) -> bool:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    def __hash__(self) -> int:
        # A constant hashes like its int, so ``Dim(4) in {4}`` and dict keys agree.
        return hash(self.coef) if not self.syms else hash(self._key())

    def __mul__(self, other: Any) -> "Dim":
        o = other if isinstance(other, Dim) else const(int(other))
        syms = tuple(sorted(self.syms + o.syms, key=_sym_order))
        return Dim(self.coef * o.coef, syms, _mul_expr(self.expr, o.expr))

    __rmul__ = __mul__

    def __int__(self) -> int:
        if self.syms:
            raise TypeError(f"the dimension {self} is symbolic, not an int")
        return self.coef

    __index__ = __int__

    def __str__(self) -> str:
        names = [v.name for v in self.syms]
        return "*".join(([str(self.coef)] if self.coef != 1 or not names else []) + names)


def _sym_order(v: E.Var) -> tuple[str, int]:
    return (v.name, id(v))


def _mul_expr(a: Any, b: Any) -> Any:
    if isinstance(a, E.IntImm) and a.value == 1:
        return b
    if isinstance(b, E.IntImm) and b.value == 1:
        return a
    return a * b


def const(value: int) -> Dim:
    """The constant dim ``value``."""
    return Dim(int(value), (), E.IntImm("int64", int(value)))


def dim(e: Any) -> Dim | None:
    """``e`` (an int or a PrimExpr) as a Dim, or None when it is not a monomial."""
    if isinstance(e, Dim):
        return e
    if isinstance(e, int):
        return const(e)
    if isinstance(e, E.IntImm):
        return Dim(e.value, (), e)
    if isinstance(e, E.Var):
        return Dim(1, (e,), e)
    if isinstance(e, E.Mul):
        a, b = dim(e.a), dim(e.b)
        if a is None or b is None:
            return None
        out = a * b
        return Dim(out.coef, out.syms, e)
    return None


def dims(values: Sequence[Any] | None) -> tuple[Dim, ...] | None:
    """Every value as a Dim, or None when one is not a monomial (or ``values`` is None)."""
    if values is None:
        return None
    out = tuple(dim(v) for v in values)
    return None if any(d is None for d in out) else out  # type: ignore[return-value]


def shape_of(e: Any) -> tuple[Dim, ...] | None:
    """The shape of a tensor-valued Relax expression as Dims, or None when its rank or a dim is
    unknown (or it is not a tensor)."""
    si = getattr(e, "struct_info", None)
    if not isinstance(si, TensorStructInfo) or si.shape is None:
        return None
    return dims(si.values)


def prod(ds: Sequence[Any]) -> Dim:
    """The product of ``ds`` (1 for none)."""
    return math.prod(ds, start=const(1))


def exprs(ds: Sequence[Any]) -> list[Any]:
    """``ds`` as PrimExprs / ints for a new ``ShapeExpr``."""
    return [d.expr if isinstance(d, Dim) else d for d in ds]


def is_symbolic(ds: Sequence[Any] | None) -> bool:
    """Whether some dim of ``ds`` depends on a variable."""
    return ds is not None and any(isinstance(d, Dim) and d.syms for d in ds)


__all__ = ["Dim", "const", "dim", "dims", "shape_of", "prod", "exprs", "is_symbolic"]
