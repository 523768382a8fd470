"""``lower_match_buffer``: resolve blocks' ``match_buffers`` (what ``tensorize`` creates).

A ``MatchBufferRegion(M, src[region])`` makes buffer ``M`` a view of a sub-region of ``src``.
This pass rewrites every access ``M[i_0, ..., i_{n-1}]`` into ``src[m_0, ..., m_{lead-1},
m_lead + i_0, ..., m_{r-1} + i_{n-1}]`` (``m`` the region's mins, ``lead = rank(src) - n``),
so later passes see only ``src``. A vector index ``Ramp(b, s, L)`` of ``M`` becomes
``Ramp(m + b, s, L)``; flattening then turns it into one contiguous access even when it runs
past the last dimension of ``M`` (which ``tensorize`` allows only for a compact ``M`` over a
contiguous region). Symbolic fields of ``M`` are bound: stride variables to ``src``'s strides
(its compact strides when it has none), an ``elem_offset`` variable to the region's element
offset, shape variables to the region's extents.

In the lowering pipeline it runs after ``CompactBufferAllocation`` (TVM's order): the blocks
with match buffers are then the opaque shells ``lower_opaque_block(keep_match_buffers=True)``
left (no iter vars, init or allocations), which this pass replaces by their bodies, and a view
of an allocated buffer gets the strides and offset of the buffer as compacted. Binding them
before compaction baked the uncompacted strides into code that does its own address arithmetic
(an AMX tile load's row stride): compaction re-based the indices but not those constants, and
the kernel wrote past the compacted allocation. It also runs on block form (blocks keep their
iter vars; a shell of no iter vars, init, allocations or predicate is dissolved there too).
"""
from __future__ import annotations

from functools import reduce
from typing import Any

from workbench.ir import dtype as dt
from workbench.tir import op
from workbench.tir.buffer import Buffer, BufferRegion, Range
from workbench.tir.expr import BufferLoad, IntImm, PrimExpr, Ramp, Var
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, substitute
from workbench.tir.stmt import Block, BlockRealize, BufferStore, Stmt


def compact_strides(shape: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
    """Row-major strides of ``shape``."""
    out: list[PrimExpr] = []
    stride: PrimExpr = op.const(1, shape[-1].dtype if shape else "int32")
    for extent in reversed(shape):
        out.append(stride)
        stride = op.mul(stride, extent)
    return tuple(reversed(out))


def _as_dtype(e: PrimExpr, dtype: str) -> PrimExpr:
    """An index in another integer dtype (lanes kept)."""
    if dt.element_of(e.dtype) == dtype:
        return e
    if isinstance(e, IntImm):
        return op.const(e.value, dtype)
    if isinstance(e, Ramp):
        return Ramp(_as_dtype(e.base, dtype), _as_dtype(e.stride, dtype), e.lanes,
                    dt.with_lanes(dtype, e.lanes))
    return op.cast(dt.with_lanes(dtype, dt.lanes_of(e.dtype)), e)


class _View:
    """``M`` seen as ``src`` at ``mins`` (the leading ``lead`` dims fixed)."""

    def __init__(self, src: Buffer, mins: list[PrimExpr], lead: int) -> None:
        self.src, self.mins, self.lead = src, mins, lead

    def indices(self, idx: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        out = list(self.mins[:self.lead])
        for m, i in zip(self.mins[self.lead:], idx):
            i = _as_dtype(i, m.dtype)
            if isinstance(i, Ramp):
                out.append(Ramp(op.add(m, i.base), i.stride, i.lanes, i.dtype))
            else:
                out.append(op.add(m, i))
        return tuple(out)

    def region(self, region: tuple[Range, ...]) -> tuple[Range, ...]:
        out = [Range(m, op.const(1, m.dtype)) for m in self.mins[:self.lead]]
        for m, r in zip(self.mins[self.lead:], region):
            out.append(Range(op.add(m, _as_dtype(r.min, m.dtype)), _as_dtype(r.extent, m.dtype)))
        return tuple(out)


class _Lower(IRMutator):
    def __init__(self) -> None:
        super().__init__()
        self.views: dict[Buffer, _View] = {}

    def visit_Block(self, block: Block) -> Stmt:
        if not block.match_buffers:
            return self.generic_visit(block)
        binds: dict[Var, PrimExpr] = {}
        added = []
        for mb in block.match_buffers:
            src_region = self._source(mb.source)
            view = self._bind(mb.buffer, src_region, binds)
            self.views[mb.buffer] = view
            added.append(mb.buffer)
        # Accesses are rewritten first (the views are keyed by the match buffers as they
        # are), then the symbolic strides/offsets they may use elsewhere are bound.
        out = self.generic_visit(block.replace(match_buffers=()))
        for buf in added:
            del self.views[buf]
        if binds:
            out = out.replace(body=substitute(out.body, binds),
                              init=None if out.init is None else substitute(out.init, binds))
        return out

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        block = realize.block
        shell = bool(block.match_buffers) and not block.iter_vars and block.init is None \
            and not block.alloc_buffers and isinstance(realize.predicate, IntImm) \
            and bool(realize.predicate.value)
        out = self.generic_visit(realize)
        return out.block.body if shell else out

    def _source(self, region: BufferRegion) -> BufferRegion:
        """A source region that is itself a view (nested tensorize) in terms of its source."""
        view = self.views.get(region.buffer)
        if view is None:
            return BufferRegion(region.buffer, tuple(Range(self.visit(r.min),
                                                           self.visit(r.extent))
                                                     for r in region.region))
        return BufferRegion(view.src, view.region(region.region))

    def _bind(self, buf: Buffer, source: BufferRegion, binds: dict[Var, PrimExpr]) -> _View:
        src = source.buffer
        rank, n = len(src.shape), len(buf.shape)
        lead = rank - n
        mins = [r.min for r in source.region]
        strides = src.strides or compact_strides(src.shape)
        for var, value in zip(buf.strides, strides[lead:]):
            if isinstance(var, Var):
                binds[var] = _as_dtype(value, var.dtype)
        for var, r in zip(buf.shape, source.region[lead:]):
            if isinstance(var, Var):
                binds[var] = _as_dtype(r.extent, var.dtype)
        if isinstance(buf.elem_offset, Var):
            terms = [op.mul(m, s) for m, s in zip(mins, strides)]
            offset = reduce(op.add, terms, src.elem_offset_or_zero())
            binds[buf.elem_offset] = _as_dtype(offset, buf.elem_offset.dtype)
        return _View(src, mins, lead)

    def visit_BufferLoad(self, e: BufferLoad) -> PrimExpr:
        view = self.views.get(e.buffer)
        if view is None:
            return self.generic_visit(e)
        idx = tuple(self.visit(i) for i in e.indices)
        return BufferLoad(view.src, view.indices(idx), e.dtype, e.predicate)

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        view = self.views.get(s.buffer)
        if view is None:
            return self.generic_visit(s)
        idx = tuple(self.visit(i) for i in s.indices)
        return BufferStore(view.src, self.visit(s.value), view.indices(idx), s.predicate)

    def visit_BufferRegion(self, r: BufferRegion) -> Any:
        view = self.views.get(r.buffer)
        if view is None:
            return self.generic_visit(r)
        return BufferRegion(view.src, view.region(r.region))


def lower_match_buffer(func: PrimFunc) -> PrimFunc:
    """Replace every access through a block's match buffer by an access of its source."""
    return func.with_body(_Lower().visit(func.body))


__all__ = ["lower_match_buffer", "compact_strides"]
