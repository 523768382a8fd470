"""SuggestIndexMap: a buffer layout that follows how a tiled loop nest reads the buffer.

This is the analysis behind the ``RewriteLayout`` postproc (TVM's ``SuggestIndexMap`` in
``src/tir/schedule/analysis/layout.cc``). Given one access ``B[idx]`` to a buffer, with the
indices written over the loop variables around it (the block's bindings substituted), and those
loops outermost first:

1. flatten the indices row-major: ``flat = sum(idx[d] * stride[d])``;
2. write ``flat`` as a sum of *split terms* ``(loop_var // lower) % extent * scale``: a whole
   loop, one piece of a split loop, or one piece of a fused loop (``fused // 8 % 4``);
3. require the terms to tile the buffer exactly: sorted by scale, the scales are the mixed radix
   of the extents (``1, e[-1], e[-1] * e[-2], ...``) and the extents multiply to the buffer's
   size (otherwise there is no layout to suggest: None);
4. order the terms as the loops run: by loop (outer first), pieces of one loop with the larger
   lower factor first;
5. the suggested layout has one dimension per term, in that order: new dimension ``k`` holds
   the digit of the old flattened index that term ``k`` produces.

The result is always a bijection of the buffer onto the new shape (a reshape followed by a
permutation of mixed-radix digits), so applying it with ``transform_layout`` never changes what
a function computes; the analysis only decides whether the new order is useful. For the conv2d
read ``W[ry_1, rx_1, rc_0 * 2 + rc_1, ff_1 * 4 + ff_2 * 2 + ff_3]`` under loops
``ff_1, rc_0, ff_2, ry_1, rx_1, rc_1, ff_3`` the packed shape is ``(8, 8, 2, 3, 3, 2, 2)`` and
the innermost loops walk the packed buffer contiguously.

Unit pieces (extent 1) carry nothing and are dropped. Anything else -- a variable that is not a
loop of the nest, a non-constant extent, a constant offset, a division that does not split a
piece evenly -- makes the access "not analysable" and the suggestion None.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from workbench.tir import op
from workbench.tir.arith import Analyzer
from workbench.tir.buffer import Buffer, Range
from workbench.tir.expr import (
    Add, BufferLoad, Cast, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Sub, Var,
)
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRVisitor, substitute
from workbench.tir.schedule.index_map import IndexMap
from workbench.tir.stmt import Block, BlockRealize, For

__all__ = ["SplitTerm", "split_terms", "suggest_index_map", "suggest_read_layout"]


@dataclass(frozen=True)
class SplitTerm:
    """``(var // lower) % extent * scale``: one piece of a loop variable in an index."""

    var: Var
    lower: int
    extent: int
    scale: int


class _NotSplits(Exception):
    pass


def split_terms(index: PrimExpr, extents: Mapping[Var, int]) -> tuple[list[SplitTerm], int]:
    """``index`` as ``sum(terms) + base`` over the variables of ``extents`` (each ranging over
    ``[0, extent)``); raises ValueError when it is not such a sum."""
    try:
        terms: list[SplitTerm] = []
        base = _walk(index, 1, extents, terms)
        return terms, base
    except _NotSplits as e:
        raise ValueError(f"{index} is not a sum of loop splits: {e}") from None


def _walk(e: PrimExpr, scale: int, extents: Mapping[Var, int], out: list[SplitTerm]) -> int:
    """Append ``e * scale``'s terms to ``out``; return its constant part."""
    if isinstance(e, IntImm):
        return e.value * scale
    if isinstance(e, Var):
        if e not in extents:
            raise _NotSplits(f"{e.name} is not a loop variable with a constant range from 0")
        out.append(SplitTerm(e, 1, extents[e], scale))
        return 0
    if isinstance(e, Cast):
        return _walk(e.value, scale, extents, out)
    if isinstance(e, Add):
        return _walk(e.a, scale, extents, out) + _walk(e.b, scale, extents, out)
    if isinstance(e, Sub):
        return _walk(e.a, scale, extents, out) + _walk(e.b, -scale, extents, out)
    if isinstance(e, Mul):
        if isinstance(e.b, IntImm):
            return _walk(e.a, scale * e.b.value, extents, out)
        if isinstance(e.a, IntImm):
            return _walk(e.b, scale * e.a.value, extents, out)
    if isinstance(e, (FloorDiv, FloorMod)) and isinstance(e.b, IntImm) and e.b.value > 0:
        c = e.b.value
        inner: list[SplitTerm] = []
        base = _walk(e.a, 1, extents, inner)
        if not inner:
            return (base // c if isinstance(e, FloorDiv) else base % c) * scale
        if len(inner) != 1 or inner[0].scale != 1 or base != 0:
            raise _NotSplits(f"{e} divides a sum of several pieces")
        piece = _div(inner[0], c) if isinstance(e, FloorDiv) else _mod(inner[0], c)
        if piece is not None:
            out.append(replace(piece, scale=scale))
        return 0
    raise _NotSplits(f"{type(e).__name__} {e} is not an affine split")


def _div(t: SplitTerm, c: int) -> SplitTerm | None:
    if c >= t.extent:
        return None  # always 0
    if t.extent % c:
        raise _NotSplits(f"{t.var.name}: a piece of extent {t.extent} is not divisible by {c}")
    return SplitTerm(t.var, t.lower * c, t.extent // c, 1)


def _mod(t: SplitTerm, c: int) -> SplitTerm:
    if c >= t.extent:
        return t
    if t.extent % c:
        raise _NotSplits(f"{t.var.name}: a piece of extent {t.extent} is not divisible by {c}")
    return SplitTerm(t.var, t.lower, c, 1)


def _const_ints(values: Sequence[PrimExpr]) -> list[int] | None:
    if not all(isinstance(v, IntImm) for v in values):
        return None
    return [int(v.value) for v in values]


def suggest_index_map(buffer: Buffer, indices: Sequence[PrimExpr], loops: Sequence[For],
                      predicate: PrimExpr | None = None) -> IndexMap | None:
    """The layout of ``buffer`` that follows the access ``buffer[indices]`` under ``loops``
    (outermost first; ``indices`` written over their loop variables), or None when the access
    is not analysable (see the module docstring). ``predicate`` is accepted for TVM's
    signature; an access masked by one rarely tiles the buffer exactly and then gives None."""
    shape = _const_ints(buffer.shape)
    if not shape or buffer.strides or len(indices) != len(shape):
        return None
    extents: dict[Var, int] = {}
    position: dict[Var, int] = {}
    ana = Analyzer()
    for k, lp in enumerate(loops):
        if isinstance(lp.min, IntImm) and lp.min.value == 0 and isinstance(lp.extent, IntImm):
            extents[lp.loop_var] = int(lp.extent.value)
            position[lp.loop_var] = k
            ana.bind(lp.loop_var, Range(lp.min, lp.extent), allow_override=True)
    strides = _row_major_strides(shape)
    flat = _flatten(indices, strides)
    found = None
    for candidate in (ana.simplify(flat), flat):
        try:
            found = split_terms(candidate, extents)
            break
        except ValueError:
            continue
    if found is None:
        return None
    terms, base = found
    terms = [t for t in terms if t.extent > 1]
    if base != 0 or not terms or any(t.scale <= 0 for t in terms):
        return None
    # Step 3: the pieces must tile the buffer exactly, as mixed-radix digits of `flat`.
    by_scale = sorted(terms, key=lambda t: t.scale, reverse=True)
    expect = 1
    for t in reversed(by_scale):
        if t.scale != expect:
            return None
        expect *= t.extent
    size = 1
    for n in shape:
        size *= n
    if expect != size:
        return None
    # Step 4: loop order, outer loops first; a loop's pieces with the larger lower factor first.
    order = sorted(range(len(by_scale)),
                   key=lambda k: (position[by_scale[k].var], -by_scale[k].lower))
    # Step 5: new dimension k = the digit of the old flattened index that term k makes.
    dtype = buffer.shape[0].dtype
    new_vars = tuple(Var(f"i{d}", dtype) for d in range(len(shape)))
    finals = [_digit(by_scale[k], k == 0, new_vars, shape, strides) for k in order]
    return IndexMap(new_vars, tuple(finals))


def _row_major_strides(shape: Sequence[int]) -> list[int]:
    strides, s = [], 1
    for n in reversed(shape):
        strides.append(s)
        s *= n
    return strides[::-1]


def _flatten(indices: Sequence[PrimExpr], strides: Sequence[int]) -> PrimExpr:
    flat: PrimExpr | None = None
    for idx, s in zip(indices, strides):
        idx = op.convert(idx)
        term = idx if s == 1 else op.mul(idx, op.const(s, idx.dtype))
        flat = term if flat is None else op.add(flat, term)
    return flat


def _digit(t: SplitTerm, top: bool, vars_: Sequence[Var], shape: Sequence[int],
           strides: Sequence[int]) -> PrimExpr:
    """``(flat // t.scale) % t.extent`` of the buffer index ``vars_``, as a plain split of one
    dimension when the digit lies inside it (``(i // q) % e``), else through the flattened
    index, simplified."""
    for v, n, s in zip(vars_, shape, strides):
        if t.scale % s or t.scale < s:
            continue
        q = t.scale // s
        if n % (q * t.extent):
            continue
        e: PrimExpr = v if q == 1 else op.floordiv(v, op.const(q, v.dtype))
        if q * t.extent < n:
            e = op.floormod(e, op.const(t.extent, v.dtype))
        return e
    ana = Analyzer()
    for v, n in zip(vars_, shape):
        ana.bind(v, Range(op.const(0, v.dtype), op.const(n, v.dtype)))
    flat = _flatten(vars_, strides)
    e = flat if t.scale == 1 else op.floordiv(flat, op.const(t.scale, flat.dtype))
    if not top:
        e = op.floormod(e, op.const(t.extent, flat.dtype))
    return ana.simplify(e)


# ---- where a buffer is read (TVM's BufferReadPosCollector) ------------------------------------

class _ReadCollector(IRVisitor):
    """The last load of ``buffer``: its block, the enclosing loops and its indices over them."""

    def __init__(self, buffer: Buffer) -> None:
        self.buffer = buffer
        self.loops: list[For] = []
        self.realize: BlockRealize | None = None
        self.realizes: list[BlockRealize] = []
        self.found: tuple[BlockRealize, list[For], list[PrimExpr]] | None = None

    def visit_For(self, loop: For) -> None:
        self.loops.append(loop)
        self.generic_visit(loop)
        self.loops.pop()

    def visit_BlockRealize(self, realize: BlockRealize) -> None:
        outer, self.realize = self.realize, realize
        self.realizes.append(realize)
        self.generic_visit(realize)
        self.realizes.pop()
        self.realize = outer

    def visit_BufferLoad(self, load: BufferLoad) -> None:
        self.generic_visit(load)
        if load.buffer is not self.buffer or self.realize is None:
            return
        indices = list(load.indices)
        # Bindings from the innermost block out: a blockized tile's inner block indexes with
        # its outer block's iter vars too.
        for realize in reversed(self.realizes):
            block = realize.block
            vmap = {iv.var: v for iv, v in zip(block.iter_vars, realize.iter_values)}
            indices = [substitute(i, vmap) for i in indices]
        # The anchor is the outermost block below the root that declares the read (the outer
        # block of a blockized tile), so a cache_read of it lands at the root.
        anchor = next((r for r in self.realizes[1:]
                       if any(reg.buffer is self.buffer for reg in r.block.reads)), self.realize)
        self.found = (anchor, list(self.loops), indices)


def suggest_read_layout(func: PrimFunc, buffer: Buffer) -> tuple[str, int, IndexMap] | None:
    """Where ``buffer`` is read and how to lay it out (TVM's ``GetSuggestedIndexMap``): the
    reading block's name, the buffer's index among its reads, and the suggested IndexMap; None
    when nothing reads it in a block or the access is not analysable. As in TVM the buffer is
    expected to be read by one load; with several, the last one decides."""
    col = _ReadCollector(buffer)
    col.visit(func.body)
    if col.found is None:
        return None
    realize, loops, indices = col.found
    block: Block = realize.block
    read_index = next((k for k, r in enumerate(block.reads) if r.buffer is buffer), None)
    if read_index is None:
        return None
    imap = suggest_index_map(buffer, indices, loops, realize.predicate)
    if imap is None:
        return None
    return block.name_hint, read_index, imap
