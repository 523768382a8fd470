"""``Winograd``: the default schedule of a Winograd convolution
(:mod:`workbench.topi.nn.conv2d_winograd`) whose transformed weight fits the L2 cache, run
tile group by tile group.

Stage by stage (:class:`~workbench.dlight.cpu.Chain`) the kernel makes seven passes, each a
parallel loop of its own, over buffers of 1-2 MB: the padding, the input transform's two
stages, the alpha^2 products, the output transform's two stages and the epilogue. On ResNet's
56x56 stage (64 channels) one core took 777 us, about 240 of them in the products; the rest
went to moving the intermediates through the last-level cache. Here one parallel loop runs
over groups of U tiles (the product's register tile along the tiles) and, for each group,
transforms its input tiles, multiplies them by every (xi, nu) slice of the weight (a tile of
W output-channel blocks x U tiles accumulating over the input channels, as
:class:`~workbench.dlight.cpu.Matmul` tiles it) and transforms the products back: a group's
intermediates stay in L1 and L2. Each group reads the whole transformed weight, so only a
weight of at most :data:`FUSE_MAX_WEIGHT_BYTES` (L2-resident) is scheduled this way; a larger
one (ResNet's 28x28 and 14x14 stages) goes stage by stage, where each weight slice is read
once. The padding before and the gather into the output (with the fused epilogue) after stay
spatial stages of their own.
"""
from __future__ import annotations

from workbench.dlight.analysis import root_blocks
from workbench.dlight.base import CPUInfo, ScheduleRule
from workbench.dlight.cpu.chain import Chain
from workbench.dlight.cpu.common import inline_cheap_stages, loop_extent, schedule_spatial
from workbench.dlight.cpu.matmul import MAX_U
from workbench.dlight.cpu.tiling import blocked_accumulator_budget, block_tile
from workbench.dlight.cpu.variants import swapped_then_nearest_key
from workbench.ir import dtype as dt
from workbench.target import Target
from workbench.tir.function import PrimFunc
from workbench.tir.schedule import Schedule, ScheduleError

__all__ = ["Winograd", "FUSE_MAX_WEIGHT_BYTES"]

#: The kernel's stages (the names :func:`~workbench.topi.nn.conv2d_winograd_nchwc` gives them):
#: the input transform's two, the product, the output transform's two.
INPUT_STAGES = ("data_pack_rows", "data_pack")
PRODUCT = "bgemm"
OUTPUT_STAGES = ("inverse_rows", "inverse")
#: A transformed weight above this size is not read once per group of tiles (see the module
#: docstring). Default schedules on a 2-core Sapphire Rapids, in turns, warm / with the weight
#: flushed: ResNet-18's 56x56 kernels (64 channels, 590 KB) ran 0.82-0.85x / 0.84-0.93x the
#: time stage by stage, the model 0.97x end to end (ResNet-50 0.99x); its 28x28 ones
#: (2.4 MB) 1.47-1.56x / 1.35-1.40x, 14x14 (4.2 MB) 1.59-1.64x, 7x7 (16.8 MB) 1.50-1.70x.
FUSE_MAX_WEIGHT_BYTES = 1 << 20


class Winograd(ScheduleRule):
    """A Winograd convolution with an L2-sized weight, tile group by tile group (see the module
    docstring); None for anything else."""

    name = "Winograd"

    def apply(self, func: PrimFunc, target: Target, tunable: bool) -> Schedule | None:
        fit = self._fit(func, target)
        return None if fit is None else self._tiled(fit, *self._rule_tile(fit))

    def variants(self, func: PrimFunc, target: Target, limit: int) -> list[Schedule]:
        """The rule's schedule of ``func`` first, then the kernel stage by stage
        (:class:`~workbench.dlight.cpu.Chain`'s schedule: on a 2-core Zen 3 ResNet-18's 56x56
        kernels ran 0.92-0.94x the time of tile groups that way, in turns, where Sapphire
        Rapids ran them 1.2x slower), then up to ``limit - 2`` with other register tiles of
        the products (W output-channel blocks dividing theirs, U >= 2 tiles, within the
        accumulator budget; W and U swapped first, then nearest first): what the tuner
        measures before its search (:func:`workbench.dlight.default_schedule_variants`).
        Empty when the rule does not fit ``func``."""
        fit = self._fit(func, target)
        if fit is None:
            return []
        _, cpu, _, out_blocks, tiles = fit
        budget = blocked_accumulator_budget(cpu)
        W0, U0 = self._rule_tile(fit)
        others = sorted(((W, U) for W in (1, 2, 4) if out_blocks % W == 0
                         for U in range(2, min(MAX_U, tiles) + 1)
                         if W * U <= budget and (W, U) != (W0, U0)),
                        key=lambda t: swapped_then_nearest_key(t, (W0, U0)))
        rule = self._tiled(fit, W0, U0)
        # second, the kernel stage by stage: which way is faster depends on the host
        staged = Chain().apply(func, target, False) if limit > 1 else None
        out = [s for s in (rule, staged) if s is not None]
        for W, U in others:
            if len(out) >= limit:
                break
            # each tile on a fresh schedule of func (the same steps find the same blocks)
            sch = self._tiled(self._fit(func, target), W, U)
            if sch is not None:
                out.append(sch)
        return out[:limit]

    @staticmethod
    def _rule_tile(fit: tuple) -> tuple[int, int]:
        """The rule's ``(W, U)``: the most FMAs per loaded value within the budget."""
        _, cpu, _, out_blocks, tiles = fit
        return block_tile(out_blocks, tiles, blocked_accumulator_budget(cpu), MAX_U)

    @classmethod
    def _tiled(cls, fit: tuple, W: int, U: int) -> Schedule | None:
        """``fit``'s schedule with a W x U register tile; None if a primitive refuses it."""
        sch, cpu, loops, _, _ = fit
        try:
            cls._schedule(sch, cpu, loops, W, U)
        except ScheduleError:
            return None
        return sch

    @staticmethod
    def _fit(func: PrimFunc, target: Target) -> tuple | None:
        """``(schedule, cpu, product loops, output-channel blocks, tiles)`` of a Winograd
        kernel this rule takes (its stages present, static extents, a weight within
        :data:`FUSE_MAX_WEIGHT_BYTES`); None otherwise."""
        sch = Schedule(func)
        blocks = root_blocks(sch)
        names = {sch.get(b).name_hint for b in blocks or []}
        if not names.issuperset((*INPUT_STAGES, PRODUCT, *OUTPUT_STAGES)):
            return None
        cpu = CPUInfo.of(target)
        product = sch.get_sblock(PRODUCT)
        loops = sch.get_loops(product)
        extents = [loop_extent(sch, lp) for lp in loops]
        if len(loops) != 7 or any(e is None for e in extents):
            return None
        alpha, _, tiles, out_blocks, lanes, in_blocks, block = extents
        store = sch.get(product).writes[0].buffer
        nbytes = dt.parse(store.dtype).bits // 8
        if lanes != cpu.lanes(store.dtype) or \
                alpha * alpha * out_blocks * in_blocks * block * lanes * nbytes > \
                FUSE_MAX_WEIGHT_BYTES:
            return None
        return sch, cpu, loops, out_blocks, tiles

    @staticmethod
    def _schedule(sch: Schedule, cpu: CPUInfo, loops: list, W: int, U: int) -> None:
        """Groups of ``U`` tiles, a register tile of ``W`` output-channel blocks x ``U``."""
        xi, nu, p, o, lane, rc, ri = loops
        p_o, p_i = sch.split(p, [None, U])
        o_o, o_i = sch.split(o, [None, W])
        sch.reorder(p_o, xi, nu, o_o, rc, ri, o_i, p_i, lane)
        if cpu.threads > 1:
            sch.parallel(p_o)
        sch.vectorize(lane)
        sch.unroll(o_i)
        sch.unroll(p_i)
        # Vectorize before decompose_reduction: the update block it leaves is not a
        # reduction block any more (see tiling.apply_tile_plan).
        sch.decompose_reduction(sch.get_sblock(PRODUCT), rc)
        # The input transform of the group's tiles before its products (the second stage
        # first: compute_at places each producer ahead of what reads it), the output
        # transform after them.
        for name in reversed(INPUT_STAGES):
            sch.compute_at(sch.get_sblock(name), p_o)
        for name in OUTPUT_STAGES:
            sch.reverse_compute_at(sch.get_sblock(name), p_o)
        # Each transform stage: its loops under the group are (alpha or m, alpha, tile,
        # channel block, lane, reduction over alpha), and its coefficient depends on the
        # reduction and on the first alpha loop (rows) or the second (columns). Tile and
        # channel block outermost, then the other alpha loop, then the coefficient's two
        # loops unrolled (their selects fold to constants), lanes innermost. Unrolling the
        # third loop too made the kernel six times the code: 8.5 s to build against 2.
        for name, axis in zip((*INPUT_STAGES, *OUTPUT_STAGES), (0, 1, 0, 1)):
            a0, a1, tile, chan, lanes, r = sch.get_loops(sch.get_sblock(name))[1:]
            coef, other = (a0, a1) if axis == 0 else (a1, a0)
            sch.reorder(tile, chan, other, coef, r, lanes)
            sch.unroll(coef)
            sch.unroll(r)
            sch.vectorize(lanes)
        # The padding before and the gather (with the fused epilogue) after: spatial stages.
        inline_cheap_stages(sch)
        staged = {*INPUT_STAGES, PRODUCT + "_init", PRODUCT + "_update", *OUTPUT_STAGES}
        for block in root_blocks(sch) or []:
            if sch.get(block).name_hint not in staged:
                schedule_spatial(sch, block, cpu)
