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
"""
from __future__ import annotations

from workbench.dlight.analysis import block_facts, param_buffers, root_blocks
from workbench.dlight.base import CPUInfo, ScheduleRule
from workbench.dlight.cpu.common import (
    inline_cheap_stages, parallelize_outer_spatial, schedule_spatial,
)
from workbench.dlight.cpu.matmul import plan_outer_product
from workbench.dlight.cpu.row_reduction import schedule_reduction_rows
from workbench.dlight.cpu.spatial_reduction import plan_spatial_reduction
from workbench.dlight.cpu.tiling import apply_tile_plan
from workbench.target import Target
from workbench.tir.function import PrimFunc
from workbench.tir.schedule import Schedule

__all__ = ["Chain"]


class Chain(ScheduleRule):
    """Multi-stage kernels, stage by stage (see the module docstring)."""

    name = "Chain"

    def apply(self, func: PrimFunc, target: Target, tunable: bool) -> Schedule | None:
        cpu = CPUInfo.of(target)
        sch = Schedule(func)
        if root_blocks(sch) is None:
            return None
        inline_cheap_stages(sch)
        params = frozenset(param_buffers(sch))
        for block in root_blocks(sch) or []:
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
                apply_tile_plan(sch, f, plan, None, cpu)
            elif not schedule_reduction_rows(sch, f, cpu):
                parallelize_outer_spatial(sch, block, cpu)
        return sch
