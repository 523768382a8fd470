"""InlineConstantScalars: inline blocks that only write a constant 0-d buffer (e.g. relax's
``compile_engine_const``) into their consumers (reference meta_schedule.md section 4.3 item 2).
Output: exactly one schedule."""
from __future__ import annotations

from workbench.meta_schedule import analysis as A
from workbench.meta_schedule.schedule_rule.schedule_rule import (
    ScheduleRule, register_schedule_rule,
)
from workbench.tir.schedule import BlockRV, Schedule


@register_schedule_rule("inline-constant-scalars")
class InlineConstantScalars(ScheduleRule):
    """No reads, one write to a 0-d buffer, not an output block -> ``compute_inline``.
    As in TVM a refusal of the primitive propagates (such a block is always inlinable)."""

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if A.is_root(sch, block):
            return [sch]
        blk = A.block_info(sch, block).block
        if not blk.reads and len(blk.writes) == 1 and len(blk.writes[0].buffer.shape) == 0 \
                and not A.is_output(sch, blk.name_hint):
            sch.compute_inline(block)
        return [sch]
