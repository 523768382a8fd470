"""``Chain``: kernels made of several stages that no single-anchor rule fits -- fused
attention (two products, a masked row max, exponentials, a row sum), a softmax along a
leading axis -- scheduled stage by stage.

After inlining, each block under the root gets the best tactic for its own structure, in
program order, without moving stages into one another: an outer-product reduction is
register-tiled (as :class:`~workbench.dlight.cpu.Matmul` does), a reduction vectorizable along
its output is tiled as :class:`~workbench.dlight.cpu.SpatialReduction` does, a reduction
over a trailing contiguous axis gets per-lane partial results (``rfactor``) and parallel rows,
a data-parallel block is vectorized and parallel, and anything else gets its outer spatial
loops parallel. Each stage runs over all of its data before the next one starts.

Its variants (what the tuner measures before its search) resize the register tile of the
stage with the most work -- a staged Winograd convolution's alpha^2 products, an attention's
larger product -- to its neighbours (:func:`~workbench.dlight.cpu.variants.tile_variants`);
the other stages keep the rule's choice. Without them, a staged Winograd kernel (ResNet-18's
28x28, 14x14 and 7x7 stages: half of its time on a Zen 3) had nothing for the tuner to
start from but its generic search, which rarely finds the rule's kernel again.
"""
from __future__ import annotations

from dataclasses import replace

from workbench.dlight.analysis import BlockFacts, block_facts, param_buffers, root_blocks
from workbench.dlight.base import CPUInfo, ScheduleRule
from workbench.dlight.cpu.common import (
    inline_cheap_stages, parallelize_outer_spatial, schedule_spatial,
)
from workbench.dlight.cpu.matmul import plan_outer_product
from workbench.dlight.cpu.row_reduction import schedule_reduction_rows
from workbench.dlight.cpu.spatial_reduction import plan_spatial_reduction
from workbench.dlight.cpu.tiling import TilePlan, apply_tile_plan
from workbench.dlight.cpu.variants import tile_variants
from workbench.target import Target
from workbench.tir.function import PrimFunc
from workbench.tir.schedule import Schedule, ScheduleError

__all__ = ["Chain"]


class Chain(ScheduleRule):
    """Multi-stage kernels, stage by stage (see the module docstring)."""

    name = "Chain"

    def apply(self, func: PrimFunc, target: Target, tunable: bool) -> Schedule | None:
        return self._schedule(func, CPUInfo.of(target), None)[0]

    def variants(self, func: PrimFunc, target: Target, limit: int) -> list[Schedule]:
        """The rule's schedule first, then up to ``limit - 1`` with the neighbouring register
        tiles of its stage with the most work (each a fresh schedule of ``func``; one a
        primitive refuses is left out). Empty when the rule does not fit ``func``."""
        cpu = CPUInfo.of(target)
        sch, plans = self._schedule(func, cpu, None)
        if sch is None:
            return []
        out = [sch]
        work = {i: w for i, (_, f) in plans.items() if (w := f.work())}
        if limit <= 1 or not work:
            return out
        stage = max(work, key=work.__getitem__)
        plan, facts = plans[stage]
        for other in tile_variants(plan, facts, cpu, limit)[1:]:
            try:
                out.append(self._schedule(func, cpu, (stage, other))[0])
            except ScheduleError:
                continue
        return out

    @staticmethod
    def _schedule(func: PrimFunc, cpu: CPUInfo, resize: tuple[int, TilePlan] | None
                  ) -> tuple[Schedule | None, dict[int, tuple[TilePlan, BlockFacts]]]:
        """``func`` scheduled stage by stage, and the tile plan of each register-tiled stage
        (by its position under the root, with its block facts); ``resize`` = (position,
        plan) gives that stage the plan's register tile instead of the rule's. ``(None, {})``
        when ``func`` has no root blocks."""
        sch = Schedule(func)
        if root_blocks(sch) is None:
            return None, {}
        inline_cheap_stages(sch)
        params = frozenset(param_buffers(sch))
        plans: dict[int, tuple[TilePlan, BlockFacts]] = {}
        for i, block in enumerate(root_blocks(sch) or []):
            f = block_facts(sch, block)
            if f is None:
                parallelize_outer_spatial(sch, block, cpu)
                continue
            if f.is_spatial:
                schedule_spatial(sch, block, cpu)
                continue
            plan = None
            if len(f.stores) == 1:
                plan = plan_outer_product(f, cpu, params) or plan_spatial_reduction(f, cpu)
            if plan is not None:
                plans[i] = (plan, f)
                if resize is not None and resize[0] == i:
                    # the plan's accesses are this schedule's: only the tile sizes change
                    new = resize[1]
                    plan = replace(plan, V=new.V, U=new.U, W=new.W)
                apply_tile_plan(sch, f, plan, None, cpu)
            elif not schedule_reduction_rows(sch, f, cpu):
                parallelize_outer_spatial(sch, block, cpu)
        return sch, plans
