"""Illegal requests for the schedule property tests: each generator inspects the current
schedule and builds a request that must raise ScheduleError (the test then checks that the IR
and the trace did not change). A generator returns ``(description, thunk)``, or None when the
schedule offers no such request; setup calls (making a handle stale) happen before the thunk
and are legal.
"""
from __future__ import annotations

from hypothesis import strategies as st
from sched_property_strategy import (
    View, binds_reduce_of, extent, inline_candidates, intermediate_writes, loop_rv, pick,
)

from workbench.tir.schedule import Schedule
from workbench.tir.schedule.utils import loop_binds_reduction
from workbench.tir.stmt import ForKind



def _ill_parallel_reduction(sch, view, draw):
    opts = [lp for lp in view.loops if loop_binds_reduction(lp)]
    if not opts:
        return None
    lp = pick(draw, opts)
    rv = loop_rv(sch, view, lp)
    kind = pick(draw, ["parallel", "vectorize"])
    return f"{kind} on reduction loop {lp.loop_var.name}", lambda: getattr(sch, kind)(rv)


def _ill_fuse_not_nested(sch, view, draw):
    pairs = [(a, b) for a in view.loops for b in view.loops
             if a is not b and a.body is not b]
    if not pairs:
        return None
    a, b = pick(draw, pairs)
    ra, rb = loop_rv(sch, view, a), loop_rv(sch, view, b)
    return f"fuse {a.loop_var.name} {b.loop_var.name}", lambda: sch.fuse(ra, rb)


def _ill_reorder_two_chains(sch, view, draw):
    pairs = [(a, b) for a in view.loops for b in view.loops
             if a is not b and a not in view.ancestors(b) and b not in view.ancestors(a)]
    if not pairs:
        return None
    a, b = pick(draw, pairs)
    ra, rb = loop_rv(sch, view, a), loop_rv(sch, view, b)
    return f"reorder {a.loop_var.name} {b.loop_var.name}", lambda: sch.reorder(ra, rb)


def _ill_compute_at_non_consumer(sch, view, draw):
    opts = []
    for n in view.blocks:
        cons = view.consumers(n)
        for lp in view.loops:
            if view.contains(lp, n) or not all(view.contains(lp, c) for c in cons) or \
                    view.is_output(n):
                opts.append((n, lp))
    if not opts:
        return None
    n, lp = pick(draw, opts)
    b, rv = sch.get_block(n), loop_rv(sch, view, lp)
    return f"compute_at {n} into {lp.loop_var.name}", lambda: sch.compute_at(b, rv)


def _ill_reverse_compute_at(sch, view, draw):
    opts = []
    for n in view.blocks:
        prods = view.producers(n)
        for lp in view.loops:
            if prods and (view.contains(lp, n) or
                          not all(view.contains(lp, p) for p in prods)):
                opts.append((n, lp))
    if not opts:
        return None
    n, lp = pick(draw, opts)
    b, rv = sch.get_block(n), loop_rv(sch, view, lp)
    return f"reverse_compute_at {n} into {lp.loop_var.name}", \
        lambda: sch.reverse_compute_at(b, rv)


def _ill_inline(sch, view, draw):
    opts = [n for n in view.blocks if view.is_output(n) or view.has_reduce_iter(n)]
    if not opts:
        return None
    n = pick(draw, opts)
    b = sch.get_block(n)
    kind = pick(draw, ["compute_inline", "reverse_compute_inline"]) \
        if view.has_reduce_iter(n) else "compute_inline"
    return f"{kind} {n}", lambda: getattr(sch, kind)(b)


def _ill_split_too_small(sch, view, draw):
    opts = [lp for lp in view.loops if (extent(lp) or 0) >= 3]
    if not opts:
        return None
    lp = pick(draw, opts)
    e = extent(lp)
    f0 = draw(st.integers(1, e - 1))
    f1 = draw(st.integers(1, max(1, (e - 1) // f0)))
    rv = loop_rv(sch, view, lp)
    bad = pick(draw, [[f0, f1], [0, None], [None, -2], [None, None, 2], [4]])
    return f"split {lp.loop_var.name} by {bad} (extent {e})", lambda: sch.split(rv, bad)


def _ill_stale_loop(sch, view, draw):
    opts = [lp for lp in view.loops if (extent(lp) or 0) >= 2]
    if not opts:
        return None
    lp = pick(draw, opts)
    rv = loop_rv(sch, view, lp)
    sch.split(rv, [None, 2])                    # legal; rv is now stale
    use = pick(draw, ["split", "parallel", "unroll", "get_child_blocks",
                                "sample_perfect_tile", "annotate"])
    calls = {"split": lambda: sch.split(rv, [None, 1]), "parallel": lambda: sch.parallel(rv),
             "unroll": lambda: sch.unroll(rv),
             "get_child_blocks": lambda: sch.get_child_blocks(rv),
             "sample_perfect_tile": lambda: sch.sample_perfect_tile(rv, 2),
             "annotate": lambda: sch.annotate(rv, "k", 1)}
    return f"{use} on stale loop {lp.loop_var.name}", calls[use]


def _ill_stale_block(sch, view, draw):
    opts = inline_candidates(view)
    if not opts:
        return None
    n = pick(draw, opts)
    b = sch.get_block(n)
    sch.compute_inline(b)                       # legal; b is now stale
    use = pick(draw, ["get_loops", "compute_inline", "cache_write", "get_consumers"])
    calls = {"get_loops": lambda: sch.get_loops(b), "compute_inline": lambda: sch.compute_inline(b),
             "cache_write": lambda: sch.cache_write(b, 0, "local"),
             "get_consumers": lambda: sch.get_consumers(b)}
    return f"{use} on inlined block {n}", calls[use]


def _ill_decompose_inside_reduction(sch, view, draw):
    opts = []
    for n in view.blocks:
        if view.block(n).init is None:
            continue
        loops = view.loops_of(n)
        red = [k for k, lp in enumerate(loops) if binds_reduce_of(view, n, lp)]
        if red and red[0] + 1 < len(loops):
            opts += [(n, lp) for lp in loops[red[0] + 1:]]
        # a loop that is not above the block
        opts += [(n, lp) for lp in view.loops if not view.contains(lp, n)]
    if not opts:
        return None
    n, lp = pick(draw, opts)
    b, rv = sch.get_block(n), loop_rv(sch, view, lp)
    return f"decompose_reduction {n} at {lp.loop_var.name}", \
        lambda: sch.decompose_reduction(b, rv)


def _ill_rfactor_spatial(sch, view, draw):
    opts = [lp for lp in view.loops if not loop_binds_reduction(lp)]
    if not opts:
        return None
    lp = pick(draw, opts)
    rv = loop_rv(sch, view, lp)
    return f"rfactor spatial loop {lp.loop_var.name}", lambda: sch.rfactor(rv, 0)


def _ill_nested_parallel(sch, view, draw):
    opts = [lp for lp in view.loops
            if any(a.kind == ForKind.PARALLEL for a in view.ancestors(lp))]
    if not opts:
        return None
    lp = pick(draw, opts)
    rv = loop_rv(sch, view, lp)
    return f"parallel inside parallel {lp.loop_var.name}", lambda: sch.parallel(rv)


def _ill_buffer_index(sch, view, draw):
    n = pick(draw, view.blocks)
    b = sch.get_block(n)
    blk = view.block(n)
    kind = pick(draw, ["cache_read", "cache_write", "scope"])
    if kind == "cache_read":
        return f"cache_read {n} index out of range", \
            lambda: sch.cache_read(b, len(blk.reads) + 1, "local")
    if kind == "cache_write":
        return f"cache_write {n} bad scope", lambda: sch.cache_write(b, 0, "shared.dyn.bogus")
    return f"set_scope {n} index out of range", \
        lambda: sch.set_scope(b, len(blk.writes) + 2, "local")


def _ill_transform_not_injective(sch, view, draw):
    opts = [(n, k, buf, d) for n, k, buf in intermediate_writes(view) if len(buf.shape) >= 2
            for d in range(len(buf.shape)) if int(buf.shape[d].value) > 1]
    if not opts:
        return None
    n, k, buf, drop = pick(draw, opts)
    nd = len(buf.shape)
    imap = eval("lambda " + ", ".join(f"i{d}" for d in range(nd)) +  # noqa: S307
                ": (" + ", ".join(f"i{d}" for d in range(nd) if d != drop) + ",)")
    b = sch.get_block(n)
    return f"transform_layout {buf.name} dropping a dim", \
        lambda: sch.transform_layout(b, ("write", k), imap)


def _ill_misc(sch, view, draw):
    n = pick(draw, view.blocks)
    b = sch.get_block(n)
    kind = pick(draw, ["get_block", "unannotate", "storage_align", "tile_n"])
    if kind == "get_block":
        return "get_block of a missing name", lambda: sch.get_block(n + "_missing")
    if kind == "unannotate":
        return f"unannotate missing key on {n}", lambda: sch.unannotate(b, "no.such.key")
    if kind == "storage_align":
        return f"storage_align {n} bad axis", lambda: sch.storage_align(b, 0, 9, 4, 0)
    loops = view.loops_of(n)
    if not loops:
        return "get_block of a missing name", lambda: sch.get_block(n + "_missing")
    rv = sch.get_loops(b)[0]
    return "sample_perfect_tile n=0", lambda: sch.sample_perfect_tile(rv, 0)


ILLEGAL = [_ill_parallel_reduction, _ill_fuse_not_nested, _ill_reorder_two_chains,
           _ill_compute_at_non_consumer, _ill_reverse_compute_at, _ill_inline,
           _ill_split_too_small, _ill_stale_loop, _ill_stale_block,
           _ill_decompose_inside_reduction, _ill_rfactor_spatial, _ill_nested_parallel,
           _ill_buffer_index, _ill_transform_not_injective, _ill_misc]


def draw_illegal_request(sch: Schedule, draw):
    """(description, thunk) of a request that must raise ScheduleError."""
    while True:
        gen = pick(draw, ILLEGAL)
        got = gen(sch, View(sch), draw)
        if got is not None:
            return got
