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

from dataclasses import dataclass, replace

from workbench.dlight.analysis import (
    Access, BlockFacts, block_facts, block_realize, calls_in, count_reductions, root_blocks,
)
from workbench.dlight.base import CPUInfo, ScheduleRule
from workbench.dlight.cpu.common import (
    inline_cheap_stages, loop_extent, schedule_spatial, vector_tile,
)
from workbench.dlight.cpu.tiling import TilePlan, apply_tile_plan
from workbench.dlight.cpu.variants import tile_variants
from workbench.target import Target
from workbench.tir.function import PrimFunc
from workbench.tir.expr import Call
from workbench.tir.functor import collect_vars, post_order_visit
from workbench.tir.schedule import BlockRV, Schedule, ScheduleError

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

    #: Pad per plane: a padding prologue read by the anchor is computed inside the parallel
    #: loop, one (batch, channel) plane at a time, instead of in a pass of its own over the
    #: whole tensor (rules whose tile reads a window of the padded input: depthwise conv,
    #: pooling).
    pad_per_plane = False

    def plan(self, sch: Schedule, anchor: BlockFacts, cpu: CPUInfo) -> TilePlan | None:
        raise NotImplementedError

    def apply(self, func: PrimFunc, target: Target, tunable: bool) -> Schedule | None:
        scheds = self.variants(func, target, 1)
        return scheds[0] if scheds else None

    def variants(self, func: PrimFunc, target: Target, limit: int) -> list[Schedule]:
        """The rule's schedule of ``func`` first, then up to ``limit - 1`` schedules with the
        neighbouring register tiles of :func:`~workbench.dlight.cpu.variants.tile_variants`
        (each a fresh schedule of ``func``, traced; a neighbour a primitive refuses is left
        out). Empty when the rule does not fit ``func``."""
        if count_reductions(func) != 1:
            return []
        cpu = CPUInfo.of(target)
        sch = Schedule(func)
        inline_cheap_stages(sch)
        shape = match_anchor(sch)
        if shape is None:
            return []
        plan = self.plan(sch, shape.anchor, cpu)
        if plan is None:
            return []
        plans = tile_variants(plan, shape.anchor, cpu, limit) if limit > 1 else [plan]
        out = [self._schedule(sch, shape, plan, cpu)]
        for other in plans[1:]:
            # the same steps on a fresh schedule find the same blocks (deterministic)
            sch = Schedule(func)
            inline_cheap_stages(sch)
            shape = match_anchor(sch)
            # the plan's accesses must be this schedule's: plan again, then resize the tile
            base = self.plan(sch, shape.anchor, cpu)
            try:
                out.append(self._schedule(sch, shape, replace(base, V=other.V, U=other.U,
                                                              W=other.W), cpu))
            except ScheduleError:
                continue
        return out

    def _schedule(self, sch: Schedule, shape: AnchorShape, plan: TilePlan, cpu: CPUInfo
                  ) -> Schedule:
        pad = _plane_padding(sch, shape, cpu) if self.pad_per_plane else None
        if pad is not None:
            plan = replace(plan, plane=pad[1])
        for block in shape.prologue:
            if pad is None or block is not pad[0]:
                schedule_spatial(sch, block, cpu)
        parallel = apply_tile_plan(sch, shape.anchor, plan, shape.epilogue, cpu)
        if pad is not None:
            try:
                if parallel is None:
                    raise ScheduleError("no parallel loop to pad under")
                sch.compute_at(pad[0], parallel)
            except ScheduleError:
                schedule_spatial(sch, pad[0], cpu)
            else:
                _vectorize_plane(sch, pad[0], cpu)
        return sch


def _vectorize_plane(sch: Schedule, block: BlockRV, cpu: CPUInfo) -> None:
    """Vectorize the innermost loop of a padding stage computed under the parallel loop,
    when it binds the stage's last index and the padding's condition does not involve it (a
    blocked plane's channel block, NCHW16c: one 16-lane copy per pixel instead of 16 scalar
    selects). A plane padded along its innermost axis (NCHW's rows) is left to LLVM: a vector
    load there would read past the row's ends, masked or not."""
    loops = sch.get_loops(block)
    realize = block_realize(sch, block)
    blk = sch.get(block)
    if not loops or realize is None or \
            realize.iter_values[-1] is not sch.get(loops[-1]).loop_var:
        return
    lane = blk.iter_vars[-1].var
    guards: list = []
    post_order_visit(blk.body, lambda n: guards.append(n.args[0]) if isinstance(n, Call)
                     and getattr(n.op, "name", n.op) in ("if_then_else", "tir.if_then_else")
                     else None)
    if any(lane in collect_vars(g) for g in guards):
        return
    extent = loop_extent(sch, loops[-1])
    width = vector_tile(extent, cpu.lanes(sch.get(block).writes[0].buffer.dtype))
    if width is None:
        return
    sch.vectorize(loops[-1] if width == extent else sch.split(loops[-1], [None, width])[1])


def _plane_padding(sch: Schedule, shape: AnchorShape, cpu: CPUInfo
                   ) -> tuple[BlockRV, Access] | None:
    """The padding prologue the anchor alone reads (a stage with ``if_then_else``), and the
    anchor's load of it, when the planes it indexes directly (batch x channel) are enough
    parallel work: ``(block, access)``; else None."""
    anchor = shape.anchor
    for block in shape.prologue:
        if "if_then_else" not in calls_in(sch.get(block)):
            continue
        written = sch.get(block).writes
        consumers = sch.get_consumers(block)
        if len(written) != 1 or len(consumers) != 1 or \
                sch.get(consumers[0]) is not sch.get(anchor.rv):
            continue
        loads = [a for a in anchor.loads if a.buffer is written[0].buffer]
        if len(loads) != 1:
            continue
        # The leading dimensions are indexed by spatial variables of their own (NCHW: batch,
        # channel), the others by windows: each iteration of those variables pads one plane.
        # (NHWC's channel is last, after the windows: each plane would be a column, and the
        # planes are too few -- the batch -- so the prologue keeps its own pass.)
        plain = {loads[0].plain_dim(anchor.iters[i]): i for i in anchor.spatial}
        lead = 0
        while lead in plain:
            lead += 1
        # (a blocked layout's channel block, innermost, belongs to the plane: NCHW16c)
        last = len(loads[0].indices) - 1
        if lead == 0 or any(d is not None and d >= lead and d != last for d in plain):
            continue
        planes = 1
        for d in range(lead):
            planes *= anchor.extent(plain[d]) or 0
        # A blocked plane holds a whole channel block: fewer of them balance (6 planes of a
        # 96-channel stride-2 depthwise convolution over 2 threads: 3 each).
        blocked = last in plain and last >= lead
        if planes >= (2 if blocked else 4) * cpu.threads:
            return block, loads[0]
    return None
