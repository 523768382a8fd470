"""``Injective``: kernels whose every block is data-parallel -- elementwise and broadcast
arithmetic, casts, transposes, reshapes, concatenation, gathers (``take``), padding.

After inlining, each remaining block gets the data-parallel schedule of
:func:`~workbench.dlight.cpu.common.schedule_spatial`: its innermost loop vectorized when
the store is contiguous in it, transposed loads read in square tiles, and the outer loops
fused into one parallel loop when the block is large enough to pay for the threads.
"""
from __future__ import annotations

from workbench.dlight.analysis import block_facts, count_reductions, root_blocks
from workbench.dlight.base import CPUInfo, ScheduleRule
from workbench.dlight.cpu.common import inline_cheap_stages, schedule_spatial
from workbench.target import Target
from workbench.tir.function import PrimFunc
from workbench.tir.schedule import Schedule

__all__ = ["Injective"]


class Injective(ScheduleRule):
    """All-data-parallel kernels (see the module docstring)."""

    name = "Injective"

    def apply(self, func: PrimFunc, target: Target, tunable: bool) -> Schedule | None:
        if count_reductions(func):
            return None
        cpu = CPUInfo.of(target)
        sch = Schedule(func)
        blocks = root_blocks(sch)
        if not blocks:
            return None
        for b in blocks:
            f = block_facts(sch, b)
            if f is None or not f.is_spatial:
                return None
        inline_cheap_stages(sch)
        for b in root_blocks(sch) or []:
            schedule_spatial(sch, b, cpu)
        return sch
