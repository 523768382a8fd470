"""Where intermediate buffers live and how big they are.

``plan_buffer_allocation`` moves each allocation from where the blocks declared it (usually the
root) down to the innermost loop that contains every access to it, as TVM's
PlanAndUpdateBufferAllocationLocation does: a buffer used only inside one tile is then allocated
per tile (per thread, under a parallel loop). ``compact_buffer_allocation`` then shrinks it to
the region those accesses touch (TVM's CompactBufferAllocation), re-basing the indices. Together
they turn ``cache_write(..., "local")`` + ``reverse_compute_at`` into a small tile that LLVM keeps
in registers.
"""
from __future__ import annotations

from workbench.tir import op
from workbench.tir.arith import NEG_INF, POS_INF, Analyzer, IntervalSet
from workbench.tir.buffer import Buffer, BufferRegion, Range
from workbench.tir.expr import BufferLoad, Call, IntImm, PrimExpr, Ramp, Var, is_const_int
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, IRVisitor, uses_var
from workbench.tir.stmt import (
    Allocate, Block, BlockRealize, BufferStore, DeclBuffer, For, IterType, Stmt,
)


class BufferAccesses(IRVisitor):
    """Every access to ``data`` with the loops around it (inside the visited statement).

    After ``visit``: ``found`` lists ``(indices, enclosing loops)`` per load and store in
    visiting order; ``opaque`` is True when the pointer escapes (a call, an address, a vector
    access past the last dimension), and then the buffer must keep its layout.
    """

    def __init__(self, data: Var) -> None:
        self.data = data
        self.loops: list[For] = []
        self.found: list[tuple[tuple[PrimExpr, ...], tuple[For, ...]]] = []
        self.opaque = False  # the pointer escapes (a call, an address): leave it alone

    def visit_For(self, loop: For) -> None:
        self.visit(loop.min)
        self.visit(loop.extent)
        self.loops.append(loop)
        self.visit(loop.body)
        self.loops.pop()

    def _record(self, buf: Buffer, indices: tuple[PrimExpr, ...]) -> None:
        self.found.append((indices, tuple(self.loops)))
        last = indices[-1] if indices else None
        if isinstance(last, Ramp) and not _ramp_within(last, buf.shape[-1]):
            # A vector access running past the last dimension (a tensorized kernel's flat
            # load) touches following rows: the buffer must keep its layout.
            self.opaque = True

    def visit_BufferLoad(self, e: BufferLoad) -> None:
        if e.buffer.data is self.data:
            self._record(e.buffer, e.indices)
        for i in e.indices:
            self.visit(i)

    def visit_BufferStore(self, s: BufferStore) -> None:
        if s.buffer.data is self.data:
            self._record(s.buffer, s.indices)
        for i in s.indices:
            self.visit(i)
        self.visit(s.value)

    def visit_Var(self, v: Var) -> None:
        if v is self.data:
            self.opaque = True

    def visit_Call(self, call: Call) -> None:
        # ``address_of(buf[i])`` hands code a pointer into the buffer: what it reaches from
        # there, with its own address arithmetic, is unknown (tensorized blocks name their
        # regions instead: see visit_BufferRegion).
        if call.op == "address_of" and isinstance(call.args[0], BufferLoad) and \
                call.args[0].buffer.data is self.data:
            self.opaque = True
        self.generic_visit(call)

    def visit_BufferRegion(self, region: BufferRegion) -> None:
        # A region a block declares (an opaque shell's reads / writes / match buffer source):
        # its first and last element bound what the block touches.
        if region.buffer.data is self.data:
            self.found.append((tuple(r.min for r in region.region), tuple(self.loops)))
            self.found.append((tuple(op.sub(op.add(r.min, r.extent), op.const(1, r.extent.dtype))
                                     for r in region.region), tuple(self.loops)))
        for r in region.region:
            self.visit(r.min)
            self.visit(r.extent)


def _ramp_within(ramp: Ramp, extent: PrimExpr) -> bool:
    """Is ``ramp`` a unit-stride ramp no longer than the dimension ``extent``?"""
    return isinstance(ramp.stride, IntImm) and ramp.stride.value == 1 and \
        isinstance(extent, IntImm) and ramp.lanes <= extent.value


def _common_prefix(paths: list[tuple[For, ...]]) -> tuple[For, ...]:
    if not paths:
        return ()
    first = paths[0]
    n = len(first)
    for p in paths[1:]:
        n = min(n, len(p))
        for k in range(n):
            if p[k] is not first[k]:
                n = k
                break
    return first[:n]


class _WrapLoopBody(IRMutator):
    def __init__(self, target: For, wrap) -> None:
        super().__init__()
        self.target = target
        self.wrap = wrap

    def visit_For(self, loop: For) -> Stmt:
        if loop is self.target:
            return loop.replace(body=self.wrap(loop.body))
        return self.generic_visit(loop)


class _BlockAccessPaths(IRVisitor):
    """The loop paths (below the allocating block) of every block that touches ``buf``.

    A block that writes ``buf`` while reducing keeps its path only down to the first loop that
    feeds one of its reduction iteration variables: allocating below that loop would start a
    fresh buffer in every reduction step and lose the partial results (TVM's LCA rule).
    """

    def __init__(self, buf: Buffer) -> None:
        self.buf = buf
        self.loops: list[For] = []
        self.paths: list[tuple[For, ...]] = []

    def visit_For(self, loop: For) -> None:
        self.loops.append(loop)
        self.visit(loop.body)
        self.loops.pop()

    def visit_BlockRealize(self, realize: BlockRealize) -> None:
        block = realize.block
        touched = BufferAccesses(self.buf.data)
        touched.visit(block)
        writes = any(r.buffer is self.buf for r in block.writes)
        if touched.found or touched.opaque or writes or \
                any(r.buffer is self.buf for r in block.reads):
            path = tuple(self.loops)
            if writes:
                feeds = [v for iv, v in zip(block.iter_vars, realize.iter_values)
                         if iv.iter_type != IterType.DATA_PAR]
                # A loop the block's predicate depends on while no binding does decides
                # *whether* the same elements are written, not which: in the iterations where
                # the predicate is false a reader under that loop reads what an earlier
                # iteration wrote, so the buffer must outlive the loop (fuzzer random:12028:
                # a cache_write copy under a predicated producer read a fresh buffer).
                pred = realize.predicate
                gates = [] if pred is None or is_const_int(pred, 1) else [pred]
                for pos, lp in enumerate(path):
                    if any(_uses(v, lp.loop_var) for v in feeds) or (
                            any(_uses(g, lp.loop_var) for g in gates) and
                            not any(_uses(v, lp.loop_var) for v in realize.iter_values)):
                        path = path[:pos]
                        break
            self.paths.append(path)
        self.visit(block.body)  # nested blocks refine nothing here; loops above them count

    def visit_BufferLoad(self, e: BufferLoad) -> None:
        if e.buffer.data is self.buf.data:
            self.paths.append(tuple(self.loops))
        self.generic_visit(e)

    def visit_BufferStore(self, s: BufferStore) -> None:
        if s.buffer.data is self.buf.data:
            self.paths.append(tuple(self.loops))
        self.generic_visit(s)


def _uses(expr: PrimExpr, var: Var) -> bool:
    return uses_var(expr, lambda v: v is var)


class _Plan(IRMutator):
    def visit_Block(self, block: Block) -> Block:
        block = self.generic_visit(block)
        if not block.alloc_buffers:
            return block
        keep: list[Buffer] = []
        body = block.body
        for buf in block.alloc_buffers:
            finder = _BlockAccessPaths(buf)
            finder.visit(body)
            lca = _common_prefix(finder.paths)
            if not finder.paths or not lca:
                keep.append(buf)
                continue

            def wrap(inner: Stmt, buf: Buffer = buf) -> Stmt:
                return Allocate(buf.data, buf.dtype, buf.shape, op.const(True),
                                DeclBuffer(buf, inner))
            body = _WrapLoopBody(lca[-1], wrap).visit(body)
        return block.replace(alloc_buffers=tuple(keep), body=body)


def plan_buffer_allocation(func: PrimFunc) -> PrimFunc:
    """Allocate each block-allocated buffer inside the innermost loop that holds all the blocks
    using it (block form: run before the blocks are lowered)."""
    return func.with_body(_Plan().visit(func.body))


class BufferRebase(IRMutator):
    """Replaces buffer ``old`` by ``new`` (same data pointer, smaller shape) in loads, stores
    and regions, subtracting ``offsets[d]`` from each index of dimension ``d``."""

    def __init__(self, old: Buffer, new: Buffer, offsets: list[PrimExpr]) -> None:
        super().__init__()
        self.old, self.new, self.offsets = old, new, offsets

    def _indices(self, indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        return tuple(op.sub(self.visit(i), o) for i, o in zip(indices, self.offsets))

    def visit_BufferLoad(self, e: BufferLoad) -> PrimExpr:
        if e.buffer.data is not self.old.data:
            return self.generic_visit(e)
        return BufferLoad(self.new, self._indices(e.indices), e.dtype, e.predicate)

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        if s.buffer.data is not self.old.data:
            return self.generic_visit(s)
        return BufferStore(self.new, self.visit(s.value), self._indices(s.indices), s.predicate)

    def visit_BufferRegion(self, r: BufferRegion) -> BufferRegion:
        if r.buffer.data is not self.old.data:
            return self.generic_visit(r)
        return BufferRegion(self.new, tuple(
            Range(op.sub(self.visit(x.min), o), self.visit(x.extent))
            for x, o in zip(r.region, self.offsets)))


def _region(acc: BufferAccesses, buf: Buffer) -> list[tuple[PrimExpr, int] | None]:
    """Per dimension: (min, constant extent) covering every access, or None to keep it whole."""
    ana = Analyzer()
    # Each access relaxes only the loops around it; interval sets are built once per loop.
    ranges: dict[Var, IntervalSet] = {}
    doms: list[dict[Var, IntervalSet]] = []
    for _, loops in acc.found:
        for lp in loops:
            if lp.loop_var not in ranges:
                ranges[lp.loop_var] = IntervalSet.from_range(Range(lp.min, lp.extent))
        doms.append({lp.loop_var: ranges[lp.loop_var] for lp in loops})
    out: list[tuple[PrimExpr, int] | None] = []
    for d, dim in enumerate(buf.shape):
        lo: PrimExpr | None = None
        hi: PrimExpr | None = None
        ok = True
        for (indices, _), dom in zip(acc.found, doms):
            s = ana.int_set(indices[d], dom)
            if s.min_value is NEG_INF or s.max_value is POS_INF:
                ok = False
                break
            lo = s.min_value if lo is None else _pick(ana, lo, s.min_value, min)
            hi = s.max_value if hi is None else _pick(ana, hi, s.max_value, max)
            if lo is None or hi is None:
                ok = False
                break
        extent = ana.simplify(op.add(op.sub(hi, lo), 1)) if ok else None
        if not ok or not isinstance(extent, IntImm) or \
                (isinstance(dim, IntImm) and extent.value >= dim.value) or extent.value <= 0:
            out.append(None)
        else:
            out.append((ana.simplify(lo), extent.value))
    return out


def _pick(ana: Analyzer, a: PrimExpr, b: PrimExpr, choose) -> PrimExpr | None:
    """The smaller/larger of two bounds when they differ by a constant, else None."""
    diff = ana.simplify(op.sub(b, a))
    if not isinstance(diff, IntImm):
        return None
    return a if choose(0, diff.value) == 0 else b


class BufferCompactor(IRMutator):
    """The rewrite of :func:`compact_buffer_allocation` (TVM's CompactBufferAllocation): each
    ``Allocate`` + ``DeclBuffer`` whose accesses (:class:`BufferAccesses`) cover less than the
    buffer shrinks to that box.

    A subclass may bound the accesses another way (:meth:`region`) or re-base them with another
    rewrite (:meth:`rebase`), as the feature extractor's affine shortcut does; the rest of the
    rewrite stays identical.
    """

    def region(self, acc: BufferAccesses, buf: Buffer) -> list[tuple[PrimExpr, int] | None]:
        """Per dimension of ``buf``: (offset, constant extent) of the box ``acc`` touches, or
        None to keep the dimension whole."""
        return _region(acc, buf)

    def rebase(self, old: Buffer, new: Buffer, offsets: list[PrimExpr]) -> IRMutator:
        """The rewrite that moves accesses of ``old`` onto ``new``."""
        return BufferRebase(old, new, offsets)

    def visit_Allocate(self, alloc: Allocate) -> Stmt:
        decl = alloc.body
        body = self.visit(decl.body) if isinstance(decl, DeclBuffer) else None
        if body is None or decl.buffer.data is not alloc.buffer_var or decl.buffer.strides:
            return self.generic_visit(alloc)
        buf = decl.buffer
        acc = BufferAccesses(alloc.buffer_var)
        acc.visit(body)
        if acc.opaque or not acc.found:
            return alloc.replace(body=decl.replace(body=body))
        region = self.region(acc, buf)
        if all(r is None for r in region):
            return alloc.replace(body=decl.replace(body=body))
        shape = tuple(dim if r is None else op.const(r[1], dim.dtype)
                      for dim, r in zip(buf.shape, region))
        offsets = [op.const(0, dim.dtype) if r is None else r[0]
                   for dim, r in zip(buf.shape, region)]
        new_buf = buf.replace(shape=shape)
        body = self.rebase(buf, new_buf, offsets).visit(body)
        return alloc.replace(extents=shape, body=decl.replace(buffer=new_buf, body=body))


def compact_buffer_allocation(func: PrimFunc) -> PrimFunc:
    """Shrink each allocated buffer to the region its accesses cover; re-base the indices."""
    return func.with_body(BufferCompactor().visit(func.body))


__all__ = ["plan_buffer_allocation", "compact_buffer_allocation", "BufferAccesses",
           "BufferRebase", "BufferCompactor"]
