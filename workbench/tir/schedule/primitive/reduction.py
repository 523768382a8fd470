"""Reduction primitives: decompose_reduction and rfactor (TVM's semantics and names).

``decompose_reduction`` moves a reduction block's ``init`` into its own block ``<name>_init``
placed before a chosen loop, and renames the block ``<name>_update``. ``rfactor`` splits a
reduction over one loop into an rfactor block ``<name>_rf`` that keeps that loop as a spatial
axis of an intermediate buffer ``<buffer>_rf``, and a write-back block (keeping the block's name)
that reduces that axis into the original buffer.
"""
from __future__ import annotations

from typing import Any, Iterable

from workbench.ir.structural import structural_equal
from workbench.tir import op
from workbench.tir.buffer import Buffer, BufferRegion, Range
from workbench.tir.expr import And, BufferLoad, IntImm, PrimExpr, Var, is_const_int
from workbench.tir.function import PrimFunc
from workbench.tir.analysis import vars_in_order
from workbench.tir.functor import IRMutator, IRVisitor, Substitute, collect_vars
from workbench.tir.schedule.analysis.dataflow import check_block_dataflow
from workbench.tir.schedule.analysis.injective import repeated_binding
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.primitive import annotations as A
from workbench.tir.schedule.primitive.reducer import match_reducer
from workbench.tir.schedule.state import BlockInfo, FuncIndex, replace_stmt
from workbench.tir.schedule.utils import realizes_under, unique_name
from workbench.tir.stmt import (
    Block, BlockRealize, BufferStore, For, ForKind, IterType, IterVar, LetStmt, SeqStmt, Stmt,
    seq,
)


def subst(node: Any, vmap: dict[Var, PrimExpr]) -> Any:
    """``substitute`` that also takes tuples (regions, index lists)."""
    return Substitute(vmap).visit_field(node) if vmap else node


# ---- shared checks --------------------------------------------------------------------------

def check_reduction_block(info: BlockInfo, prim: str) -> None:
    """A reduction block (TVM's ``CheckReductionBlock``, minus the scope-wide analyses): it has
    an ``init``, only spatial and reduction iter vars, at least one of the latter, and writes
    elements that do not depend on the reduction iter vars."""
    block = info.block
    subject = f"block {block.name_hint!r}"
    if block.init is None:
        raise ScheduleError(prim, subject, "it is not a reduction block: it has no init")
    reduce_vars = set()
    for iv in block.iter_vars:
        if iv.iter_type == IterType.COMM_REDUCE:
            reduce_vars.add(iv.var)
        elif iv.iter_type != IterType.DATA_PAR:
            raise ScheduleError(prim, subject, f"iter var {iv.var.name!r} is neither spatial "
                                "nor a reduction")
    if not reduce_vars:
        raise ScheduleError(prim, subject, "it is not a reduction block: it has no reduction "
                            "iter var")
    for w in block.writes:
        for r in w.region:
            if collect_vars(r.min) & reduce_vars:
                raise ScheduleError(prim, subject, f"the region of {w.buffer.name!r} it writes "
                                    "depends on a reduction iter var")


def conjuncts(pred: PrimExpr) -> list[PrimExpr]:
    """``a && b && c`` -> ``[a, b, c]``; ``True`` -> ``[]``."""
    if isinstance(pred, IntImm) and pred.value:
        return []
    if isinstance(pred, And):
        return conjuncts(pred.a) + conjuncts(pred.b)
    return [pred]


def conjunction(terms: Iterable[PrimExpr]) -> PrimExpr:
    out: PrimExpr = op.const(True)
    for t in terms:
        out = op.logical_and(out, t)
    return out


def _loop_subject(loop: For) -> str:
    return f"loop {loop.loop_var.name!r}"


class _ReplaceRealize(IRMutator):
    """Swap one BlockRealize (by identity) for a new statement."""

    def __init__(self, old: BlockRealize, new: Stmt) -> None:
        super().__init__()
        self.old, self.new = old, new

    def visit_BlockRealize(self, r: BlockRealize) -> Stmt:
        return self.new if r is self.old else r

    def visit_PrimExpr(self, e: PrimExpr) -> PrimExpr:
        return e  # nothing to do inside expressions


# ---- decompose_reduction --------------------------------------------------------------------

def decompose_reduction(func: PrimFunc, index: FuncIndex, block_name: str,
                        loop_var: Var) -> tuple[PrimFunc, str, str]:
    """Split the init of ``block_name`` into ``<name>_init`` before loop ``loop_var``.

    Returns ``(func, init_block_name, update_block_name)``.
    """
    prim = "decompose_reduction"
    info = index.blocks[block_name]
    block, realize = info.block, info.realize
    loops = info.loops
    target = index.loops[loop_var].loop
    if target not in loops:
        raise ScheduleError(prim, _loop_subject(target), f"it is not an ancestor of block "
                            f"{block_name!r} (in the block's scope)")
    check_reduction_block(info, prim)
    pos = loops.index(target)
    # Every loop feeding a reduction iter var must be at or below ``loop``: the init has to run
    # once per spatial point, before the whole reduction.
    above = {lp.loop_var for lp in loops[:pos]}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type == IterType.COMM_REDUCE and collect_vars(value) & above:
            raise ScheduleError(prim, _loop_subject(target), f"reduction iter var "
                                f"{iv.var.name!r} of block {block_name!r} depends on a loop "
                                "above it; decompose at a loop outside every reduction loop")
    # A loop at or below ``loop`` that binds none of the block's variables repeats the whole
    # reduction (e.g. the consumer loops a reverse_compute_at left around it): the init inside
    # the block re-runs with each repetition, but a decomposed init would run once before them
    # all and the repetitions would accumulate on top of each other.
    used_by_block = set().union(*(collect_vars(v) for v in realize.iter_values)) \
        if realize.iter_values else set()
    for lp in loops[pos:]:
        if lp.loop_var not in used_by_block and not is_const_int(lp.extent, 1):
            raise ScheduleError(prim, _loop_subject(target), f"loop {lp.loop_var.name!r} "
                                f"between it and block {block_name!r} binds none of the "
                                "block's iteration variables, so it repeats the whole reduction; "
                                "with the init moved before it the repetitions would add up")
    # The same holds for loops the block does use, but not one-to-one (a loop fused from the
    # rows and columns of a consumer, with the reduction computed at it, binds only the row:
    # fuzzer case random:23113): no two iterations may reach the same block instance.
    repeat = repeated_binding(loops[pos:], loops[:pos], realize.iter_values,
                              realize.predicate)
    if repeat is not None:
        raise ScheduleError(prim, _loop_subject(target), f"the loops between it and block "
                            f"{block_name!r} reach the same instance of the block more than once "
                            f"({repeat}), so the reduction is repeated; with the init moved "
                            "before them the repetitions would add up")
    init_name, update_name = f"{block_name}_init", f"{block_name}_update"
    for name in (init_name, update_name):
        if name in index.blocks:
            raise ScheduleError(prim, f"block {block_name!r}", f"a block named {name!r} "
                                "already exists")

    # The init block: the spatial iter vars (fresh vars, same names and bindings).
    vmap: dict[Var, PrimExpr] = {}
    init_ivs, init_values = [], []
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type != IterType.DATA_PAR:
            continue
        new_iv = IterVar(iv.dom, Var(iv.var.name, iv.var.dtype), iv.iter_type, iv.thread_tag)
        vmap[iv.var] = new_iv.var
        init_ivs.append(new_iv)
        init_values.append(value)
    writes = tuple(BufferRegion(w.buffer, subst(w.region, vmap)) for w in block.writes)
    init_block = Block(tuple(init_ivs), (), writes, init_name, subst(block.init, vmap),
                       annotations=block.annotations)
    # Recreate the loops at or below ``loop`` that the init's bindings use; drop the others,
    # and the predicate terms that mention them.
    used = set().union(*(collect_vars(v) for v in init_values)) if init_values else set()
    chosen = [lp for lp in loops[pos:] if lp.loop_var in used]
    discarded = {lp.loop_var for lp in loops[pos:] if lp.loop_var not in used}
    pred = conjunction(t for t in conjuncts(realize.predicate)
                       if not collect_vars(t) & discarded)
    body: Stmt = BlockRealize(tuple(init_values), pred, init_block)
    loop_map: dict[Var, PrimExpr] = {}
    for lp in reversed(chosen):
        new_var = Var(f"{lp.loop_var.name}_init", lp.loop_var.dtype)
        loop_map[lp.loop_var] = new_var
        body = For(new_var, lp.min, lp.extent, lp.kind, body)
    body = subst(body, loop_map)

    # The update block: no init, and it now reads what it writes.
    read_bufs = {r.buffer for r in block.reads}
    reads = tuple(w for w in block.writes if w.buffer not in read_bufs) + block.reads
    update = block.replace(name_hint=update_name, init=None, reads=reads)
    new_loop = _ReplaceRealize(realize, realize.replace(block=update)).visit(target)
    ancestors = index.loops[loop_var].ancestors
    func = replace_stmt(func, ancestors, target, SeqStmt((body, new_loop)))
    return func, init_name, update_name


# ---- rfactor -------------------------------------------------------------------------------

def rfactor(func: PrimFunc, index: FuncIndex, loop_var: Var,
            factor_axis: int) -> tuple[PrimFunc, str]:
    """Factor the reduction under loop ``loop_var``; returns ``(func, rf_block_name)``."""
    prim = "rfactor"
    linfo = index.loops[loop_var]
    rf_loop = linfo.loop
    realizes = realizes_under(rf_loop.body)
    if len(realizes) != 1:
        raise ScheduleError(prim, _loop_subject(rf_loop), f"the loop must contain exactly one "
                            f"block, it contains {len(realizes)}")
    block_name = realizes[0].block.name_hint
    info = index.blocks[block_name]
    block, realize = info.block, info.realize
    check_reduction_block(info, prim)
    if rf_loop.kind != ForKind.SERIAL:
        raise ScheduleError(prim, _loop_subject(rf_loop), f"the loop must be serial, it is "
                            f"{rf_loop.kind}")
    loops = info.loops
    data_par_vars: set[Var] = set()
    reduce_vars: set[Var] = set()
    for iv, value in zip(block.iter_vars, realize.iter_values):
        (data_par_vars if iv.iter_type == IterType.DATA_PAR else reduce_vars).update(
            collect_vars(value))
    _check_rfactor_loops(loops, rf_loop, block, data_par_vars, reduce_vars)
    if not is_const_int(realize.predicate, 1) and \
            any(v in reduce_vars for v in collect_vars(realize.predicate)):
        # Whole rf-block instances (init included) would be skipped for some rfactor indices,
        # and the write-back would then sum uninitialised partial results.
        raise ScheduleError(prim, f"block {block_name!r}", "its predicate depends on a "
                            "reduction loop (a split whose factors do not divide the reduction "
                            "extent); rfactor needs a perfect tiling of the reduction loops")
    comps = []  # (update store, reducer, lhs, rhs) per reduced buffer
    for init, update in _reduction_stores(block, prim):
        matched = match_reducer(init.value, update)
        if matched is None:
            raise ScheduleError(prim, f"block {block_name!r}", "its init and update do not "
                                "match a known commutative reducer (sum, product, min, max or "
                                "one added with register_reducer); the update must be "
                                "'buf[idx] = combine(buf[idx], value)' and the init its "
                                "identity")
        comps.append((update, *matched))
    first = comps[0][0]
    for update, *_ in comps[1:]:
        # One rf axis is inserted into every reduced buffer at the same place, indexed alike:
        # a tuple reduction must store all its values at the same indices (TVM's rule too).
        if len(update.indices) != len(first.indices) or not all(
                structural_equal(a, b) for a, b in zip(update.indices, first.indices)):
            raise ScheduleError(prim, f"block {block_name!r}", f"its reduced buffers "
                                f"{first.buffer.name!r} and {update.buffer.name!r} are "
                                "stored at different indices (a layout changed one of them); "
                                "rfactor needs every value of a tuple reduction stored alike")
    ndim = len(first.buffer.shape)
    if not -(ndim + 1) <= factor_axis <= ndim:
        raise ScheduleError(prim, _loop_subject(rf_loop), f"factor_axis must be in "
                            f"[{-(ndim + 1)}, {ndim}] for the {ndim}-d buffer "
                            f"{comps[0][0].buffer.name!r}, got {factor_axis}")
    if factor_axis < 0:
        factor_axis += ndim + 1
    # A second rfactor (of the write-back block) gets ``<name>_rf_1``, as cache stages do.
    rf_name = unique_name(f"{block_name}_rf", set(index.blocks))
    scope = info.scope_block
    if scope is None:
        raise ScheduleError(prim, f"block {block_name!r}", "the block has no enclosing block "
                            "to allocate the rfactor buffer in")
    taken = {b.name for b in index.func.buffer_map.values()} | \
        {b.name for i in index.blocks.values() for b in i.block.alloc_buffers}
    rf_bufs = []
    for update, *_ in comps:
        buf = update.buffer
        rf_buf_name = unique_name(f"{buf.name}_rf", taken)
        taken.add(rf_buf_name)
        shape = list(buf.shape)
        shape.insert(factor_axis, rf_loop.extent)
        rf_bufs.append(Buffer(Var(rf_buf_name, "handle"), buf.dtype, tuple(shape), rf_buf_name,
                              scope=buf.scope, data_alignment=buf.data_alignment,
                              offset_factor=buf.offset_factor))

    rf_realize, rf_iv, rf_indices = _rf_block(block, realize, loops, rf_loop, comps, rf_bufs,
                                              factor_axis, rf_name)
    wb_realize = _write_back_block(block, realize, rf_loop, comps, rf_bufs, rf_iv, rf_indices)
    rf_nest = _copy_loop_nest(rf_realize, loops)

    # Rebuild the original nest: the write-back block under the spatial loops and the rf loop.
    keep = {lp.loop_var for lp in loops if lp is rf_loop or lp.loop_var not in reduce_vars}
    # The write-back keeps the predicate terms over the loops it keeps (a non-dividing split
    # of a spatial loop): without them it would write outside the buffer.
    dropped = {lp.loop_var for lp in loops} - keep
    wb_realize = wb_realize.replace(predicate=conjunction(
        t for t in conjuncts(realize.predicate) if not collect_vars(t) & dropped))
    wb_nest = _Prune(keep, {lp.loop_var for lp in loops}, realize, wb_realize).visit(loops[0])
    new_top = seq(rf_nest, wb_nest)
    new_scope = _ReplaceLoop(loops[0], new_top).visit(scope)
    new_scope = new_scope.replace(alloc_buffers=new_scope.alloc_buffers + tuple(rf_bufs))
    scope_pos = max(i for i, s in enumerate(info.ancestors) if s is scope)
    func = replace_stmt(func, info.ancestors[:scope_pos], scope, new_scope)
    check_block_dataflow(func, [rf_name, block_name], prim, f"block {block_name!r}")
    return func, rf_name


def _check_rfactor_loops(loops: list[For], rf_loop: For, block: Block,
                         data_par_vars: set[Var], reduce_vars: set[Var]) -> None:
    prim = "rfactor"
    first = realizes_under(loops[0].body)
    if first[0].block is not block:
        raise ScheduleError(prim, _loop_subject(loops[0]), f"the first block under the "
                            f"outermost loop must be {block.name_hint!r}")
    if rf_loop.loop_var in data_par_vars:
        raise ScheduleError(prim, _loop_subject(rf_loop), "a spatial iter var of the block "
                            "uses this loop; rfactor needs a reduction loop")
    if rf_loop.loop_var not in reduce_vars:
        raise ScheduleError(prim, _loop_subject(rf_loop), "no reduction iter var of the block "
                            "uses this loop; rfactor needs a reduction loop")
    met_reduction = False
    for lp in loops:
        dp, rd = lp.loop_var in data_par_vars, lp.loop_var in reduce_vars
        if dp and rd:
            raise ScheduleError(prim, _loop_subject(lp), "both spatial and reduction iter vars "
                                "use this loop")
        if rd and not met_reduction:
            met_reduction = True
            if len(realizes_under(lp.body)) != 1:
                raise ScheduleError(prim, _loop_subject(lp), "the outermost reduction loop "
                                    "must contain only the reduction block")
        elif not dp and not rd and met_reduction and \
                not (isinstance(lp.extent, IntImm) and lp.extent.value == 1):
            raise ScheduleError(prim, _loop_subject(lp), "a loop that no iter var uses may not "
                                "sit under a reduction loop")


def _reduction_stores(block: Block, prim: str) -> list[tuple[BufferStore, BufferStore]]:
    """``(init store, update store)`` per reduced buffer: one pair for the usual block, one
    per buffer for a multi-value reduction whose init stores each buffer's identity and whose
    body computes each new value (in ``LetStmt``s, as te writes them) from its own buffer only
    (a *separable* reducer: layer norm's sum and sum of squares; argmax-style reducers, whose
    values depend on each other, are refused)."""
    init, body = block.init, block.body
    if isinstance(init, BufferStore) and isinstance(body, BufferStore):
        if init.buffer is not body.buffer or not structural_equal(init.indices, body.indices):
            raise ScheduleError(prim, f"block {block.name_hint!r}", "its init and body store "
                                "to different elements")
        return [(init, body)]
    lets: dict[Var, PrimExpr] = {}
    while isinstance(body, LetStmt):
        lets[body.var] = subst(body.value, lets)
        body = body.body
    inits = init.seq if isinstance(init, SeqStmt) else (init,)
    stores = body.seq if isinstance(body, SeqStmt) else (body,)
    subject = f"block {block.name_hint!r}"
    if not all(isinstance(x, BufferStore) for x in (*inits, *stores)) or \
            len(inits) != len(stores):
        raise ScheduleError(prim, subject, "rfactor handles reductions whose init and body "
                            "store each reduced buffer once (optionally through let bindings)")
    by_buffer = {id(st.buffer): st for st in stores}
    if len(by_buffer) != len(stores):
        raise ScheduleError(prim, subject, "the body stores one buffer twice")
    bufs = {id(st.buffer) for st in stores}
    pairs = []
    for ini in inits:
        st = by_buffer.get(id(ini.buffer))
        if st is None or not structural_equal(ini.indices, st.indices):
            raise ScheduleError(prim, subject, "its init and body store to different elements")
        st = st.replace(value=subst(st.value, lets))
        others = {id(ld.buffer) for ld in _loads(st.value)} & (bufs - {id(st.buffer)})
        if others:
            raise ScheduleError(prim, subject, "a multi-value reduction whose values depend on "
                                "each other (argmax-style) cannot be factored")
        pairs.append((ini, st))
    return pairs


def _loads(e: PrimExpr) -> list[BufferLoad]:
    found: list[BufferLoad] = []

    class _V(IRVisitor):
        def visit_BufferLoad(self, ld: BufferLoad) -> None:
            found.append(ld)
            self.generic_visit(ld)
    _V().visit(e)
    return found


def _rf_block(block: Block, realize: BlockRealize, loops: list[For], rf_loop: For,
              comps: list, rf_bufs: list[Buffer], factor_axis: int, rf_name: str
              ) -> tuple[BlockRealize, IterVar, list[PrimExpr]]:
    """The rfactor block: the rf loop becomes a spatial iter var; each reduction iter var that
    used the rf loop is replaced by one reduction iter var per loop its binding used. One
    store (and one init) per reduced buffer, into its rf buffer."""
    loop_of = {lp.loop_var: lp for lp in loops}

    def iter_from_loop(lp: For, iter_type: int) -> IterVar:
        return IterVar(Range(lp.min, lp.extent), Var(f"v{lp.loop_var.name}", lp.loop_var.dtype),
                       iter_type)

    rf_iv = iter_from_loop(rf_loop, IterType.DATA_PAR)
    ivs, values = [rf_iv], [rf_loop.loop_var]
    loop_to_iter: dict[Var, PrimExpr] = {rf_loop.loop_var: rf_iv.var}
    var_map: dict[Var, PrimExpr] = {}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        used = vars_in_order(value)
        if iv.iter_type == IterType.DATA_PAR or rf_loop.loop_var not in used:
            ivs.append(iv)
            values.append(value)
            continue
        for v in used:
            if v in loop_of and v not in loop_to_iter:
                new_iv = iter_from_loop(loop_of[v], IterType.COMM_REDUCE)
                loop_to_iter[v] = new_iv.var
                ivs.append(new_iv)
                values.append(v)
        var_map[iv.var] = subst(value, loop_to_iter)
    indices = list(comps[0][0].indices)
    indices.insert(factor_axis, rf_iv.var)
    stores, inits = [], []
    for (_update, reducer, _lhs, rhs), rf_buf in zip(comps, rf_bufs):
        store = BufferStore(rf_buf, reducer.combine(
            BufferLoad(rf_buf, tuple(indices), rf_buf.dtype), rhs), tuple(indices))
        store = subst(store, var_map)
        stores.append(store)
        inits.append(BufferStore(rf_buf, reducer.identity, store.indices))
    rf_of = {id(u.buffer): rb for (u, *_), rb in zip(comps, rf_bufs)}

    def regions(old: tuple[BufferRegion, ...]) -> tuple[BufferRegion, ...]:
        out = []
        for r in old:
            if id(r.buffer) in rf_of:
                region = list(r.region)
                region.insert(factor_axis, Range(rf_iv.var, op.const(1, rf_iv.var.dtype)))
                out.append(BufferRegion(rf_of[id(r.buffer)], subst(tuple(region), var_map)))
            else:
                out.append(BufferRegion(r.buffer, subst(r.region, var_map)))
        return tuple(out)

    rf_block = Block(tuple(ivs), regions(block.reads), regions(block.writes),
                     rf_name, seq(*stores), seq(*inits),
                     annotations=block.annotations)
    # storage_align entries named the original buffer, which the rfactor block no longer
    # writes (its rf buffer has another shape): they stay with the write-back block only.
    rf_block = A.carry_dim_align(block, rf_block, lambda buf: True)
    return BlockRealize(tuple(values), realize.predicate, rf_block), rf_iv, indices


def _write_back_block(block: Block, realize: BlockRealize, rf_loop: For, comps: list,
                      rf_bufs: list[Buffer], rf_iv: IterVar, rf_indices: list[PrimExpr]
                      ) -> BlockRealize:
    """The write-back block: the spatial iter vars plus a reduction over the rf loop, one
    store per reduced buffer."""
    wb_iv = IterVar(Range(rf_loop.min, rf_loop.extent),
                    Var(f"v{rf_loop.loop_var.name}", rf_loop.loop_var.dtype),
                    IterType.COMM_REDUCE)
    ivs, values = [wb_iv], [rf_loop.loop_var]
    var_map: dict[Var, PrimExpr] = {rf_iv.var: wb_iv.var}
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type == IterType.DATA_PAR:
            new_iv = IterVar(iv.dom, Var(iv.var.name, iv.var.dtype), IterType.DATA_PAR)
            var_map[iv.var] = new_iv.var
            ivs.append(new_iv)
            values.append(value)

    def point(load: BufferLoad) -> BufferRegion:
        return BufferRegion(load.buffer, tuple(Range(i, op.const(1, i.dtype))
                                               for i in load.indices))

    stores, inits, reads, writes = [], [], [], []
    for (update, reducer, lhs, _rhs), rf_buf in zip(comps, rf_bufs):
        wb_lhs = subst(lhs, var_map)
        wb_rhs = subst(BufferLoad(rf_buf, tuple(rf_indices), rf_buf.dtype), var_map)
        indices = subst(update.indices, var_map)
        stores.append(BufferStore(update.buffer, reducer.combine(wb_lhs, wb_rhs), indices))
        inits.append(BufferStore(update.buffer, reducer.identity, indices))
        reads.append(point(wb_rhs))
        writes.append(point(wb_lhs))
    wb_block = Block(tuple(ivs), tuple(reads), tuple(writes), block.name_hint, seq(*stores),
                     seq(*inits), annotations=block.annotations)
    return BlockRealize(tuple(values), op.const(True), wb_block)


def _copy_loop_nest(body: BlockRealize, loops: list[For]) -> Stmt:
    """``body`` under copies of ``loops`` with fresh loop vars (same names, kinds, annotations)."""
    vmap = {lp.loop_var: Var(lp.loop_var.name, lp.loop_var.dtype) for lp in loops}
    stmt: Stmt = body.replace(iter_values=subst(body.iter_values, vmap),
                              predicate=subst(body.predicate, vmap))
    for lp in reversed(loops):
        stmt = lp.replace(loop_var=vmap[lp.loop_var], body=stmt)
    return stmt


class _Prune(IRMutator):
    """Drop the block's loops in ``nest`` that are not kept; swap in the write-back block."""

    def __init__(self, keep: set[Var], nest: set[Var], old: BlockRealize,
                 new: BlockRealize) -> None:
        super().__init__()
        self.keep, self.nest, self.old, self.new = keep, nest, old, new

    def visit_For(self, lp: For) -> Stmt:
        if lp.loop_var not in self.nest:
            return lp
        body = self.visit(lp.body)
        return lp.replace(body=body) if lp.loop_var in self.keep else body

    def visit_BlockRealize(self, r: BlockRealize) -> Stmt:
        return self.new if r is self.old else r

    def visit_PrimExpr(self, e: PrimExpr) -> PrimExpr:
        return e


class _ReplaceLoop(IRMutator):
    def __init__(self, old: For, new: Stmt) -> None:
        super().__init__()
        self.old, self.new = old, new

    def visit_For(self, lp: For) -> Stmt:
        return self.new if lp is self.old else self.generic_visit(lp)

    def visit_SeqStmt(self, s: SeqStmt) -> Stmt:
        # Splice a replacement sequence into its parent: a nested SeqStmt would make later
        # primitives (cache_write's insertion point, compute_at's consumer order) treat the
        # rfactor and write-back nests as one statement.
        items = [self.visit(x) for x in s.seq]
        if all(a is b for a, b in zip(items, s.seq)):
            return s
        return seq(*items)

    def visit_BlockRealize(self, r: BlockRealize) -> Stmt:
        return self.generic_visit(r)

    def visit_PrimExpr(self, e: PrimExpr) -> PrimExpr:
        return e


__all__ = ["decompose_reduction", "rfactor", "check_reduction_block", "conjuncts",
           "conjunction", "subst"]
