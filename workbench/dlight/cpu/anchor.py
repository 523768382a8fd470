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
    inline_cheap_stages, inline_while, loop_extent, schedule_spatial, vector_tile,
)
from workbench.dlight.cpu.tiling import TilePlan, apply_tile_plan
from workbench.dlight.cpu.variants import tile_variants
from workbench.target import Target
from workbench.tir.function import PrimFunc
from workbench.tir.expr import BufferLoad, Call, IntImm, Mul
from workbench.tir.functor import collect_vars, post_order_visit
from workbench.tir.schedule import BlockRV, Schedule, ScheduleError
from workbench.tir.stmt import BufferStore

__all__ = ["AnchorRule", "AnchorShape", "inline_lane_free_padding", "match_anchor"]


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

    #: Read the padding in the tile: a padding prologue whose guard does not involve its
    #: innermost index (the channel block of a blocked layout, NCHW16c / NCHW8c: the vector
    #: lane) is inlined into the anchor (:func:`inline_lane_free_padding`), so the tile loads
    #: the input itself behind one scalar, well-predicted guard per tap and no padded copy is
    #: written and read back. Where the guard involves the lane (NCHW's rows), the padded
    #: plane stays (``pad_per_plane``): a vector load there would read past a row's ends.
    inline_padding = False

    def plan(self, sch: Schedule, anchor: BlockFacts, cpu: CPUInfo) -> TilePlan | None:
        raise NotImplementedError

    def padding_policy(self, cpu: CPUInfo) -> bool | str:
        """:attr:`inline_padding` for ``cpu``; a rule may decide by the target, and return
        ``"strided"``: only where the anchor reads the padding through a strided window."""
        return self.inline_padding

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
        sch = self._prepared(func, target)
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
            sch = self._prepared(func, target)
            shape = match_anchor(sch)
            # the plan's accesses must be this schedule's: plan again, then resize the tile
            base = self.plan(sch, shape.anchor, cpu)
            try:
                out.append(self._schedule(sch, shape, replace(base, V=other.V, U=other.U,
                                                              W=other.W), cpu))
            except ScheduleError:
                continue
        return out

    def _prepared(self, func: PrimFunc, target: Target) -> Schedule:
        sch = Schedule(func)
        inline_cheap_stages(sch)
        cpu = CPUInfo.of(target)
        policy = self.padding_policy(cpu)
        if policy:
            inline_lane_free_padding(sch, cpu, strided_only=policy == "strided")
        return sch

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


def inline_lane_free_padding(sch: Schedule, cpu: CPUInfo, strided_only: bool = False) -> None:
    """Inline each padding stage (a data-parallel block with ``if_then_else``) whose one
    consumer is a reduction, whose innermost index is a channel block of at most one vector
    (NCHW16c / NCHW8c) and whose guard does not involve that index. The guard is then a
    scalar per vector of the consumer, and only the taken side of it is evaluated (the
    renderer branches on a scalar ``if_then_else``), so no load reads out of bounds.
    (Channels-last inputs are left padded: their tiles span several vectors, and an inlined
    guard made NHWC depthwise convolutions of 48-144 channels 3-7x slower on a Zen 4.)
    ``strided_only``: only paddings the consumer reads through a strided window (on every
    target; without it, with 16 or more vector registers any window)."""
    def lane_free_padding(block: BlockRV) -> bool:
        blk = sch.get(block)
        if "if_then_else" not in calls_in(blk) or blk.init is not None or \
                any(iv.iter_type != 0 for iv in blk.iter_vars) or \
                not isinstance(blk.body, BufferStore) or not blk.iter_vars:
            return False
        lane = blk.iter_vars[-1].var
        store = blk.body
        if store.indices[-1] is not lane or not _one_vector_block(store.buffer, cpu) or \
                any(lane in collect_vars(g) for g in _guards(blk)):
            return False
        consumers = sch.get_consumers(block)
        if len(consumers) != 1 or \
                all(iv.iter_type == 0 for iv in sch.get(consumers[0]).iter_vars):
            return False
        strided = _strided_window(sch.get(consumers[0]), store.buffer)
        return strided or (cpu.accumulators >= 16 and not strided_only)
    inline_while(sch, lane_free_padding)


def _strided_window(consumer: object, buf: object) -> bool:
    """Whether ``consumer`` reads ``buf`` with a window stride (an index scaled by a constant
    of 2 or more; a dilation counts too, unmeasured). With 16 vector registers (AVX2) only
    strided windows read the padding in the tile: measured with Haswell code on a Zen 4, the
    strided ones ran 1.2-2.4x faster, the stride-1 ones anywhere from 4x faster to 2x slower
    (MobileNet's 32x112^2 and 144x56^2 1.2x slower, a 5x5 one 2x; a register tile of 4 or 2
    pixels instead of 8 did not mend it)."""
    found: list = []

    def visit(node: object) -> None:
        if isinstance(node, BufferLoad) and node.buffer is buf:
            post_order_visit(node, lambda e: found.append(e) if isinstance(e, Mul) and any(
                isinstance(x, IntImm) and x.value >= 2 for x in (e.a, e.b)) else None)
    post_order_visit(consumer.body, visit)
    return bool(found)


def _one_vector_block(buf: object, cpu: CPUInfo) -> bool:
    """A blocked layout's buffer: more than four dimensions, the innermost a constant channel
    block of at most one vector."""
    last = buf.shape[-1] if len(buf.shape) > 4 else None
    return isinstance(last, IntImm) and last.value <= cpu.lanes(buf.dtype)


def _guards(blk: object) -> list:
    """The conditions of the ``if_then_else`` calls in a block's body."""
    guards: list = []
    post_order_visit(blk.body, lambda n: guards.append(n.args[0]) if isinstance(n, Call)
                     and getattr(n.op, "name", n.op) in ("if_then_else", "tir.if_then_else")
                     else None)
    return guards


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
    if any(lane in collect_vars(g) for g in _guards(blk)):
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
