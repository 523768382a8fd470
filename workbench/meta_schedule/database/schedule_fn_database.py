"""ScheduleFnDatabase: a "database" that schedules on demand with a Python function.

``ScheduleFnDatabase(schedule_fn)`` answers ``query_schedule(mod, target, name)`` by making a
traced schedule of ``mod`` (with the module attr ``task_name=name``) and calling
``schedule_fn(sch)``; a False return means "no schedule for this workload" (None). Also made by
``Database.create(callable)``. Only the queries work, as in TVM.
"""
from __future__ import annotations

from typing import Callable

from workbench.ir.module import IRModule
from workbench.meta_schedule.database.database import TuningRecord, Workload, as_module
from workbench.meta_schedule.database.union_database import _ComposedDatabase
from workbench.target import Target
from workbench.tir.schedule import Schedule

__all__ = ["ScheduleFnDatabase"]


class ScheduleFnDatabase(_ComposedDatabase):
    """Schedules come from ``schedule_fn(sch) -> bool`` (see the module docstring)."""

    def __init__(self, schedule_fn: Callable[[Schedule], bool],
                 module_equality: str = "structural") -> None:
        if not callable(schedule_fn):
            raise TypeError(f"ScheduleFnDatabase: schedule_fn must be callable, got "
                            f"{schedule_fn!r}")
        super().__init__()
        self.schedule_fn = schedule_fn
        self.module_equality = module_equality

    def query_schedule(self, mod: IRModule, target: Target | None = None,
                       workload_name: str = "main") -> Schedule | None:
        sch = Schedule(as_module(mod).with_attr("task_name", workload_name))
        if not self.schedule_fn(sch):
            return None
        return sch

    def query_tuning_record(self, mod: IRModule, target: Target | None = None,
                            workload_name: str = "main") -> TuningRecord | None:
        mod = as_module(mod)
        sch = self.query_schedule(mod, target, workload_name)
        if sch is None:
            return None
        return TuningRecord(sch.trace, Workload(mod, 0), None, target, None)

    def __repr__(self) -> str:
        name = getattr(self.schedule_fn, "__name__", repr(self.schedule_fn))
        return f"ScheduleFnDatabase({name})"
