"""The ``reads`` / ``writes`` regions of a block, from the buffer accesses in its body.

Regions are expressed over the block's iteration variables, as in TVM: one :class:`Range` per
dimension, describing what a single block instance touches.

- All accesses of a dimension have the same index up to a constant offset (``v_i``,
  ``v_i - 1``, ``v_i + 1``): ``Range(index + min_offset, max_offset - min_offset + 1)``; for one
  access that is ``Range(index, 1)``.
- Otherwise the bounding box of the indices over the block variables' domains, from
  :func:`index_bounds` below (affine forms, Mul/FloorDiv/FloorMod by constants, Min/Max).
- An index that reads memory or calls a function, or that the helper cannot bound: the full
  dimension ``Range(0, shape[d])``.

A buffer the block writes is not listed among its reads (TVM's convention for reduction
blocks, whose update reads the value it accumulates into).

``index_bounds`` builds the bounds from the index without simplifying them. It is not
``Analyzer.int_set``: switching would change the regions of every block te creates, so it stays
its own evaluator (docs/internals.md, "Analysis floor", lists the interval evaluators and who
uses which).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from workbench.ir.dispatch import TypeTable
from workbench.ir.node import field_names
from workbench.tir import op
from workbench.tir.buffer import Buffer, BufferRegion, Range
from workbench.tir.expr import (
    Add, BufferLoad, Call, Cast, FloorDiv, FloorMod, IntImm, Max, Min, Mul, PrimExpr, Sub, Var,
)
from workbench.tir.functor import IRVisitor
from workbench.tir.stmt import BufferStore, IterVar, Stmt

Bounds = tuple[PrimExpr, PrimExpr]  # inclusive (lo, hi)


def block_regions(body: Stmt, init: Stmt | None, iter_vars: Sequence[IterVar]
                  ) -> tuple[tuple[BufferRegion, ...], tuple[BufferRegion, ...]]:
    """``(reads, writes)`` of a block with this body/init over ``iter_vars``, in access order."""
    acc = _Accesses()
    acc.visit(body)
    if init is not None:
        acc.visit(init)
    dom = {iv.var: (iv.dom.min, op.sub(op.add(iv.dom.min, iv.dom.extent), 1)) for iv in iter_vars}
    writes = tuple(_region(b, acc.writes[b], dom) for b in acc.writes)
    reads = tuple(_region(b, acc.reads[b], dom) for b in acc.reads if b not in acc.writes)
    return reads, writes


class _Accesses(IRVisitor):
    """Index tuples per buffer, reads and writes separately, in first-access order."""

    def __init__(self) -> None:
        self.reads: dict[Buffer, list[tuple[PrimExpr, ...]]] = {}
        self.writes: dict[Buffer, list[tuple[PrimExpr, ...]]] = {}

    def visit_BufferLoad(self, load: BufferLoad) -> None:
        self.reads.setdefault(load.buffer, []).append(load.indices)
        self.generic_visit(load)

    def visit_BufferStore(self, store: BufferStore) -> None:
        self.visit(store.value)
        self.visit_field(store.indices)
        self.writes.setdefault(store.buffer, []).append(store.indices)


def _region(buf: Buffer, accesses: list[tuple[PrimExpr, ...]], dom: dict[Var, Bounds]
            ) -> BufferRegion:
    return BufferRegion(buf, tuple(_dim_range([a[d] for a in accesses], buf.shape[d], dom)
                                   for d in range(len(buf.shape))))


def _dim_range(indices: list[PrimExpr], extent: PrimExpr, dom: dict[Var, Bounds]) -> Range:
    full = Range(op.const(0, extent.dtype), extent)
    if any(_reads_memory(i) for i in indices):
        return full
    if len(indices) == 1 or _all_identical(indices):
        return Range(indices[0], op.const(1, indices[0].dtype))
    offsets = [_split_offset(i) for i in indices]
    bases = {_key(b) for b, _ in offsets}
    if len(bases) == 1:
        base = offsets[0][0]
        lo = min(c for _, c in offsets)
        hi = max(c for _, c in offsets)
        dtype = indices[0].dtype
        start = op.const(lo, dtype) if base is None else op.add(base, op.const(lo, dtype))
        return Range(start, op.const(hi - lo + 1, dtype))
    boxes = [index_bounds(i, dom) for i in indices]
    if any(b is None for b in boxes):
        return full
    lo = boxes[0][0]
    hi = boxes[0][1]
    for blo, bhi in boxes[1:]:
        lo, hi = op.min(lo, blo), op.max(hi, bhi)
    return Range(lo, op.add(op.sub(hi, lo), 1))


def _all_identical(indices: list[PrimExpr]) -> bool:
    k = _key(indices[0])
    return all(_key(i) == k for i in indices[1:])


def _reads_memory(e: PrimExpr) -> bool:
    found = []

    class _F(IRVisitor):
        def visit_BufferLoad(self, _: BufferLoad) -> None:
            found.append(True)

        def visit_Call(self, _: Call) -> None:
            found.append(True)

    _F().visit(e)
    return bool(found)


def _split_offset(e: PrimExpr) -> tuple[PrimExpr | None, int]:
    """``e == base + c`` with integer ``c``; ``base`` is None when ``e`` is constant."""
    if isinstance(e, IntImm):
        return None, e.value
    if isinstance(e, Add) and isinstance(e.b, IntImm):
        base, c = _split_offset(e.a)
        return base, c + e.b.value
    if isinstance(e, Add) and isinstance(e.a, IntImm):
        base, c = _split_offset(e.b)
        return base, c + e.a.value
    if isinstance(e, Sub) and isinstance(e.b, IntImm):
        base, c = _split_offset(e.a)
        return base, c - e.b.value
    return e, 0


def _key(e: Any) -> Any:
    """A hashable structural key: same key means the same expression (Vars by identity)."""
    if e is None:
        return None
    if isinstance(e, Var):
        return ("Var", id(e))
    if isinstance(e, IntImm):
        return ("IntImm", e.dtype, e.value)
    if isinstance(e, tuple):
        return tuple(_key(x) for x in e)
    if isinstance(e, Buffer):
        return ("Buffer", id(e))
    if hasattr(type(e), "__dataclass_fields__"):
        return (type(e).__name__,) + tuple(_key(getattr(e, f)) for f in field_names(type(e)))
    return e


# ---- interval bounds of index expressions ---------------------------------------------------

def index_bounds(e: PrimExpr, dom: dict[Var, Bounds]) -> Bounds | None:
    """Inclusive symbolic ``(lo, hi)`` of ``e`` when each Var in ``dom`` ranges over its
    (inclusive) bounds; the bounds are built from ``e``, not simplified.

    Vars not in ``dom`` (shape variables) are fixed symbols. ``None`` when not analyzable.
    """
    h = _BOUND.lookup(type(e))
    return None if h is None else h(e, dom)


def _b_var(e: Var, dom: dict[Var, Bounds]) -> Bounds:
    return dom.get(e, (e, e))


def _b_const(e: IntImm, dom: dict[Var, Bounds]) -> Bounds:
    return (e, e)


def _both(e: Any, dom: dict[Var, Bounds]) -> tuple[Bounds, Bounds] | None:
    a, b = index_bounds(e.a, dom), index_bounds(e.b, dom)
    return None if a is None or b is None else (a, b)


def _b_add(e: Add, dom: dict[Var, Bounds]) -> Bounds | None:
    ab = _both(e, dom)
    return None if ab is None else (op.add(ab[0][0], ab[1][0]), op.add(ab[0][1], ab[1][1]))


def _b_sub(e: Sub, dom: dict[Var, Bounds]) -> Bounds | None:
    ab = _both(e, dom)
    return None if ab is None else (op.sub(ab[0][0], ab[1][1]), op.sub(ab[0][1], ab[1][0]))


def _b_mul(e: Mul, dom: dict[Var, Bounds]) -> Bounds | None:
    if isinstance(e.b, IntImm):
        x, c = e.a, e.b
    elif isinstance(e.a, IntImm):
        x, c = e.b, e.a
    else:
        return None
    b = index_bounds(x, dom)
    if b is None:
        return None
    lo, hi = op.mul(b[0], c), op.mul(b[1], c)
    return (lo, hi) if c.value >= 0 else (hi, lo)


def _b_floordiv(e: FloorDiv, dom: dict[Var, Bounds]) -> Bounds | None:
    if not (isinstance(e.b, IntImm) and e.b.value > 0):
        return None
    b = index_bounds(e.a, dom)
    return None if b is None else (op.floordiv(b[0], e.b), op.floordiv(b[1], e.b))


def _b_floormod(e: FloorMod, dom: dict[Var, Bounds]) -> Bounds | None:
    if not (isinstance(e.b, IntImm) and e.b.value > 0):
        return None
    b = index_bounds(e.a, dom)
    if (b is not None and isinstance(b[0], IntImm) and isinstance(b[1], IntImm)
            and 0 <= b[0].value and b[1].value < e.b.value):
        return b
    return (op.const(0, e.dtype), op.const(e.b.value - 1, e.dtype))


def _b_min(e: Min, dom: dict[Var, Bounds]) -> Bounds | None:
    ab = _both(e, dom)
    return None if ab is None else (op.min(ab[0][0], ab[1][0]), op.min(ab[0][1], ab[1][1]))


def _b_max(e: Max, dom: dict[Var, Bounds]) -> Bounds | None:
    ab = _both(e, dom)
    return None if ab is None else (op.max(ab[0][0], ab[1][0]), op.max(ab[0][1], ab[1][1]))


def _b_cast(e: Cast, dom: dict[Var, Bounds]) -> Bounds | None:
    b = index_bounds(e.value, dom)
    return None if b is None else (op.cast(e.dtype, b[0]), op.cast(e.dtype, b[1]))


_BOUND: TypeTable[Callable[[Any, dict[Var, Bounds]], Bounds | None]] = TypeTable({
    Var: _b_var, IntImm: _b_const, Add: _b_add, Sub: _b_sub, Mul: _b_mul,
    FloorDiv: _b_floordiv, FloorMod: _b_floormod, Min: _b_min, Max: _b_max, Cast: _b_cast,
})


#: The name te used before the move.
bound = index_bounds

__all__ = ["Bounds", "block_regions", "index_bounds"]
