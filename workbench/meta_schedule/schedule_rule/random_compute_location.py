"""RandomComputeLocation: compute a standalone producer at a sampled loop of its consumer
(reference meta_schedule.md section 4.3 item 7)."""
from __future__ import annotations

from workbench.meta_schedule import analysis as A
from workbench.meta_schedule.schedule_rule.schedule_rule import (
    ScheduleRule, register_schedule_rule,
)
from workbench.tir.schedule import BlockRV, Schedule, ScheduleError
from workbench.tir.stmt import Block

PRODUCER_ANN = "meta_schedule.random_compute_producer"


@register_schedule_rule("random-compute-location")
class RandomComputeLocation(ScheduleRule):
    """``l = sample_compute_location(block); compute_at(block, l)`` for a block that is a
    direct child of the root, owns its outermost loop, is not tiled and has consumers."""

    def _applicable(self, sch: Schedule, block: BlockRV) -> bool:
        info = A.block_info(sch, block)
        if A.is_root(sch, block) or A.is_tiled(info.block):
            return False
        if not isinstance(info.scope_block, Block) or \
                info.scope_block.name_hint != A.root_block_name(sch.func_index()):
            return False
        loops = info.loops
        if not loops:
            return False
        from workbench.tir.analysis import realizes_under
        if len(realizes_under(loops[0].body)) != 1:
            return False
        return bool(A.consumers(sch, info.block.name_hint))

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not self._applicable(sch, block):
            return [sch]
        info = A.block_info(sch, block)
        producer = None
        if PRODUCER_ANN in info.block.annotations:
            # Fetch the producer first (as TVM: GetProducers, then Unannotate): if the block
            # itself gets inlined below, it can no longer lead us to its producer.
            prods = sch.get_producers(block)
            if len(prods) == 1:
                producer = prods[0]
            sch.unannotate(block, PRODUCER_ANN)
        for b in (block, producer):
            if b is None:
                continue
            try:
                loc = sch.sample_compute_location(b)
                sch.compute_at(b, loc, preserve_unit_loops=True, index=-1)
            except ScheduleError:
                pass
        return [sch]
