"""compute_inline and reverse_compute_inline (TVM's ``compute_inline.cc``).

``compute_inline(B)``: a complete block whose body is ``B[v0, v1, ...] = f(v0, v1, ...)`` (store
indices distinct block variables) is removed and every load ``B[e0, e1, ...]`` in its scope
becomes ``f(e0, e1, ...)``. ``reverse_compute_inline(C)``: a complete consumer
``C[g(v)] = h(B[v], ...)`` reading ``B`` at distinct block variables is folded into ``B``'s only
producer, whose store ``B[p] = e`` becomes ``C[g(p)] = h(e, ...)``. Either way the blocks whose
accesses changed get their reads/writes recomputed and the scope stops allocating ``B``.
"""
from __future__ import annotations

from typing import Callable, NoReturn

from workbench.tir.analysis.regions import block_regions
from workbench.tir import op
from workbench.tir.arith import Analyzer, IntervalSet
from workbench.tir.buffer import Buffer, BufferRegion, Range
from workbench.tir.expr import BufferLoad, IntImm, PrimExpr, Var
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, IRVisitor, collect_vars, substitute
from workbench.tir.schedule.analysis.dataflow import check_block_dataflow
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.primitive import annotations as A
from workbench.tir.schedule.primitive import block_scope as S
from workbench.tir.schedule.state import FuncIndex
from workbench.tir.schedule.utils import blocks_under
from workbench.tir.stmt import Block, BlockRealize, BufferStore, For, IfThenElse

_INLINE_FORM = "its body must be a single store 'B[v0, v1, ...] = f(v0, v1, ...)' whose " \
               "indices are distinct iteration variables of the block, not reading B"
_REVERSE_FORM = "its body must be a single store 'C[...] = g(B[v0, v1, ...], ...)' where every " \
                "load of B uses the same indices, distinct iteration variables covering all of " \
                "the block's non-unit iteration variables, and the block has no predicate"


# ---- shared helpers -----------------------------------------------------------------------------

class _Loads(IRVisitor):
    """Index tuples of every load of one buffer."""

    def __init__(self, buffer: Buffer) -> None:
        self.buffer = buffer
        self.found: list[tuple[PrimExpr, ...]] = []

    def visit_BufferLoad(self, load: BufferLoad) -> None:
        if load.buffer is self.buffer:
            self.found.append(load.indices)
        self.generic_visit(load)


def _loads_of(node: object, buffer: Buffer) -> list[tuple[PrimExpr, ...]]:
    v = _Loads(buffer)
    v.visit_field(node)
    return v.found


class _OpaqueUse(IRVisitor):
    """Whether a buffer escapes block-level reasoning: its data pointer used as a value, or a
    region of it matched into another buffer (TVM's OpaqueAccessError)."""

    def __init__(self, buffer: Buffer) -> None:
        self.buffer = buffer
        self.hit = False

    def visit_Var(self, v: Var) -> None:
        self.hit = self.hit or v is self.buffer.data

    def visit_Block(self, block: Block) -> None:
        if any(m.source.buffer is self.buffer for m in block.match_buffers):
            self.hit = True
        self.generic_visit(block)


def _check_no_opaque_access(func: PrimFunc, buffer: Buffer,
                            fail: Callable[[str], NoReturn]) -> None:
    v = _OpaqueUse(buffer)
    v.visit(func.body)
    if v.hit:
        fail(f"buffer {buffer.name!r} is accessed opaquely (its data pointer is used directly, "
             "or a region of it is matched into another buffer)")


class _Rewrite(IRMutator):
    """The edits common to both inliners: drop ``buffer`` from the scope's allocations and
    recompute the reads/writes of every other block that accessed it (their storage_align
    entries follow their buffers, see ``annotations.carry_dim_align``)."""

    def __init__(self, buffer: Buffer, scope_name: str, func: PrimFunc) -> None:
        super().__init__()
        self.buffer = buffer
        self.scope_name = scope_name
        self.allocated = A.allocated_buffers(blocks_under(func.body)) - {buffer}

    def visit_Block(self, block: Block) -> Block:
        new = self.generic_visit(block)
        if block.name_hint == self.scope_name:
            return new.replace(alloc_buffers=tuple(b for b in new.alloc_buffers
                                                   if b is not self.buffer))
        touched = any(r.buffer is self.buffer for r in block.reads + block.writes)
        if touched:
            reads, writes = _block_regions(new)
            new = A.carry_dim_align(block, new.replace(reads=reads, writes=writes),
                                    self.allocated.__contains__)
        return new


def _block_regions(block: Block) -> tuple[tuple[BufferRegion, ...], tuple[BufferRegion, ...]]:
    """The block's reads and writes recomputed from its body. For a block holding other blocks
    (blockize) the accesses inside them use their iteration variables and the loops inside the
    block: those are relaxed over their domains, so the regions use only the block's own
    variables (as TVM's GetBlockReadWriteRegion does)."""
    reads, writes = block_regions(block.body, block.init, block.iter_vars)
    foreign: dict[Var, Range] = {}
    for inner in blocks_under(block.body):
        foreign.update((iv.var, iv.dom) for iv in inner.iter_vars)
    for loop in _loops_under(block.body):
        foreign[loop.loop_var] = Range(loop.min, loop.extent)
    if block.init is not None:
        for inner in blocks_under(block.init):
            foreign.update((iv.var, iv.dom) for iv in inner.iter_vars)
        for loop in _loops_under(block.init):
            foreign[loop.loop_var] = Range(loop.min, loop.extent)
    if not foreign:
        return reads, writes
    an = Analyzer()
    dom = {v: IntervalSet.from_range(r) for v, r in foreign.items()}

    def relax(region: BufferRegion) -> BufferRegion:
        out = []
        for r, dim in zip(region.region, region.buffer.shape):
            if not (collect_vars(r.min) | collect_vars(r.extent)) & set(foreign):
                out.append(r)
                continue
            lo = an.int_set(r.min, dom)
            hi = an.int_set(op.sub(op.add(r.min, r.extent), 1), dom)
            if not (lo.has_lower_bound() and hi.has_upper_bound()):
                out.append(Range(op.const(0, dim.dtype), dim))
                continue
            start = an.simplify(lo.min_value)
            out.append(Range(start, an.simplify(op.add(op.sub(hi.max_value, start), 1))))
        return BufferRegion(region.buffer, tuple(out))

    return tuple(relax(r) for r in reads), tuple(relax(w) for w in writes)


def _loops_under(stmt: object) -> list[For]:
    found: list[For] = []

    class _V(IRVisitor):
        def visit_For(self, loop: For) -> None:
            found.append(loop)
            self.generic_visit(loop)

    _V().visit(stmt)
    return found


# ---- compute_inline -------------------------------------------------------------------------

def _inline_pattern(block: Block, buffer: Buffer) -> tuple[PrimExpr, list[Var]] | None:
    """``(value, index_vars)`` of an inlinable store, unit iteration variables that index
    nothing replaced by their only value; None if the body has another form."""
    store = block.body
    if not isinstance(store, BufferStore) or store.buffer is not buffer:
        return None
    if _loads_of(store.value, buffer):
        return None
    own = {iv.var: iv for iv in block.iter_vars}
    idx_vars: list[Var] = []
    for k, e in enumerate(store.indices):
        if isinstance(e, Var) and e in own and e not in idx_vars:
            idx_vars.append(e)
        elif isinstance(e, IntImm) and e.value == 0 and k < len(block.iter_vars) and \
                _is_unit(block.iter_vars[k].dom) and block.iter_vars[k].var not in idx_vars:
            idx_vars.append(block.iter_vars[k].var)  # TVM's fast path: 0 for a unit variable
        else:
            return None
    fixed = {}
    for v in collect_vars(store.value):
        if v in own and v not in idx_vars:
            if not _is_unit(own[v].dom):
                return None
            fixed[v] = own[v].dom.min
    return substitute(store.value, fixed), idx_vars


def _is_unit(dom: Range) -> bool:
    return isinstance(dom.extent, IntImm) and dom.extent.value == 1


class _Inliner(_Rewrite):
    def __init__(self, buffer: Buffer, scope_name: str, func: PrimFunc, value: PrimExpr,
                 idx_vars: list[Var]):
        super().__init__(buffer, scope_name, func)
        self.value = value
        self.idx_vars = idx_vars

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        load = self.generic_visit(load)
        if load.buffer is not self.buffer:
            return load
        return substitute(self.value, {v: _as_dtype(e, v.dtype)
                                       for v, e in zip(self.idx_vars, load.indices)})


def _as_dtype(e: PrimExpr, dtype: str) -> PrimExpr:
    """``e`` as a value of ``dtype``: an inlined stage with int32 variables read at int64
    indices (a legalized reshape inside an int64 kernel) keeps its own arithmetic well typed."""
    return e if e.dtype == dtype else op.cast(dtype, e)


def compute_inline(func: PrimFunc, index: FuncIndex, name: str) -> PrimFunc:
    """Inline block ``name`` into its consumers (see the module docstring)."""
    prim = "compute_inline"

    def fail(reason: str) -> NoReturn:
        raise ScheduleError(prim, S.subject(name), reason)

    scope = S.scope_of(index, name, prim)
    block = index.blocks[name].block
    if block.init is not None:
        fail("it is a reduction block (it has an init statement); reductions cannot be inlined")
    if len(block.writes) != 1:
        fail(f"it writes {len(block.writes)} buffers; only a block writing exactly one buffer "
             "can be inlined")
    buffer = block.writes[0].buffer
    S.check_not_output(index, name, prim)
    S.check_complete(index, name, prim)
    pattern = _inline_pattern(block, buffer)
    if pattern is None:
        fail(f"its body cannot be inlined: {_INLINE_FORM}")
    _check_no_opaque_access(func, buffer, fail)
    removed = S.remove_leaf_block(func, index, name, prim)
    value, idx_vars = pattern
    new_func = removed.with_body(_Inliner(buffer, scope.name_hint, func, value,
                                          idx_vars).visit(removed.body))
    # No dataflow check: each consumer now computes the inlined value from the same inputs
    # at its own place, where the inlined block's reads were already complete (it ran there
    # or earlier).
    return new_func


def can_compute_inline(func: PrimFunc, index: FuncIndex, name: str) -> bool:
    try:
        compute_inline(func, index, name)
    except ScheduleError:
        return False
    return True


# ---- reverse_compute_inline ----------------------------------------------------------------

def _producer_store(block: Block) -> tuple[BufferStore, PrimExpr | None] | None:
    """The producer's store and the condition of an ``if`` around it (no else), if any."""
    body = block.body
    if isinstance(body, IfThenElse) and body.else_case is None and \
            isinstance(body.then_case, BufferStore):
        return body.then_case, body.condition
    if isinstance(body, BufferStore):
        return body, None
    return None


class _ReverseInliner(_Rewrite):
    """Replaces the producer's realize (found by block name) with the fused one."""

    def __init__(self, buffer: Buffer, scope_name: str, func: PrimFunc, producer: str,
                 new_realize: BlockRealize, consumer: Block) -> None:
        super().__init__(buffer, scope_name, func)
        self.producer = producer
        self.new_realize = new_realize
        self.consumer = consumer

    def visit_BlockRealize(self, realize: BlockRealize) -> BlockRealize:
        if realize.block.name_hint == self.producer:
            # The fused block keeps the producer's annotations; its storage_align entries are
            # re-targeted from the producer's old writes (the removed buffer's entries go).
            fused = self.generic_visit(self.new_realize)
            return fused.replace(block=A.carry_dim_align(
                realize.block, fused.block, self.allocated.__contains__,
                A.dim_align_entries(self.consumer)))
        return self.generic_visit(realize)


def reverse_compute_inline(func: PrimFunc, index: FuncIndex, name: str) -> PrimFunc:
    """Fold block ``name`` into the producer of the one buffer it reads (module docstring)."""
    prim = "reverse_compute_inline"

    def fail(reason: str) -> NoReturn:
        raise ScheduleError(prim, S.subject(name), reason)

    scope = S.scope_of(index, name, prim)
    info = index.blocks[name]
    consumer, realize = info.block, info.realize
    if consumer.init is not None:
        fail("it is a reduction block (it has an init statement); reductions cannot be inlined")
    produced: list[Buffer] = []
    for r in consumer.reads:
        if r.buffer not in produced and S.writers_of(index, name, r.buffer):
            produced.append(r.buffer)
    if len(produced) != 1:
        fail(f"it reads {len(produced)} buffers written in its scope "
             f"({[b.name for b in produced]}); it must read exactly one")
    buffer = produced[0]
    S.check_complete(index, name, prim)
    writers = S.writers_of(index, name, buffer)
    if len(writers) != 1:
        fail(f"buffer {buffer.name!r} has {len(writers)} producer blocks {writers}; it needs "
             "exactly one")
    producer = writers[0]
    problem = S.complete_block_problem(index, producer)
    if problem is not None:
        fail(f"its producer {producer!r} must be a complete block, but {problem}")
    if index.blocks[producer].block.init is not None:
        # e.g. an rfactor block whose reduction loops all became spatial: its init would still
        # store to the buffer that disappears
        fail(f"its producer {producer!r} is a reduction block (it has an init statement)")
    readers = [n for n in S.scope_children(index, name) if n != name and
               any(r.buffer is buffer for r in index.blocks[n].block.reads)]
    if readers:
        fail(f"buffer {buffer.name!r} is also read by {readers}; the producer would stop "
             "writing it")
    if S.is_output_block(index, producer):
        fail(f"its producer {producer!r} is an output block; the buffer it writes must stay")

    pinfo = index.blocks[producer]
    new_realize = _fuse(pinfo.realize, realize, buffer, fail)
    _check_no_opaque_access(func, buffer, fail)
    removed = S.remove_leaf_block(func, index, name, prim)
    mut = _ReverseInliner(buffer, scope.name_hint, func, producer, new_realize, consumer)
    new_func = removed.with_body(mut.visit(removed.body))
    # The producer now writes the consumer's output where the producer runs.
    check_block_dataflow(new_func, [producer], prim, S.subject(name))
    return new_func


def _fuse(producer_realize: BlockRealize, consumer_realize: BlockRealize, buffer: Buffer,
          fail: Callable[[str], NoReturn]) -> BlockRealize:
    """The producer's realize writing the consumer's output (TVM's ReverseComputeInliner)."""
    consumer = consumer_realize.block
    store = consumer.body
    if not (isinstance(consumer_realize.predicate, IntImm) and consumer_realize.predicate.value):
        fail(f"it has a predicate; {_REVERSE_FORM}")
    if not isinstance(store, BufferStore):
        fail(f"its body is not a single store; {_REVERSE_FORM}")
    loads = _loads_of(store.indices, buffer) + _loads_of(store.value, buffer)
    own = {iv.var: iv for iv in consumer.iter_vars}
    indices = loads[0] if loads else ()
    if not loads or any(len(ld) != len(indices) or any(a is not b for a, b in zip(ld, indices))
                        for ld in loads) or \
            any(not isinstance(e, Var) or e not in own for e in indices) or \
            len(set(indices)) != len(indices):
        fail(f"its loads of {buffer.name!r} do not fit; {_REVERSE_FORM}")
    producer = producer_realize.block
    found = _producer_store(producer)
    if found is None:
        fail(f"the producer {producer.name_hint!r} is not a single store (optionally under an "
             "if without else)")
    pstore, pcond = found
    sub: dict[Var, PrimExpr] = {iv.var: iv.dom.min for iv in consumer.iter_vars
                                if _is_unit(iv.dom) and isinstance(iv.dom.min, IntImm)}
    sub.update((v, _as_dtype(e, v.dtype)) for v, e in zip(indices, pstore.indices))
    an = Analyzer()
    for iv in producer.iter_vars:
        an.bind(iv.var, iv.dom)
    pdoms = {iv.var: iv.dom for iv in producer.iter_vars}
    for iv in consumer.iter_vars:
        if iv.var not in sub:
            fail(f"its iteration variable {iv.var.name!r} does not index {buffer.name!r}, so "
                 f"the producer cannot cover it; {_REVERSE_FORM}")
        got = an.int_set(sub[iv.var], pdoms)
        last = op.sub(op.add(iv.dom.min, iv.dom.extent), 1)
        if an.can_prove(op.gt(got.min_value, iv.dom.min)) or \
                an.can_prove(op.lt(got.max_value, last)):
            fail(f"the producer does not cover the domain of its iteration variable "
                 f"{iv.var.name!r}")

    class _Fold(IRMutator):
        def visit_Var(self, v: Var) -> PrimExpr:
            return sub.get(v, v)

        def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
            load = self.generic_visit(load)
            return pstore.value if load.buffer is buffer else load

    fused = _Fold().visit(store)
    # Producer instances outside the consumer's domain must not write the consumer's output.
    in_bounds: PrimExpr = op.const(True)
    for iv in consumer.iter_vars:
        v = sub[iv.var]
        in_bounds = op.logical_and(in_bounds, op.logical_and(
            op.ge(v, iv.dom.min), op.lt(v, op.add(iv.dom.min, iv.dom.extent))))
    pred = an.simplify(in_bounds)
    body = fused if pcond is None else IfThenElse(pcond, fused)
    binding = dict(zip((iv.var for iv in producer.iter_vars), producer_realize.iter_values))
    outer = Analyzer().simplify(op.logical_and(producer_realize.predicate,
                                               substitute(pred, binding)))
    return producer_realize.replace(predicate=outer, block=producer.replace(body=body))


def can_reverse_compute_inline(func: PrimFunc, index: FuncIndex, name: str) -> bool:
    try:
        reverse_compute_inline(func, index, name)
    except ScheduleError:
        return False
    return True


__all__ = ["compute_inline", "reverse_compute_inline", "can_compute_inline",
           "can_reverse_compute_inline"]
