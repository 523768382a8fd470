"""DisallowDynamicLoop: reject a schedule with any loop of non-constant extent."""
from __future__ import annotations

from workbench.meta_schedule.postproc.postproc import Postproc, register_postproc
from workbench.tir.expr import IntImm
from workbench.tir.schedule import Schedule


@register_postproc("disallow-dynamic-loop")
class DisallowDynamicLoop(Postproc):
    def apply(self, sch: Schedule) -> bool:
        return all(isinstance(info.loop.extent, IntImm)
                   for info in sch.func_index().loops.values())
