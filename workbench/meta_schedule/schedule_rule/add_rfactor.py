"""AddRFactor: expose parallelism in reductions whose spatial extent is small by factoring
the reduction (reference meta_schedule.md section 4.3 item 4; TVM's add_rfactor.cc).

For a qualifying block: reorder spatial loops first, fuse the reduction loops, split the
fused loop with ``sample_perfect_tile(n=2)``, and for each of the two pieces try
``rfactor(piece, factor_axis=#spatial loops)`` on a copy, annotating the (write-back) block
``meta_schedule.random_compute_producer = 1`` so RandomComputeLocation later places the rfactor
block. Output, in TVM's order: [rf on outer piece, rf on inner piece] (those rfactor accepts)
+ [the untouched original].
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from workbench.meta_schedule import analysis as A
from workbench.meta_schedule.schedule_rule.parallel_vectorize_unroll import _num_cores
from workbench.meta_schedule.schedule_rule.random_compute_location import PRODUCER_ANN
from workbench.meta_schedule.schedule_rule.schedule_rule import (
    ScheduleRule, register_schedule_rule,
)
from workbench.tir.schedule import BlockRV, LoopRV, Schedule, ScheduleError
from workbench.tir.stmt import IterType

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.tune_context import TuneContext


@register_schedule_rule("add-rfactor")
class AddRFactor(ScheduleRule):
    def __init__(self, max_jobs_per_core: int = 16, max_innermost_factor: int | None = None
                 ) -> None:
        self.max_jobs_per_core = max_jobs_per_core
        # TVM's Python default is None, meaning "no limit" (-1).
        self.max_innermost_factor = -1 if max_innermost_factor is None else \
            int(max_innermost_factor)
        self.max_parallel_extent = -1
        self.max_parallel_basic = -1

    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        cores = _num_cores(context)
        self.max_parallel_basic = cores
        if self.max_jobs_per_core != -1:
            self.max_parallel_extent = self.max_jobs_per_core * cores

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not A.needs_rfactor(sch, block, self.max_parallel_extent, self.max_parallel_basic):
            return [sch]
        original = sch.copy()
        original.seed(sch.fork_seed())
        fused, n_spatial = self._reorder_and_fuse(sch, block)
        factors = sch.sample_perfect_tile(fused, n=2,
                                          max_innermost_factor=self.max_innermost_factor)
        pieces = sch.split(fused, factors=factors)
        out: list[Schedule] = []
        for piece in pieces:
            tmp = sch.copy()
            tmp.seed(sch.fork_seed())
            try:
                tmp.rfactor(piece, n_spatial)
            except ScheduleError:
                continue  # rfactor refuses this piece (as TVM, the variant is dropped)
            tmp.annotate(block, PRODUCER_ANN, 1)
            out.append(tmp)
        out.append(original)
        return out

    @staticmethod
    def _reorder_and_fuse(sch: Schedule, block: BlockRV) -> tuple[LoopRV, int]:
        """TVM's ReorderAndFuseReductionLoops: spatial loops first (reorder only if the order
        changes), then fuse the reduction loops when there are several."""
        loops = sch.get_loops(block)
        types = A.loop_iter_types(A.block_info(sch, block).loops)
        spatial = [lp for lp, t in zip(loops, types) if t == IterType.DATA_PAR]
        reduce = [lp for lp, t in zip(loops, types) if t == IterType.COMM_REDUCE]
        order = spatial + reduce
        if any(a is not b for a, b in zip(order, loops)):
            sch.reorder(*order)
        fused = sch.fuse(*reduce) if len(reduce) > 1 else reduce[0]
        return fused, len(spatial)
