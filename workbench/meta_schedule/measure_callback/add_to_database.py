"""AddToDatabase: commit every measured candidate to the task scheduler's database."""
from __future__ import annotations

from typing import Any, Sequence

from workbench.meta_schedule.database.database import FAILED_RUN_SECS, TuningRecord
from workbench.meta_schedule.measure_callback.measure_callback import MeasureCallback
from workbench.meta_schedule.profiler import Profiler

__all__ = ["AddToDatabase"]


class AddToDatabase(MeasureCallback):
    """Commits the task's workload once, then one record per candidate: its trace (with
    postprocessing), its ``run_secs`` or ``[1e10]`` when the build or run failed (a wrong
    result included), the task's target and the candidate's ``args_info``."""

    stores_records = True

    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: Sequence[Any],
              builder_results: Sequence[Any], runner_results: Sequence[Any]) -> None:
        database = getattr(task_scheduler, "database_", None)
        if database is None:
            return
        with Profiler.timeit("MeasureCallback/AddToDatabase"):
            ctx = task_scheduler.tasks_[task_id].ctx
            workload = database.commit_workload(ctx.mod)
            for cand, result in zip(measure_candidates, runner_results):
                run_secs = result.run_secs if result.run_secs is not None else [FAILED_RUN_SECS]
                database.commit_tuning_record(TuningRecord(
                    cand.sch.trace, workload, run_secs, ctx.target, cand.args_info))
