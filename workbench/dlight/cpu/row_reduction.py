"""``RowReduction``: kernels that reduce over trailing axes and use the result row by row --
softmax, log-softmax, layer / RMS norm, ``sum`` / ``mean`` / ``max`` over the last axes.

The structural test: every block is row-aligned with the output block. The reduction blocks
keep the same ``d`` leading spatial variables (the row: batch, heads, sequence position)
and reduce over the rest; every block's first ``d`` variables range over the same extents,
and every read of a reduction's result is indexed by exactly the reader's first ``d``
variables. Then each row is independent: every stage is computed under the output's row
loop (``compute_at``), the rows run in parallel, and the row's data stays in cache from the
first stage to the last. Inside a row, data-parallel stages are vectorized; a reduction over
a contiguous axis whose extent the vector width divides is vectorized by ``rfactor``
(per-lane partial results, then one horizontal combine).
"""
from __future__ import annotations

from workbench.dlight.analysis import (
    BlockFacts, block_facts, block_realize, count_reductions, root_blocks,
)
from workbench.dlight.base import CPUInfo, ScheduleRule
from workbench.dlight.cpu.common import (
    inline_cheap_stages, loop_extent, parallelize, vector_tile,
)
from workbench.ir.structural import structural_equal
from workbench.target import Target
from workbench.tir.function import PrimFunc
from workbench.tir.schedule import BlockRV, LoopRV, Schedule, ScheduleError

__all__ = ["RowReduction"]


def _row_depth(facts: list[BlockFacts]) -> int | None:
    reductions = [f for f in facts if not f.is_spatial]
    if not reductions:
        return None
    d = None
    for r in reductions:
        n = len(r.spatial)
        if r.spatial != list(range(n)) or len(r.stores) < 1:
            return None
        if any(tuple(s.indices) != r.iters[:n] for s in r.stores if len(s.indices) == n) or \
                any(len(s.indices) != n for s in r.stores):
            return None
        if d is None:
            d = n
        elif d != n:
            return None
    assert d is not None
    for r in reductions:
        if not all(_row_major(r, a, d) for a in r.loads):
            return None
    ref = reductions[0].extents[:d]
    red_bufs = {id(s.buffer) for r in reductions for s in r.stores}
    for f in facts:
        if len(f.iters) < d or any(k != 0 for k in f.kinds[:d]):
            return None
        if not all(structural_equal(a, b) for a, b in zip(f.extents[:d], ref)):
            return None
        for a in f.loads:
            if id(a.buffer) in red_bufs and tuple(a.indices) != f.iters[:d]:
                return None
    return d


def _row_major(r: BlockFacts, a, d: int) -> bool:  # noqa: ANN001
    """The load reads a row: the dimensions indexed by the row variables (those with an
    extent above 1) all come before the dimensions indexed by reduction variables (a
    matmul's ``B[k, j]`` does not; ``x[b, s, k]`` does)."""
    rows = [r.iters[i] for i in range(d) if r.extent(i) != 1]
    reds = [r.iters[i] for i in r.reduction]
    row_dims = [k for v in rows for k in a.dims_of(v)]
    red_dims = [k for v in reds for k in a.dims_of(v)]
    return not row_dims or not red_dims or max(row_dims) < min(red_dims)


class RowReduction(ScheduleRule):
    """Row-wise reductions and their consumers (see the module docstring)."""

    name = "RowReduction"

    def apply(self, func: PrimFunc, target: Target, tunable: bool) -> Schedule | None:
        if count_reductions(func) < 1:
            return None
        cpu = CPUInfo.of(target)
        sch = Schedule(func)
        inline_cheap_stages(sch)
        blocks = root_blocks(sch)
        if not blocks:
            return None
        facts = [block_facts(sch, b) for b in blocks]
        if any(f is None for f in facts):
            return None
        d = _row_depth(facts)  # type: ignore[arg-type]
        if d is None:
            return None
        out = facts[-1]
        # Reductions over a contiguous axis become per-lane partial reductions first (at the
        # root, where their loops are still one per variable) ...
        partial = {}
        for f in facts:
            if not f.is_spatial:
                rf = _rfactor(sch, f, cpu)
                if rf is not None:
                    partial[f.name] = rf
        # ... then every stage moves under the output's row loop.
        row_loops = list(out.loops[:d])
        row = row_loops[-1] if row_loops else None
        if row is not None:
            for block in reversed((root_blocks(sch) or [])[:-1]):
                sch.compute_at(block, row)
        # The row loops become one parallel loop (before any decompose_reduction: parallel
        # refuses a decomposed update under it), then inside the row (the blocks' innermost
        # loops still bind their innermost variables directly) the stages are vectorized.
        if row is not None:
            row = parallelize(sch, row_loops, _total_work(facts), cpu)
        for block in root_blocks(sch) if row is None else sch.get_child_blocks(row):
            name = sch.get(block).name_hint
            if name in partial.values():
                _vectorize_partial(sch, block, row)
            elif not sch.get(block).init and all(iv.iter_type == 0
                                                 for iv in sch.get(block).iter_vars):
                _vectorize_row(sch, block, row, cpu)
        return sch


def _total_work(facts: list[BlockFacts]) -> int | None:
    total = 0
    for f in facts:
        w = f.work()
        if w is None:
            return None
        total += w
    return total


def _loops_below(sch: Schedule, block: BlockRV, above: LoopRV | None) -> list[LoopRV]:
    loops = sch.get_loops(block)
    if above is None:
        return loops
    var = sch.get(above).loop_var
    k = next((i for i, lp in enumerate(loops) if sch.get(lp).loop_var is var), -1)
    return loops[k + 1:]


def _innermost(sch: Schedule, block: BlockRV, above: LoopRV | None
               ) -> tuple[list[LoopRV], BlockFacts | None]:
    """The block's loops below ``above`` and its facts when its innermost loop binds its
    innermost iteration variable directly (the row variables are bound to the row loops,
    which ``block_facts`` does not accept, so the check here is on the last one only)."""
    loops = _loops_below(sch, block, above)
    if not loops:
        return loops, None
    blk = sch.get(block)
    realize = block_realize(sch, block)
    if realize is None or realize.iter_values[-1] is not sch.get(loops[-1]).loop_var:
        return loops, None
    return loops, _facts_of(sch, block, blk, realize)


def _facts_of(sch: Schedule, block: BlockRV, blk, realize) -> BlockFacts:  # noqa: ANN001
    from workbench.dlight.analysis import _Accesses
    acc = _Accesses()
    acc.visit(blk.body)
    written = {id(s.buffer) for s in acc.stores}
    return BlockFacts(block, blk, tuple(iv.var for iv in blk.iter_vars),
                      tuple(iv.iter_type for iv in blk.iter_vars),
                      tuple(iv.dom.extent for iv in blk.iter_vars), (),
                      tuple(acc.stores), tuple(a for a in acc.loads
                                               if id(a.buffer) not in written))


def _vectorize_row(sch: Schedule, block: BlockRV, above: LoopRV | None, cpu: CPUInfo) -> None:
    loops, f = _innermost(sch, block, above)
    if f is None or not f.store.is_unit_stride(f.iters[-1]):
        return
    width = vector_tile(loop_extent(sch, loops[-1]), cpu.lanes(f.store.buffer.dtype))
    if width is None:
        return
    if width == loop_extent(sch, loops[-1]):
        sch.vectorize(loops[-1])
    else:
        sch.vectorize(sch.split(loops[-1], [None, width])[1])


def _rfactor(sch: Schedule, f: BlockFacts, cpu: CPUInfo) -> str | None:
    """Split the innermost reduction loop of ``f`` by the vector width and rfactor the lane
    loop into a trailing dimension of a partial-result buffer; returns the partial block's
    name, or None when the reduction is not over a contiguous axis the width divides, or the
    reducer is not one rfactor knows (layer norm's sum and sum of squares is; an argmax's is
    not)."""
    k = len(f.iters) - 1
    if f.kinds[k] != 2 or not all(a.is_unit_stride(f.iters[k]) for a in
                                  f.loads_depending(f.iters[k])):
        return None
    lanes = cpu.lanes(f.store.buffer.dtype)
    extent = f.extent(k)
    if extent is None or extent % lanes or extent < 2 * lanes:
        return None
    k_o, k_i = sch.split(f.loops[k], [None, lanes])
    try:
        rf = sch.rfactor(k_i, len(f.store.indices))
    except ScheduleError:
        # Undo nothing: the split alone is harmless (the loop stays serial).
        return None
    return sch.get(rf).name_hint


def _vectorize_partial(sch: Schedule, block: BlockRV, above: LoopRV | None) -> None:
    """The partial-reduction block under the row: lane loop innermost and vectorized, the
    init before the reduction loop (so the vector loop holds no condition)."""
    loops = _loops_below(sch, block, above)
    blk = sch.get(block)
    realize = block_realize(sch, block)
    if realize is None or len(loops) < 2:
        return
    var_of = {sch.get(lp).loop_var: lp for lp in loops}
    lane = None
    red_vars = set()
    for iv, value in zip(blk.iter_vars, realize.iter_values):
        if value in var_of:
            if iv.iter_type == 0:
                lane = var_of[value]
            else:
                red_vars.add(value)
    # every reduction loop (a reduction over several axes has several), in loop order: the
    # lane goes below all of them and the init above the outermost
    reds = [lp for lp in loops if sch.get(lp).loop_var in red_vars]
    if lane is None or not reds:
        return
    sch.reorder(*reds, lane)
    sch.vectorize(lane)      # before decompose_reduction (see tiling.py)
    init = sch.decompose_reduction(block, reds[0])
    init_loops = _loops_below(sch, init, above)
    if init_loops:
        sch.vectorize(init_loops[-1])


def schedule_reduction_rows(sch: Schedule, f: BlockFacts, cpu: CPUInfo) -> bool:
    """One reduction block on its own (no consumers moved in): the partial per-lane
    reduction computed under the block's row loop, the rows parallel. False when the block's
    spatial variables do not lead (nothing is changed then)."""
    d = len(f.spatial)
    if f.spatial != list(range(d)):
        return False
    rf = _rfactor(sch, f, cpu)
    loops = sch.get_loops(f.rv)
    # Rows parallel first: parallel refuses a decomposed update under it.
    row = parallelize(sch, loops[:d], f.work(), cpu) if d else None
    if rf is not None:
        rf_block = sch.get_sblock(rf)
        if row is not None:
            sch.compute_at(rf_block, row)
        _vectorize_partial(sch, rf_block, row)
    return True
