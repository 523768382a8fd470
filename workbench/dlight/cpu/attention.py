"""``Attention``: the default schedule of the fused streaming attention kernel
(:mod:`workbench.topi.nn.attention`).

The kernel comes with its inner loops already vectorized and register-tiled (the generator
writes them; its block sizes are the legalizer's defaults, the tuner's space varies them), so
the rule only fuses the three loops over (batch, head, query block) into one parallel loop:
every block instance is independent and brings its own scratch.
"""
from __future__ import annotations

from workbench.dlight.base import ScheduleRule
from workbench.target import Target
from workbench.tir.function import PrimFunc
from workbench.tir.schedule import Schedule

__all__ = ["Attention", "parallelize_attention"]

#: The kernel's block name and the function attribute its generator sets.
BLOCK_NAME = "flash_attention"
SPEC_ATTR = "flash_attention"


def parallelize_attention(sch: Schedule) -> None:
    """Fuse the loops around the ``flash_attention`` block into one parallel loop."""
    block = sch.get_sblock(BLOCK_NAME)
    loops = sch.get_loops(block)
    sch.parallel(sch.fuse(*loops) if len(loops) > 1 else loops[0])


class Attention(ScheduleRule):
    """The fused attention kernel (see the module docstring)."""

    name = "Attention"

    def apply(self, func: PrimFunc, target: Target, tunable: bool) -> Schedule | None:
        if SPEC_ATTR not in func.attrs:
            return None
        sch = Schedule(func)
        parallelize_attention(sch)
        return sch
