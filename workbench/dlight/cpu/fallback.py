"""``Fallback``: the rule that fits every kernel the others do not -- it only parallelizes
and vectorizes, so it is safe whatever the kernel computes.

Each block directly under the root is left where it is: a data-parallel block gets
:func:`~workbench.dlight.cpu.common.schedule_spatial` (vectorized innermost loop when the
store is contiguous in it, parallel outer loops); any other block gets its outermost loops
that bind only data-parallel variables fused into one parallel loop. Nothing is inlined,
reordered across reductions or cached. Functions whose blocks nest inside other blocks are
left unscheduled (None).
"""
from __future__ import annotations

from workbench.dlight.analysis import root_blocks
from workbench.dlight.base import CPUInfo, ScheduleRule
from workbench.dlight.cpu.common import parallelize_outer_spatial, schedule_spatial
from workbench.target import Target
from workbench.tir.function import PrimFunc
from workbench.tir.schedule import Schedule

__all__ = ["Fallback"]


class Fallback(ScheduleRule):
    """Parallel outer loops and vectorized inner loops only (see the module docstring)."""

    name = "Fallback"

    def apply(self, func: PrimFunc, target: Target, tunable: bool) -> Schedule | None:
        cpu = CPUInfo.of(target)
        sch = Schedule(func)
        blocks = root_blocks(sch)
        if blocks is None:
            return None
        for b in blocks:
            if sch.get(b).init is None and all(iv.iter_type == 0 for iv in sch.get(b).iter_vars):
                schedule_spatial(sch, b, cpu)
            else:
                parallelize_outer_spatial(sch, b, cpu)
        return sch
