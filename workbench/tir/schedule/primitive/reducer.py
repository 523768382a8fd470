"""Recognising the commutative reducer of a reduction block (what rfactor needs to know).

A block made by ``te.create_prim_func`` does not remember its ``CommReducer``: its init stores the
identity and its body stores ``combiner(old, rhs)`` with the combiner's expression inlined. As in
TVM, we recover the reducer by trying every registered pattern (``x + y`` with identity 0,
``x * y`` with 1, ``min(x, y)`` with the dtype's max, ``max(x, y)`` with its min, ...): a pattern
matches when its identity equals the init value and its combiner, with ``x`` bound to the load of
the stored element and ``y`` to anything, is the body's value. A ``te.comm_reducer`` whose
combiner has one of these shapes is therefore recognised; others can be added with
:func:`register_reducer`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from workbench.ir import dtype as dt
from workbench.ir.node import Node, field_names
from workbench.tir import op
from workbench.tir.expr import BufferLoad, FloatImm, IntImm, PrimExpr, Var
from workbench.tir.functor import substitute
from workbench.tir.stmt import BufferStore

Combiner = Callable[[PrimExpr, PrimExpr], PrimExpr]
Identity = Callable[[str], PrimExpr]


@dataclass(frozen=True)
class Reducer:
    """One single-value commutative reducer for one dtype: ``result`` over ``lhs``/``rhs``."""

    lhs: Var
    rhs: Var
    result: PrimExpr
    identity: PrimExpr

    def combine(self, lhs: PrimExpr, rhs: PrimExpr) -> PrimExpr:
        return substitute(self.result, {self.lhs: lhs, self.rhs: rhs})


_REDUCERS: list[tuple[Combiner, Identity]] = [
    (lambda x, y: op.add(x, y), lambda t: op.const(0, t)),
    (lambda x, y: op.mul(x, y), lambda t: op.const(1, t)),
    (lambda x, y: op.min(x, y), op.max_value),
    (lambda x, y: op.max(x, y), op.min_value),
]


def _float_infinity_reducers() -> list[tuple[Combiner, Identity]]:
    # Hand-written TIR often starts a float max/min at -inf/+inf rather than the dtype's limits.
    def inf(t: str) -> PrimExpr:
        if not dt.parse(t).is_float:
            raise ValueError("only floats have infinities")
        return op.infinity(t)

    def neg_inf(t: str) -> PrimExpr:
        return op.neg(inf(t))
    return [(lambda x, y: op.min(x, y), inf), (lambda x, y: op.max(x, y), neg_inf)]


_REDUCERS += _float_infinity_reducers()


def register_reducer(fcombine: Combiner, fidentity: Identity) -> None:
    """Make rfactor recognise ``fcombine(x, y)`` with identity ``fidentity(dtype)``.

    Like TVM's ``RegisterReducer``: ``fcombine`` builds the combined value of two expressions and
    ``fidentity`` the identity element for a dtype string.
    """
    _REDUCERS.append((fcombine, fidentity))


def match_reducer(init_value: PrimExpr, update: BufferStore
                  ) -> tuple[Reducer, BufferLoad, PrimExpr] | None:
    """``(reducer, lhs, rhs)`` such that ``update.value == reducer.combine(lhs, rhs)``, where
    ``lhs`` loads the element ``update`` stores and ``reducer.identity == init_value``; None if
    no registered reducer fits."""
    dtype = update.value.dtype
    for fcombine, fidentity in _REDUCERS:
        try:
            x, y = Var("x", dtype), Var("y", dtype)
            reducer = Reducer(x, y, fcombine(x, y), fidentity(dtype))
        except (TypeError, ValueError):
            continue  # this pattern does not exist for the dtype (e.g. infinity of an int)
        if not _same_const(reducer.identity, init_value):
            continue
        got = _match(reducer.result, update.value, (x, y))
        if got is None:
            continue
        # The combiner is commutative, so the stored element may sit on either side.
        for lhs_side, rhs_side in ((x, y), (y, x)):
            lhs = got[lhs_side]
            if _is_load_of(lhs, update):
                return reducer, lhs, got[rhs_side]
    return None


def _same_const(a: PrimExpr, b: PrimExpr) -> bool:
    if isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm)):
        return a.dtype == b.dtype and a.value == b.value
    return _match(a, b, ()) is not None


def _is_load_of(e: PrimExpr, store: BufferStore) -> bool:
    return isinstance(e, BufferLoad) and e.buffer is store.buffer and \
        len(e.indices) == len(store.indices) and \
        all(_match(a, b, ()) is not None for a, b in zip(e.indices, store.indices))


def _match(pattern: object, value: object, holes: tuple[Var, ...]) -> dict[Var, PrimExpr] | None:
    """Bind each hole of ``pattern`` so that it equals ``value``; other vars match by identity."""
    bound: dict[Var, PrimExpr] = {}

    def walk(p: object, v: object) -> bool:
        if isinstance(p, Var) and p in holes:
            if p in bound:
                return walk(bound[p], v) if bound[p] is not v else True
            bound[p] = v  # type: ignore[assignment]
            return True
        if p is v:
            return True
        if isinstance(p, Node):
            if type(p) is not type(v):
                return False
            if isinstance(p, Var):
                return False  # distinct variables
            return all(walk(getattr(p, f), getattr(v, f)) for f in field_names(type(p)))
        if isinstance(p, tuple):
            return isinstance(v, tuple) and len(p) == len(v) and \
                all(walk(a, b) for a, b in zip(p, v))
        return p == v

    return bound if walk(pattern, value) else None


__all__ = ["Reducer", "register_reducer", "match_reducer"]
