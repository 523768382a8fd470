"""The "one reduction and its elementwise epilogue" shape that the tiling rules match.

After :func:`~workbench.dlight.cpu.common.inline_cheap_stages`, a fused matmul / conv2d /
pooling kernel is: data-parallel *prologue* stages (padding, a transpose that could not be
inlined), one reduction block (the *anchor*), and at most one data-parallel *epilogue*
consuming it (bias + activation folded into one block by the inlining).

:class:`AnchorRule` is the ``apply`` of the rules that register-tile that anchor
(:class:`~workbench.dlight.cpu.Matmul`, :class:`~workbench.dlight.cpu.SpatialReduction`); they
differ only in how they plan the tile.
"""
from __future__ import annotations

from dataclasses import dataclass

from workbench.dlight.analysis import BlockFacts, block_facts, count_reductions, root_blocks
from workbench.dlight.base import CPUInfo, ScheduleRule
from workbench.dlight.cpu.common import inline_cheap_stages, schedule_spatial
from workbench.dlight.cpu.tiling import TilePlan, apply_tile_plan
from workbench.target import Target
from workbench.tir.function import PrimFunc
from workbench.tir.schedule import BlockRV, Schedule

__all__ = ["AnchorRule", "AnchorShape", "match_anchor"]


@dataclass
class AnchorShape:
    prologue: list[BlockRV]
    anchor: BlockFacts
    epilogue: BlockRV | None


def match_anchor(sch: Schedule) -> AnchorShape | None:
    blocks = root_blocks(sch)
    if not blocks:
        return None
    facts = [block_facts(sch, b) for b in blocks]
    reductions = [k for k, f in enumerate(facts) if f is None or not f.is_spatial]
    if len(reductions) != 1:
        return None
    k = reductions[0]
    anchor = facts[k]
    if anchor is None or len(anchor.stores) != 1:
        return None
    if any(a.buffer is anchor.store.buffer for a in anchor.loads):
        return None
    after = blocks[k + 1:]
    if len(after) > 1:
        return None
    epilogue = None
    if after:
        ep = facts[k + 1]
        if ep is None or not any(a.buffer is anchor.store.buffer for a in ep.loads):
            return None
        consumers = sch.get_consumers(anchor.rv)
        if len(consumers) != 1:
            return None
        epilogue = after[0]
    return AnchorShape(list(blocks[:k]), anchor, epilogue)


class AnchorRule(ScheduleRule):
    """A rule that register-tiles the one reduction of a kernel: after inlining the cheap
    stages and matching :class:`AnchorShape`, :meth:`plan` picks the tile; the prologue stages
    are scheduled on their own and the epilogue is fused under the tile. None when the kernel
    has not exactly one reduction, does not have the shape, or :meth:`plan` finds no tile."""

    def plan(self, sch: Schedule, anchor: BlockFacts, cpu: CPUInfo) -> TilePlan | None:
        raise NotImplementedError

    def apply(self, func: PrimFunc, target: Target, tunable: bool) -> Schedule | None:
        if count_reductions(func) != 1:
            return None
        cpu = CPUInfo.of(target)
        sch = Schedule(func)
        inline_cheap_stages(sch)
        shape = match_anchor(sch)
        if shape is None:
            return None
        plan = self.plan(sch, shape.anchor, cpu)
        if plan is None:
            return None
        for block in shape.prologue:
            schedule_spatial(sch, block, cpu)
        apply_tile_plan(sch, shape.anchor, plan, shape.epilogue, cpu)
        return sch
