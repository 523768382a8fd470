"""The legal-move strategy of the schedule property tests (test_sched_property.py); the
workloads are in sched_property_workloads.py, the illegal requests in sched_property_illegal.py.

The strategy looks at the *current* IR of a schedule (``sch.mod``, read through ``FuncIndex``)
and offers only moves it believes legal: a primitive that refuses one of them is a finding (the
primitive is stricter than TVM, or this strategy is wrong). Handles are always fetched afresh
through ``get_block`` / ``get_loops``, as a user would, so they show in the trace.
"""
from __future__ import annotations

from typing import Callable

from hypothesis import strategies as st

from workbench.tir.expr import IntImm, Var
from workbench.tir.schedule import Schedule, ScheduleError
from workbench.tir.schedule.state import FuncIndex
from workbench.tir.schedule.utils import loop_binds_reduction, realizes_under, uses_var
from workbench.tir.stmt import BlockRealize, BufferStore, For, ForKind, IterType

# ---- reading the current IR -------------------------------------------------------------------


class View:
    """The blocks and loops of the root scope of ``sch``'s function, for picking moves."""

    def __init__(self, sch: Schedule) -> None:
        self.func = sch.mod["main"]
        self.idx = FuncIndex(self.func)
        self.params = set(self.func.buffer_map.values())
        root = self.func.body.block
        self.blocks = [n for n in self.idx.block_order
                       if self.idx.blocks[n].scope_block is root]
        self.loops = [info.loop for info in self.idx.loops.values()
                      if not any(a is not root and type(a).__name__ == "Block"
                                 for a in info.ancestors)]

    # blocks
    def block(self, name: str):
        return self.idx.blocks[name].block

    def realize(self, name: str) -> BlockRealize:
        return self.idx.blocks[name].realize

    def loops_of(self, name: str) -> list[For]:
        return self.idx.blocks[name].loops

    def is_output(self, name: str) -> bool:
        return any(w.buffer in self.params for w in self.block(name).writes)

    def has_reduce_iter(self, name: str) -> bool:
        return any(iv.iter_type != IterType.DATA_PAR for iv in self.block(name).iter_vars)

    def writers(self, buf) -> list[str]:
        return [n for n in self.blocks if any(w.buffer is buf for w in self.block(n).writes)]

    def readers(self, buf) -> list[str]:
        return [n for n in self.blocks if any(r.buffer is buf for r in self.block(n).reads)]

    def producers(self, name: str) -> list[str]:
        reads = {r.buffer for r in self.block(name).reads}
        return [n for n in self.blocks if n != name and
                any(w.buffer in reads for w in self.block(n).writes)]

    def consumers(self, name: str) -> list[str]:
        writes = {w.buffer for w in self.block(name).writes}
        return [n for n in self.blocks if n != name and
                any(r.buffer in writes for r in self.block(n).reads)]

    # loops
    def under(self, loop: For) -> list[str]:
        return [r.block.name_hint for r in realizes_under(loop.body)]

    def ancestors(self, loop: For) -> list[For]:
        return [a for a in self.idx.loops[loop.loop_var].ancestors if isinstance(a, For)]

    def descendants(self, loop: For) -> list[For]:
        return [lp for lp in self.loops if loop in self.ancestors(lp)]

    def contains(self, loop: For, name: str) -> bool:
        return any(a is loop for a in self.idx.blocks[name].ancestors)

    def feeds_every_block(self, loop: For) -> bool:
        """Every block below uses the loop in a data-parallel binding (and none in another)."""
        if loop_binds_reduction(loop):
            return False
        for r in realizes_under(loop.body):
            if not any(iv.iter_type == IterType.DATA_PAR and uses_var(v, loop.loop_var)
                       for iv, v in zip(r.block.iter_vars, r.iter_values)):
                return False
        return True


def pick(draw, options):
    """One of ``options``, drawn by index (so hypothesis prints and shrinks a small int)."""
    options = list(options)
    return options[draw(st.integers(0, len(options) - 1))]


def extent(loop: For) -> int | None:
    return loop.extent.value if isinstance(loop.extent, IntImm) else None


def loop_rv(sch: Schedule, view: View, loop: For):
    """A fresh LoopRV for ``loop``, through the first block below it."""
    name = view.under(loop)[0]
    rvs = sch.get_loops(sch.get_block(name))
    return rvs[[lp.loop_var for lp in view.loops_of(name)].index(loop.loop_var)]


def _store_is_identity(block) -> bool:
    """One store indexed by distinct block variables (compute_inline's form)."""
    store = block.body
    own = {iv.var for iv in block.iter_vars}
    return isinstance(store, BufferStore) and \
        all(isinstance(e, Var) and e in own for e in store.indices) and \
        len({id(e) for e in store.indices}) == len(store.indices)


# ---- legal moves ------------------------------------------------------------------------------
# Each move is (name, options(view) -> list, apply(sch, view, draw, option) -> str).


def _opt_split(view):
    return [lp for lp in view.loops if (extent(lp) or 0) >= 2]


def _do_split_sampled(sch, view, draw, lp):
    n = draw(st.integers(2, 3))
    mx = pick(draw, [2, 4, 16])
    rv = loop_rv(sch, view, lp)
    sch.split(rv, sch.sample_perfect_tile(rv, n=n, max_innermost_factor=mx))
    return f"split {lp.loop_var.name} by sampled {n}-tile"


def _do_split_explicit(sch, view, draw, lp):
    f = draw(st.integers(1, extent(lp)))
    factors = [None, f] if draw(st.booleans()) else [f, None]
    sch.split(loop_rv(sch, view, lp), factors)
    return f"split {lp.loop_var.name} by {factors}"


def _opt_nested_pairs(view):
    out = []
    for lp in view.loops:
        inner = lp.body
        if isinstance(inner, For) and not any(
                uses_var(x, lp.loop_var) for x in (inner.min, inner.extent)):
            out.append((lp, inner))
    return out


def _do_reorder(sch, view, draw, pair):
    outer, inner = pair
    name = view.under(inner)[0]
    rvs = dict(zip([lp.loop_var for lp in view.loops_of(name)],
                   sch.get_loops(sch.get_block(name))))
    sch.reorder(rvs[inner.loop_var], rvs[outer.loop_var])
    return f"reorder {inner.loop_var.name} above {outer.loop_var.name}"


def _opt_fuse(view):
    return [(o, i) for o, i in _opt_nested_pairs(view)
            if isinstance(o.min, IntImm) and o.min.value == 0 and
            isinstance(i.min, IntImm) and i.min.value == 0]


def _do_fuse(sch, view, draw, pair):
    outer, inner = pair
    name = view.under(inner)[0]
    rvs = dict(zip([lp.loop_var for lp in view.loops_of(name)],
                   sch.get_loops(sch.get_block(name))))
    sch.fuse(rvs[outer.loop_var], rvs[inner.loop_var])
    return f"fuse {outer.loop_var.name} {inner.loop_var.name}"


def _no_parallel_around(view, lp) -> bool:
    return all(a.kind != ForKind.PARALLEL for a in view.ancestors(lp) + view.descendants(lp))


def _no_decomposed_update_under(view, lp) -> bool:
    """A decomposed reduction's update (reduction variables, no init) accumulates across the
    iterations of every loop around it: parallel there is refused (analysis/dataflow.py)."""
    return not any(view.has_reduce_iter(n) and view.block(n).init is None
                   for n in view.under(lp))


def _opt_parallel(view):
    return [lp for lp in view.loops if lp.kind == ForKind.SERIAL and
            _no_parallel_around(view, lp) and view.feeds_every_block(lp) and
            _no_decomposed_update_under(view, lp)]


def _do_parallel(sch, view, draw, lp):
    sch.parallel(loop_rv(sch, view, lp))
    return f"parallel {lp.loop_var.name}"


def _opt_vectorize(view):
    return [lp for lp in view.loops if lp.kind == ForKind.SERIAL and
            isinstance(lp.body, BlockRealize) and 2 <= (extent(lp) or 0) <= 16 and
            view.feeds_every_block(lp) and _no_decomposed_update_under(view, lp)]


def _do_vectorize(sch, view, draw, lp):
    sch.vectorize(loop_rv(sch, view, lp))
    return f"vectorize {lp.loop_var.name}"


def _opt_unroll(view):
    return [lp for lp in view.loops if lp.kind == ForKind.SERIAL and
            2 <= (extent(lp) or 0) <= 8]


def _do_unroll(sch, view, draw, lp):
    sch.unroll(loop_rv(sch, view, lp))
    return f"unroll {lp.loop_var.name}"


def inline_candidates(view):
    return [n for n in view.blocks if not view.is_output(n) and
            view.block(n).init is None and not view.has_reduce_iter(n) and
            len(view.block(n).writes) == 1 and _store_is_identity(view.block(n)) and
            len(view.writers(view.block(n).writes[0].buffer)) == 1 and
            not any(r.buffer is view.block(n).writes[0].buffer for r in view.block(n).reads)]


def _do_inline(sch, view, draw, name):
    sch.compute_inline(sch.get_block(name))
    return f"compute_inline {name}"


def _opt_reverse_inline(view):
    out = []
    for n in view.blocks:
        blk, real = view.block(n), view.realize(n)
        if blk.init is not None or view.has_reduce_iter(n):
            continue
        if not (isinstance(real.predicate, IntImm) and real.predicate.value):
            continue
        produced = []
        for r in blk.reads:
            if r.buffer not in produced and view.writers(r.buffer):
                produced.append(r.buffer)
        if len(produced) != 1 or not isinstance(blk.body, BufferStore):
            continue
        buf = produced[0]
        writers = view.writers(buf)
        if len(writers) != 1 or view.readers(buf) != [n]:
            continue
        p = writers[0]
        pb = view.block(p)
        if view.has_reduce_iter(p) or pb.init is not None or view.is_output(p) or \
                len(pb.writes) != 1 or \
                any(r.buffer is w.buffer for r in pb.reads for w in pb.writes) or \
                not isinstance(pb.body, BufferStore):
            continue
        # The consumer reads the buffer at its own block variables, each once.
        loads = _loads(blk.body, buf)
        own = {iv.var for iv in blk.iter_vars}
        if not loads or any(len(ld) != len(loads[0]) or
                            any(a is not b for a, b in zip(ld, loads[0])) for ld in loads):
            continue
        idx = loads[0]
        if not all(isinstance(e, Var) and e in own for e in idx) or \
                len({id(e) for e in idx}) != len(idx) or len(idx) != len(own):
            continue
        out.append(n)
    return out


def _loads(stmt, buf) -> list[tuple]:
    from workbench.tir.functor import IRVisitor
    found: list[tuple] = []

    class _V(IRVisitor):
        def visit_BufferLoad(self, load):
            if load.buffer is buf:
                found.append(tuple(load.indices))
            self.generic_visit(load)

    _V().visit(stmt)
    return found


def _do_reverse_inline(sch, view, draw, name):
    sch.reverse_compute_inline(sch.get_block(name))
    return f"reverse_compute_inline {name}"


def _movable(view, n) -> bool:
    """A complete block, or a reduction block with its init (compute_at's precondition)."""
    blk = view.block(n)
    dominant = all(len(view.writers(w.buffer)) == 1 for w in blk.writes)
    rw = any(r.buffer is w.buffer for r in blk.reads for w in blk.writes)
    if not view.has_reduce_iter(n):
        return dominant and not rw
    return dominant and blk.init is not None


def _opt_compute_at(view):
    return [n for n in view.blocks if not view.is_output(n) and view.consumers(n) and
            _movable(view, n)]


def _do_compute_at(sch, view, draw, name):
    block = sch.get_block(name)
    loc = sch.sample_compute_location(block)
    sch.compute_at(block, loc)
    return f"compute_at {name} at sampled location {sch.trace.get_decision(sch.trace.insts[-2])}"


def _rca_loops(view, name) -> list[For]:
    """Loops containing every producer of ``name`` but not ``name`` itself, where every
    producer is complete at the end of an iteration: neither the loop nor one above it feeds a
    producer's reduction variable (else the block would read partial results, which the
    primitive refuses)."""
    producers = view.producers(name)
    if not producers:
        return []
    return [lp for lp in view.loops if all(view.contains(lp, p) for p in producers) and
            not view.contains(lp, name) and
            not any(binds_reduce_of(view, p, x) for p in producers
                    for x in [lp] + view.ancestors(lp))]


def _opt_reverse_compute_at(view):
    return [(n, lp) for n in view.blocks if _movable(view, n) for lp in _rca_loops(view, n)]


def _do_reverse_compute_at(sch, view, draw, option):
    name, lp = option
    sch.reverse_compute_at(sch.get_block(name), loop_rv(sch, view, lp))
    return f"reverse_compute_at {name} at {lp.loop_var.name}"


def _opt_cache_write(view):
    return [n for n in view.blocks if len(view.block(n).writes) == 1 and
            len(view.writers(view.block(n).writes[0].buffer)) == 1]


def _do_cache_write(sch, view, draw, name):
    block = sch.get_block(name)
    cw = sch.cache_write(block, 0, "local")
    msg = f"cache_write {name}"
    view = View(sch)
    loops = view.loops_of(name)
    if loops and draw(st.booleans()):
        # A register tile: write back under one of the block's spatial loops (the write-back
        # may already sit under some of them when the block was moved under a consumer).
        first_red = next((k for k, lp in enumerate(loops) if loop_binds_reduction(lp)),
                         len(loops))
        cw_name = sch.get(cw).name_hint
        candidates = [lp for lp in loops[:first_red] if not view.contains(lp, cw_name)]
        if candidates:
            lp = pick(draw, candidates)
            rvs = sch.get_loops(block)
            sch.reverse_compute_at(cw, rvs[loops.index(lp)])
            msg += f" + reverse_compute_at {lp.loop_var.name}"
    return msg


def _opt_cache_read(view):
    out = []
    for n in view.blocks:
        for k, r in enumerate(view.block(n).reads):
            if len(view.writers(r.buffer)) <= 1:
                out.append((n, k))
    return out


def _do_cache_read(sch, view, draw, option):
    name, k = option
    scope = pick(draw, ["local", "global"])
    cr = sch.cache_read(sch.get_block(name), k, scope)
    msg = f"cache_read {name} read {k} {scope}"
    if draw(st.booleans()):
        sch.compute_at(cr, sch.sample_compute_location(cr))
        msg += " + compute_at sampled"
    return msg


def _reduction_store(view, n) -> bool:
    blk = view.block(n)
    return blk.init is not None and isinstance(blk.body, BufferStore) and \
        isinstance(blk.init, BufferStore)


def _opt_decompose(view):
    out = []
    for n in view.blocks:
        if view.block(n).init is None:
            continue
        loops = view.loops_of(n)
        red = [k for k, lp in enumerate(loops) if binds_reduce_of(view, n, lp)]
        if not red:
            continue
        # Below the decomposition point every (non-unit) loop must bind a block variable: a
        # loop binding none repeats the reduction, which a hoisted init cannot follow.
        real = view.realize(n)
        repeats = [k for k, lp in enumerate(loops) if extent(lp) != 1 and
                   not any(uses_var(v, lp.loop_var) for v in real.iter_values)]
        first = max(repeats) + 1 if repeats else 0
        out += [(n, lp) for lp in loops[first:red[0] + 1]]
    return out


def binds_reduce_of(view, n, lp) -> bool:
    blk, real = view.block(n), view.realize(n)
    return any(iv.iter_type == IterType.COMM_REDUCE and uses_var(v, lp.loop_var)
               for iv, v in zip(blk.iter_vars, real.iter_values))


def _do_decompose(sch, view, draw, option):
    name, lp = option
    sch.decompose_reduction(sch.get_block(name), loop_rv(sch, view, lp))
    return f"decompose_reduction {name} at {lp.loop_var.name}"


def _opt_rfactor(view):
    out = []
    for n in view.blocks:
        if not _reduction_store(view, n):
            continue
        loops = view.loops_of(n)
        blk, real = view.block(n), view.realize(n)
        kinds = []
        for lp in loops:
            dp = any(iv.iter_type == IterType.DATA_PAR and uses_var(v, lp.loop_var)
                     for iv, v in zip(blk.iter_vars, real.iter_values))
            rd = binds_reduce_of(view, n, lp)
            kinds.append((dp, rd))
        if any(dp and rd for dp, rd in kinds):
            continue
        red = [k for k, (_, rd) in enumerate(kinds) if rd]
        if not red or view.under(loops[red[0]]) != [n] or view.under(loops[0])[0] != n or \
                f"{n}_rf" in view.blocks:
            continue
        if any(not dp and not rd and extent(lp) != 1
               for lp, (dp, rd) in zip(loops[red[0]:], kinds[red[0]:])):
            continue
        ndim = len(blk.writes[0].buffer.shape)
        out += [(n, loops[k], ndim) for k in red if loops[k].kind == ForKind.SERIAL]
    return out


def _do_rfactor(sch, view, draw, option):
    name, lp, ndim = option
    axis = draw(st.integers(0, ndim))
    sch.rfactor(loop_rv(sch, view, lp), axis)
    return f"rfactor {name} at {lp.loop_var.name} axis {axis}"


def intermediate_writes(view):
    return [(n, k, w.buffer) for n in view.blocks
            for k, w in enumerate(view.block(n).writes) if w.buffer not in view.params]


def _opt_storage_align(view):
    return [(n, k, buf) for n, k, buf in intermediate_writes(view) if len(buf.shape) >= 2]


def _do_storage_align(sch, view, draw, option):
    name, k, buf = option
    axis = draw(st.integers(0, len(buf.shape) - 2))
    factor, offset = pick(draw, [4, 8]), pick(draw, [0, 1])
    sch.storage_align(sch.get_block(name), k, axis, factor, offset)
    return f"storage_align {name} {buf.name} axis {axis} {factor} {offset}"


def _opt_transform_layout(view):
    return intermediate_writes(view)


def _do_transform_layout(sch, view, draw, option):
    name, k, buf = option
    shape = [int(s.value) for s in buf.shape]
    nd = len(shape)
    splittable = [d for d in range(nd) if any(shape[d] % f == 0 for f in (2, 3))]
    if nd >= 2 and (not splittable or draw(st.booleans())):
        perm = draw(st.permutations(list(range(nd))))
        imap = eval("lambda " + ", ".join(f"i{d}" for d in range(nd)) + ": (" +  # noqa: S307
                    "".join(f"i{p}, " for p in perm) + ")")
        desc = f"permute {perm}"
    elif splittable:
        d = pick(draw, splittable)
        f = 2 if shape[d] % 2 == 0 else 3
        args = ", ".join(f"i{x}" for x in range(nd))
        outs = []
        for x in range(nd):
            outs += [f"i{x} // {f}", f"i{x} % {f}"] if x == d else [f"i{x}"]
        imap = eval(f"lambda {args}: ({', '.join(outs)},)")  # noqa: S307
        desc = f"split dim {d} by {f}"
    else:
        return "transform_layout skipped (1-d, prime extent)"
    sch.transform_layout(sch.get_block(name), ("write", k), imap)
    return f"transform_layout {buf.name} {desc}"


def _opt_annotate(view):
    return list(view.loops)


def _do_annotate(sch, view, draw, lp):
    v = sch.sample_categorical([1, 2, 4], [0.5, 0.25, 0.25])
    rv = loop_rv(sch, view, lp)
    sch.annotate(rv, "test.hint", v)
    if draw(st.booleans()):
        sch.unannotate(rv, "test.hint")
    return f"annotate {lp.loop_var.name}"


def _opt_blocks(view):
    return list(view.blocks)


def _do_add_unit_loop(sch, view, draw, name):
    sch.add_unit_loop(sch.get_block(name))
    return f"add_unit_loop {name}"


def _do_lookups(sch, view, draw, name):
    b = sch.get_block(name)
    sch.get_producers(b)
    sch.get_consumers(b)
    loops = sch.get_loops(b)
    if loops:
        sch.get_child_blocks(loops[0])
    return f"lookups on {name}"


MOVES: list[tuple[str, Callable, Callable]] = [
    ("split_sampled", _opt_split, _do_split_sampled),
    ("split_explicit", _opt_split, _do_split_explicit),
    ("reorder", _opt_nested_pairs, _do_reorder),
    ("fuse", _opt_fuse, _do_fuse),
    ("parallel", _opt_parallel, _do_parallel),
    ("vectorize", _opt_vectorize, _do_vectorize),
    ("unroll", _opt_unroll, _do_unroll),
    ("compute_inline", inline_candidates, _do_inline),
    ("reverse_compute_inline", _opt_reverse_inline, _do_reverse_inline),
    ("compute_at", _opt_compute_at, _do_compute_at),
    ("reverse_compute_at", _opt_reverse_compute_at, _do_reverse_compute_at),
    ("cache_write", _opt_cache_write, _do_cache_write),
    ("cache_read", _opt_cache_read, _do_cache_read),
    ("decompose_reduction", _opt_decompose, _do_decompose),
    ("rfactor", _opt_rfactor, _do_rfactor),
    ("storage_align", _opt_storage_align, _do_storage_align),
    ("transform_layout", _opt_transform_layout, _do_transform_layout),
    ("annotate", _opt_annotate, _do_annotate),
    ("add_unit_loop", _opt_blocks, _do_add_unit_loop),
    ("lookups", _opt_blocks, _do_lookups),
]


# Refusals of moves this strategy believes legal, but which a primitive documents (or is
# known) to refuse: (primitive, words of the reason). Each one is a finding, kept visible here;
# any other ScheduleError from a "legal" move fails the test.
TOLERATED: list[tuple[str, str]] = [
    # A consumer/producer index that combines several block variables in one dimension (the
    # stencil ``yy + ry`` of a convolution) has no solved domain, even when the whole dimension
    # is required (TVM keeps such variables at their full domain).
    ("reverse_compute_at", "cannot express the region"),
    ("compute_at", "cannot express the region"),
    # rfactor after a non-dividing split of the reduction axis would sum partial results that
    # the predicate never initialised, so it is refused (TVM's AddRFactor samples perfect tiles).
    ("rfactor", "needs a perfect tiling of the reduction loops"),
]


def tolerated(err: ScheduleError) -> bool:
    return any(err.primitive == p and words in err.reason for p, words in TOLERATED)


def draw_legal_move(sch: Schedule, draw) -> str:
    """Pick an available move kind, then its target and parameters; apply it. A refusal listed
    in TOLERATED is reported in the returned description; any other one propagates."""
    view = View(sch)
    available = [(name, opts, do) for name, opts, do in MOVES if opts(view)]
    name, opts, do = pick(draw, available)
    option = pick(draw, opts(view))
    try:
        return do(sch, view, draw, option)
    except ScheduleError as e:
        if not tolerated(e):
            raise
        return f"{name}: refused as documented ({e})"
