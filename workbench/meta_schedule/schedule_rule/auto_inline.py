"""AutoInline: inline elementwise producers into their consumers (TVM's decision procedure,
reference meta_schedule.md section 4.3 item 3). Output: exactly one schedule."""
from __future__ import annotations

from typing import Sequence

from workbench.meta_schedule import analysis as A
from workbench.meta_schedule.schedule_rule.schedule_rule import (
    ScheduleRule, register_schedule_rule,
)
from workbench.tir.schedule import BlockRV, Schedule, ScheduleError


@register_schedule_rule("auto-inline")
class AutoInline(ScheduleRule):
    """Inline a block into its consumers when TVM's AutoInline would.

    ``into_producer`` (reverse inlining) is accepted for API compatibility but, as on TVM's
    CPU defaults, not used by the llvm rule list.
    """

    def __init__(self, into_producer: bool = False, into_consumer: bool = True,
                 inline_const_tensor: bool = True, disallow_if_then_else: bool = True,
                 require_injective: bool = True, require_ordered: bool = True,
                 disallow_op: Sequence[str] | None = ("tir.exp",)) -> None:
        self.into_producer = into_producer
        self.into_consumer = into_consumer
        self.inline_const_tensor = inline_const_tensor
        self.disallow_if_then_else = disallow_if_then_else
        self.require_injective = require_injective
        self.require_ordered = require_ordered
        # Kept as given (TVM's names, e.g. "tir.exp"); matched by the name after the last dot.
        self.disallow_op = list(disallow_op or ())

    def _should_inline(self, sch: Schedule, block: BlockRV) -> bool:
        info = A.block_info(sch, block)
        name = info.block.name_hint
        index = sch.func_index()
        if A.is_root(sch, block) or info.scope_block is None:
            return False
        if len(info.block.writes) != 1:
            return False
        if not info.block.reads:  # a constant tensor
            return self.inline_const_tensor and bool(A.consumers(sch, name)) \
                and not A.is_output(sch, name)
        if not A.func_is_all_spatial(index):
            # These checks only matter next to reductions: inlining there must not duplicate
            # expensive or branchy work inside the hot loop (TVM's reasoning).
            if self.disallow_op and A.calls_op(info.block.body,
                                                  [op.split(".")[-1] for op in self.disallow_op]):
                return False
            if self.disallow_if_then_else and A.has_if_then_else(info.block.body):
                return False
            if (self.require_injective or self.require_ordered) and \
                    not A.is_injective_ordered(info.block):
                return False
        if info.block.annotations.get("meta_schedule.inline_rule") == "disable":
            return False
        return self.into_consumer and bool(A.consumers(sch, name)) and \
            not A.is_output(sch, name)

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if self._should_inline(sch, block):
            try:
                sch.compute_inline(block)
            except ScheduleError:
                pass  # the primitive refused (left unchanged): keep the block
        return [sch]
