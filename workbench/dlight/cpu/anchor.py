"""The "one reduction and its elementwise epilogue" shape that the tiling rules match.

After :func:`~workbench.dlight.cpu.common.inline_cheap_stages`, a fused matmul / conv2d /
pooling kernel is: data-parallel *prologue* stages (padding, a transpose that could not be
inlined), one reduction block (the *anchor*), and at most one data-parallel *epilogue*
consuming it (bias + activation folded into one block by the inlining).
"""
from __future__ import annotations

from dataclasses import dataclass

from workbench.dlight.analysis import BlockFacts, block_facts, root_blocks
from workbench.tir.schedule import BlockRV, Schedule

__all__ = ["AnchorShape", "match_anchor"]


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
