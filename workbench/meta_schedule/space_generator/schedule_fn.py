"""ScheduleFn: design spaces from a user function ``f(sch)`` that returns None (the schedule
itself), a Schedule, or a list of Schedules."""
from __future__ import annotations

from typing import Any, Callable

from workbench.ir.module import IRModule
from workbench.meta_schedule.space_generator.space_generator import FROM_TARGET, SpaceGenerator
from workbench.tir.schedule import Schedule


class ScheduleFn(SpaceGenerator):
    def __init__(self, sch_fn: Callable[[Schedule], Any], sch_rules: Any = FROM_TARGET,
                 postprocs: Any = FROM_TARGET, mutator_probs: Any = FROM_TARGET) -> None:
        if not callable(sch_fn):
            raise TypeError(f"ScheduleFn needs a callable, got {sch_fn!r}")
        super().__init__(sch_rules, postprocs, mutator_probs)
        self.sch_fn = sch_fn

    def generate_design_space(self, mod: IRModule) -> list[Schedule]:
        sch = Schedule(mod, seed=self.rand.fork_seed())
        result = self.sch_fn(sch)
        if result is None:
            return [sch]
        if isinstance(result, Schedule):
            return [result]
        out = list(result) if isinstance(result, (list, tuple)) else []
        if not out or not all(isinstance(s, Schedule) for s in out):
            raise TypeError(f"the schedule function {getattr(self.sch_fn, '__name__', '?')} "
                            "must return None, a Schedule or a non-empty list of Schedules")
        return out
