"""Cache and storage primitives: cache_read, cache_write, set_scope, storage_align.

Pure functions over a PrimFunc and its :class:`FuncIndex`, with TVM's semantics:

- ``cache_read`` adds a copy block ``<buf>_<scope>`` that copies a buffer into a new buffer of
  the given scope, placed after the buffer's writer and before its first consumer (at the start
  of the scope for an input buffer), and makes the consumers read the copy.
- ``cache_write`` makes the writer write a new buffer and adds a copy block after it (before the
  buffer's first other consumer) that writes the original buffer back.
- ``set_scope`` changes the storage scope of an allocated buffer.
- ``storage_align`` records ``[buffer_index, axis, factor, offset]`` in the writer block's
  ``"buffer_dim_align"`` annotation; lowering pads the buffer's strides accordingly.

The copy block covers the region the writer produces below the insertion point (the whole
buffer when that point is the scope root); the new buffer always has the original's full shape.
"""
from __future__ import annotations

from typing import Callable, Sequence

from workbench.ir.node import FrozenDict
from workbench.tir import op
from workbench.tir.arith import Analyzer
from workbench.tir.buffer import Buffer, BufferRegion, Range
from workbench.tir.expr import BufferLoad, PrimExpr, Var
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, IRVisitor, substitute
from workbench.tir.schedule.analysis.dataflow import check_block_dataflow
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.primitive import annotations as A
from workbench.tir.schedule.state import BlockInfo, FuncIndex, replace_stmt
from workbench.tir.schedule.utils import blocks_under, realizes_under, unique_name
from workbench.tir.stmt import (
    Block, BlockRealize, BufferStore, For, ForKind, IterType, IterVar, SeqStmt, Stmt,
)

STORAGE_SCOPES = ("global", "local")
DIM_ALIGN_KEY = A.DIM_ALIGN_KEY


# ---- shared helpers -------------------------------------------------------------------------

def check_scope(prim: str, subject: str, scope: str) -> None:
    if scope not in STORAGE_SCOPES:
        raise ScheduleError(prim, subject, f"storage scope {scope!r} is not supported on CPU; "
                            f"use one of {list(STORAGE_SCOPES)}")


def access_buffer(prim: str, block: Block, index: int, is_write: bool) -> Buffer:
    """The buffer of the block's ``index``-th read (or write) region."""
    regions = block.writes if is_write else block.reads
    kind = "write" if is_write else "read"
    if not isinstance(index, int) or not 0 <= index < len(regions):
        raise ScheduleError(prim, f"block {block.name_hint!r}", f"{kind} buffer index {index} is "
                            f"out of range: the block has {len(regions)} {kind} region(s) "
                            f"{[r.buffer.name for r in regions]}")
    return regions[index].buffer


def scope_path(info: BlockInfo) -> tuple[Block, tuple[Stmt, ...]]:
    """The block's scope block and that block's ancestors (as ``replace_stmt`` wants them)."""
    for k in range(len(info.ancestors) - 1, -1, -1):
        if isinstance(info.ancestors[k], Block):
            return info.ancestors[k], info.ancestors[:k]
    raise AssertionError("every block but the root has a scope block")


def buffer_names(func: PrimFunc) -> set[str]:
    names = {b.name for b in func.buffer_map.values()}
    for b in blocks_under(func.body):
        names.update(buf.name for buf in b.alloc_buffers)
    return names


def with_scope(buf: Buffer, scope: str, name: str) -> Buffer:
    """A new buffer like ``buf`` (new data variable) in ``scope`` (TVM's ``WithScope``)."""
    return buf.replace(data=Var(name, "handle"), name=name, scope=scope)


class RedirectBuffer(IRMutator):
    """Every use of buffer ``old`` (loads, stores, regions, allocations) becomes ``new``."""

    def __init__(self, old: Buffer, new: Buffer) -> None:
        super().__init__()
        self.old, self.new = old, new

    def visit_Buffer(self, buf: Buffer) -> Buffer:
        return self.new if buf is self.old else buf


def alloc_site(index: FuncIndex, buf: Buffer) -> tuple[Block, tuple[Stmt, ...]] | None:
    """The block allocating ``buf`` and its ancestors, or None (a parameter or match buffer)."""
    for info in index.blocks.values():
        if any(b is buf for b in info.block.alloc_buffers):
            return info.block, info.ancestors + (info.realize,)
    return None


def _descendant_names(block: Block) -> set[str]:
    return {b.name_hint for b in blocks_under(block.body)}


def _writes(block: Block, buf: Buffer) -> bool:
    return any(r.buffer is buf for r in block.writes)


def _reads(block: Block, buf: Buffer) -> bool:
    return any(r.buffer is buf for r in block.reads)


# ---- where the copy block goes ---------------------------------------------------------------

class _LocDetector(IRVisitor):
    """TVM's CacheLocDetector: the lowest statement (loop or scope block) containing the
    writer and a related block, and the position in its body sequence of the first subtree
    holding a related block (after the writer)."""

    def __init__(self, scope: Block, writer: Block | None, related: list[Block]) -> None:
        self.scope, self.writer = scope, writer
        self.related = {id(b) for b in related}
        self.visited_block = self.visited_related = False
        self.loc: Stmt | None = None
        self.pos = -1

    def visit_SeqStmt(self, seq: SeqStmt) -> None:
        previous = self.visited_block
        self.visited_block = False
        for i, s in enumerate(seq.seq):
            if self.pos != -1:
                break
            self.visit(s)
            if self.visited_block and self.visited_related and self.pos == -1:
                self.pos = i
                break
            if self.visited_related:
                break
        self.visited_block = self.visited_block or previous

    def visit_Block(self, block: Block) -> None:
        if block is self.scope:
            # only the body: a loop of the scope's own init (a blockized reduction's) would
            # otherwise be taken for the location, and it holds neither block
            self.visit(block.body)
            if self.visited_related and self.loc is None:
                self.loc = block
                if not self.visited_block and self.pos == -1:
                    self.pos = 0
            return
        if block is self.writer:
            self.visited_block = True
        elif id(block) in self.related:
            self.visited_related = True

    def visit_For(self, loop: For) -> None:
        self.generic_visit(loop)
        if self.visited_block and self.visited_related and self.loc is None and self.pos != -1:
            self.loc = loop


def _body_len(stmt: Stmt) -> int:
    return len(stmt.seq) if isinstance(stmt, SeqStmt) else 1


def _detect(prim: str, scope: Block, writer: Block | None, related: list[Block]
            ) -> tuple[Stmt, int]:
    if not related:
        return scope, _body_len(scope.body)
    det = _LocDetector(scope, writer, related)
    det.visit(scope)
    if det.loc is None or det.pos < 0:
        raise ScheduleError(prim, f"block {writer.name_hint if writer else scope.name_hint!r}",
                            "cannot find where to put the copy: a consumer runs before the "
                            "buffer's producer")
    return det.loc, det.pos


def _insert(body: Stmt, pos: int, stage: Stmt) -> Stmt:
    items = list(body.seq) if isinstance(body, SeqStmt) else [body]
    items.insert(pos, stage)
    return SeqStmt(tuple(items))


# ---- the copied region and the copy block ----------------------------------------------------

def _relaxed_region(info: BlockInfo, region: BufferRegion, loc: Stmt) -> list[Range]:
    """The block's region with the loops between ``loc`` and the block relaxed to their ranges
    (TVM's RelaxBufferRegion); an unbounded dimension covers the whole buffer."""
    realize, block = info.realize, info.block
    vmap = {iv.var: v for iv, v in zip(block.iter_vars, realize.iter_values)}
    cut = next(k for k, s in enumerate(info.ancestors) if s is loc) + 1
    below = info.ancestors[cut:]
    dom = {s.loop_var: Range(s.min, s.extent) for s in below if isinstance(s, For)}
    ana = Analyzer()
    for s in info.ancestors[:cut]:  # the loops that stay: their ranges bound the region
        if isinstance(s, For):
            ana.bind(s.loop_var, Range(s.min, s.extent), allow_override=True)
    out = []
    for r, dim in zip(region.region, region.buffer.shape):
        lo_set = ana.int_set(substitute(r.min, vmap), dom)
        hi_set = ana.int_set(substitute(op.sub(op.add(r.min, r.extent), 1), vmap), dom)
        if not (lo_set.has_lower_bound() and hi_set.has_upper_bound()):
            out.append(Range(op.const(0, dim.dtype), dim))
            continue
        lo = ana.simplify(lo_set.min_value)
        hi = ana.simplify(hi_set.max_value)
        # Relaxing ignores the block's predicate: a non-dividing split makes the loops cover
        # more than the buffer (3 x 3 iterations over 8 rows); the copy must stay inside it.
        out.append(_clamped(ana, lo, hi, dim))
    return out


def _clamped(ana: Analyzer, lo: PrimExpr, hi: PrimExpr, dim: PrimExpr) -> Range:
    """``[lo, hi]`` intersected with ``[0, dim)``, as a Range."""
    if not ana.can_prove(op.ge(lo, 0)):
        lo = ana.simplify(op.max(lo, op.const(0, lo.dtype)))
    if not ana.can_prove(op.lt(hi, dim)):
        hi = ana.simplify(op.min(hi, op.sub(dim, 1)))
    return Range(lo, ana.simplify(op.add(op.sub(hi, lo), 1)))


def _clamp_region(scope: Block, region: Sequence[Range], buf: Buffer) -> list[Range]:
    """A region of ``buf`` over ``scope``'s iteration variables, clamped to the buffer: a
    block's declared read region may reach outside it where the accesses are guarded (a
    padding stage reads ``X[i - 1]`` under ``if i >= 1``), and a copy of it must not."""
    ana = Analyzer()
    for iv in scope.iter_vars:
        ana.bind(iv.var, iv.dom)
    return [_clamped(ana, r.min, op.sub(op.add(r.min, r.extent), 1), dim)
            for r, dim in zip(region, buf.shape)]


def _copy_stage(name: str, region: list[Range], src: Buffer, dst: Buffer,
                aligns: Sequence[tuple[Buffer, int, int, int]] = ()) -> tuple[Stmt, Block]:
    """``for ax...: with block(name): dst[v...] = src[v...]`` over ``region`` (TVM's
    MakeCacheStage with the full-region buffer); ``aligns`` are storage_align entries of
    ``dst`` the copy block takes over."""
    ana = Analyzer()
    loop_vars = [Var(f"ax{k}", r.extent.dtype) for k, r in enumerate(region)]
    iter_vars, idx = [], []
    for k, dim in enumerate(src.shape):
        v = Var(f"v{k}", dim.dtype)
        iter_vars.append(IterVar(Range(op.const(0, dim.dtype), dim), v, IterType.DATA_PAR))
        idx.append(v)
    point = tuple(Range(v, op.const(1, v.dtype)) for v in idx)
    block = Block(tuple(iter_vars), (BufferRegion(src, point),), (BufferRegion(dst, point),),
                  name, BufferStore(dst, BufferLoad(src, tuple(idx), src.dtype), tuple(idx)))
    if aligns:
        block = A.carry_dim_align(block, block, lambda buf: True, aligns)
    bindings = tuple(ana.simplify(op.add(r.min, lv)) for r, lv in zip(region, loop_vars))
    stmt: Stmt = BlockRealize(bindings, op.const(True), block)
    for lv, r in reversed(list(zip(loop_vars, region))):
        stmt = For(lv, op.const(0, lv.dtype), r.extent, ForKind.SERIAL, stmt)
    return stmt, block


class _CacheRewriter(IRMutator):
    """Rewrite a scope: redirect chosen blocks to the cache buffer, insert the copy stage."""

    REDIRECT, SKIP, DESCEND = "redirect", "skip", "descend"

    def __init__(self, action: Callable[[Block], str], redirect: RedirectBuffer,
                 loc: Stmt, pos: int, stage: Stmt) -> None:
        super().__init__()
        self.action, self.redirect = action, redirect
        self.loc, self.pos, self.stage = loc, pos, stage

    def visit_Block(self, block: Block) -> Stmt:
        what = self.action(block)
        if what == self.SKIP:
            return block
        if what == self.REDIRECT:
            # storage_align entries follow their buffer: a redirected write loses its entry
            # (cache_write hands it to the copy block, which now writes the buffer).
            return A.carry_dim_align(block, self.redirect.visit(block), lambda buf: True)
        new = self.generic_visit(block)
        if block is self.loc:
            new = new.replace(body=_insert(new.body, self.pos, self.stage))
        return new

    def visit_For(self, loop: For) -> Stmt:
        new = self.generic_visit(loop)
        if loop is self.loc:
            new = new.replace(body=_insert(new.body, self.pos, self.stage))
        return new


def _check_not_initialised_outside(prim: str, subject: str, info: BlockInfo, buf: Buffer
                                   ) -> None:
    """Refuse a buffer that the init of an enclosing block writes (the inner block of a
    blockized reduction accumulates into it): a cache inside the scope would never see that
    initialisation (TVM does not check this and leaves the cache uninitialised)."""
    for anc in info.ancestors:
        if isinstance(anc, Block) and anc.init is not None and _stores_to(anc.init, buf):
            raise ScheduleError(prim, subject, f"buffer {buf.name!r} is initialised by the init "
                                f"of the enclosing block {anc.name_hint!r}; a cache inside it "
                                "would miss that initialisation")


def _stores_to(stmt: Stmt, buf: Buffer) -> bool:
    found: list[bool] = []

    class _V(IRVisitor):
        def visit_BufferStore(self, store: BufferStore) -> None:
            if store.buffer is buf:
                found.append(True)

    _V().visit(stmt)
    return bool(found)


def _consumer_set(prim: str, index: FuncIndex, scope: Block, names: Sequence[str],
                  buf: Buffer) -> set[str]:
    """The named consumer blocks (which must lie in ``scope`` and read ``buf``) and every
    block nested in them."""
    out: set[str] = set()
    for name in names:
        info = index.blocks[name]
        if not any(a is scope for a in info.ancestors):
            raise ScheduleError(prim, f"block {name!r}", f"the consumer is not inside the scope "
                                f"block {scope.name_hint!r} of the cached block")
        if not _reads(info.block, buf):
            raise ScheduleError(prim, f"block {name!r}", f"it is given as a consumer but does "
                                f"not read {buf.name!r}")
        out.add(name)
        out |= _descendant_names(info.block)
    return out


def _apply(func: PrimFunc, scope: Block, scope_ancestors: tuple[Stmt, ...],
           rewriter: _CacheRewriter, alloc: Buffer) -> PrimFunc:
    new_scope = rewriter.visit(scope)
    new_scope = new_scope.replace(alloc_buffers=new_scope.alloc_buffers + (alloc,))
    return replace_stmt(func, scope_ancestors, scope, new_scope)


# ---- cache_read / cache_write ------------------------------------------------------------------

def cache_read(func: PrimFunc, index: FuncIndex, block_name: str, read_buffer_index: int,
               storage_scope: str, consumer_blocks: Sequence[str] = ()) -> tuple[PrimFunc, str]:
    """Returns the new function and the name of the new copy block."""
    prim = "cache_read"
    info = index.blocks[block_name]
    subject = f"block {block_name!r}"
    check_scope(prim, subject, storage_scope)
    buf = access_buffer(prim, info.block, read_buffer_index, is_write=False)
    if not info.ancestors:
        raise ScheduleError(prim, subject, "the root block has no scope to cache in")
    scope, scope_anc = scope_path(info)
    _check_not_initialised_outside(prim, subject, info, buf)
    siblings = [r.block for r in realizes_under(scope.body)]
    writers = [b for b in siblings if _writes(b, buf)]
    if len(writers) > 1:
        raise ScheduleError(prim, subject, f"buffer {buf.name!r} is written by "
                            f"{len(writers)} blocks {[b.name_hint for b in writers]}; "
                            "cache_read needs at most one writer in the scope")
    consumers = _consumer_set(prim, index, scope, consumer_blocks, buf)
    if writers:
        writer = writers[0]
        related = [index.blocks[n].block for n in consumer_blocks] if consumer_blocks else \
            [b for b in siblings if b is not writer and _reads(b, buf)]
        loc, pos = _detect(prim, scope, writer, related)
        winfo = index.blocks[writer.name_hint]
        wregion = next(r for r in writer.writes if r.buffer is buf)
        region = _relaxed_region(winfo, wregion, loc)
    else:
        loc, pos = scope, 0
        sregion = next((r for r in scope.reads if r.buffer is buf), None)
        region = _clamp_region(scope, (sregion or BufferRegion.full(buf)).region, buf)
    name = unique_name(f"{buf.name}_{storage_scope}", set(index.blocks) | buffer_names(func))
    cache = with_scope(buf, storage_scope, name)
    stage, _ = _copy_stage(name, region, buf, cache)

    def action(b: Block) -> str:
        if b is scope:
            return _CacheRewriter.DESCEND
        if _writes(b, buf):
            return _CacheRewriter.SKIP
        if consumers:
            return _CacheRewriter.REDIRECT if b.name_hint in consumers else \
                _CacheRewriter.DESCEND
        return _CacheRewriter.REDIRECT

    rewriter = _CacheRewriter(action, RedirectBuffer(buf, cache), loc, pos, stage)
    new_func = _apply(func, scope, scope_anc, rewriter, cache)
    check_block_dataflow(new_func, [name], prim, subject)
    return new_func, name


def cache_write(func: PrimFunc, index: FuncIndex, block_name: str, write_buffer_index: int,
                storage_scope: str, consumer_blocks: Sequence[str] = ()) -> tuple[PrimFunc, str]:
    """Returns the new function and the name of the new write-back block."""
    prim = "cache_write"
    info = index.blocks[block_name]
    subject = f"block {block_name!r}"
    check_scope(prim, subject, storage_scope)
    buf = access_buffer(prim, info.block, write_buffer_index, is_write=True)
    if not info.ancestors:
        raise ScheduleError(prim, subject, "the root block has no scope to cache in")
    scope, scope_anc = scope_path(info)
    _check_not_initialised_outside(prim, subject, info, buf)
    writer = info.block
    siblings = [r.block for r in realizes_under(scope.body)]
    others = [b.name_hint for b in siblings if b is not writer and _writes(b, buf)]
    if others:
        raise ScheduleError(prim, subject, f"buffer {buf.name!r} is also written by {others}; "
                            "cache_write needs the block to be its only writer in the scope")
    if _reads(writer, buf):
        # A decomposed reduction's update (or any block reading what it writes): the cache
        # would start from garbage, not from the buffer's current contents (TVM refuses it
        # in the root scope only because the init block is a second writer there).
        raise ScheduleError(prim, subject, f"the block reads {buf.name!r} as well as writing "
                            "it (an update that accumulates into it); a write cache would not "
                            "hold the values it accumulates onto")
    consumers = _consumer_set(prim, index, scope, consumer_blocks, buf)
    related = [b for b in siblings if b is not writer and _reads(b, buf)
               and b.name_hint not in consumers]
    loc, pos = _detect(prim, scope, writer, related)
    wregion = next(r for r in writer.writes if r.buffer is buf)
    region = _relaxed_region(info, wregion, loc)
    name = unique_name(f"{buf.name}_{storage_scope}", set(index.blocks) | buffer_names(func))
    cache = with_scope(buf, storage_scope, name)
    aligns = [e for e in A.dim_align_entries(writer) if e[0] is buf]
    stage, _ = _copy_stage(name, region, cache, buf, aligns)

    def action(b: Block) -> str:
        if b is scope:
            return _CacheRewriter.DESCEND
        if b is writer or b.name_hint in consumers:
            return _CacheRewriter.REDIRECT
        return _CacheRewriter.DESCEND

    rewriter = _CacheRewriter(action, RedirectBuffer(buf, cache), loc, pos, stage)
    new_func = _apply(func, scope, scope_anc, rewriter, cache)
    check_block_dataflow(new_func, [name, block_name], prim, subject)
    return new_func, name


# ---- set_scope / storage_align -----------------------------------------------------------------

def _allocated_write_buffer(prim: str, index: FuncIndex, block_name: str, buffer_index: int
                            ) -> tuple[Buffer, Block, tuple[Stmt, ...]]:
    info = index.blocks[block_name]
    buf = access_buffer(prim, info.block, buffer_index, is_write=True)
    site = alloc_site(index, buf)
    if site is None:
        raise ScheduleError(prim, f"block {block_name!r}", f"buffer {buf.name!r} is not "
                            "allocated by a block (it is a function parameter or a match "
                            "buffer); only intermediate buffers can be changed")
    return buf, site[0], site[1]


def set_scope(func: PrimFunc, index: FuncIndex, block_name: str, buffer_index: int,
              storage_scope: str) -> PrimFunc:
    """The block's ``buffer_index``-th written buffer moves to ``storage_scope`` (renamed
    ``<name>_<scope>`` as TVM does); a no-op when it is already there."""
    prim = "set_scope"
    check_scope(prim, f"block {block_name!r}", storage_scope)
    buf, site, site_anc = _allocated_write_buffer(prim, index, block_name, buffer_index)
    if buf.scope == storage_scope:
        return func
    name = unique_name(f"{buf.name}_{storage_scope}", buffer_names(func))
    new_site = RedirectBuffer(buf, with_scope(buf, storage_scope, name)).visit(site)
    return replace_stmt(func, site_anc, site, new_site)


def storage_align(func: PrimFunc, index: FuncIndex, block_name: str, buffer_index: int,
                  axis: int, factor: int, offset: int) -> PrimFunc:
    """Record ``[buffer_index, axis, factor, offset]`` in the block's ``buffer_dim_align``
    annotation (replacing an entry for the same buffer and axis); a negative axis counts from
    the end."""
    prim = "storage_align"
    subject = f"block {block_name!r}"
    buf, _, _ = _allocated_write_buffer(prim, index, block_name, buffer_index)
    ndim = len(buf.shape)
    if not -ndim <= axis < ndim:
        raise ScheduleError(prim, subject, f"axis {axis} is out of range for buffer "
                            f"{buf.name!r} of {ndim} dimension(s)")
    axis %= ndim
    if factor < 1 or offset < 0:
        raise ScheduleError(prim, subject, f"factor must be >= 1 and offset >= 0, got "
                            f"factor={factor}, offset={offset}")
    info = index.blocks[block_name]
    block = info.block
    entries = [tuple(e) for e in block.annotations.get(DIM_ALIGN_KEY, ())]
    new_entry = (buffer_index, axis, factor, offset)
    for k, e in enumerate(entries):
        if e[0] == buffer_index and e[1] == axis:
            entries[k] = new_entry
            break
    else:
        entries.append(new_entry)
    new_block = block.replace(annotations=FrozenDict({**block.annotations,
                                                      DIM_ALIGN_KEY: tuple(entries)}))
    return replace_stmt(func, info.ancestors + (info.realize,), block, new_block)
