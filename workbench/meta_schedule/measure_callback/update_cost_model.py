"""UpdateCostModel: feed the batch's measurements to the task scheduler's cost model."""
from __future__ import annotations

from typing import Any, Sequence

from workbench.meta_schedule.measure_callback.measure_callback import MeasureCallback
from workbench.meta_schedule.profiler import Profiler

__all__ = ["UpdateCostModel"]


class UpdateCostModel(MeasureCallback):
    """``cost_model.update(task.ctx, candidates, results)`` with TVM's filter: build
    failures are left out, and so are runs that "succeeded" in zero total time; failed runs
    are kept (the model learns they are slow)."""

    needed_when_stopping = False  # the model is of no use once the run is ending

    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: Sequence[Any],
              builder_results: Sequence[Any], runner_results: Sequence[Any]) -> None:
        cost_model = getattr(task_scheduler, "cost_model_", None)
        if cost_model is None:
            return
        with Profiler.timeit("MeasureCallback/UpdateCostModel"):
            ctx = task_scheduler.tasks_[task_id].ctx
            cands, results = [], []
            for cand, built, ran in zip(measure_candidates, builder_results, runner_results):
                if built.error_msg is not None:
                    continue
                if ran.error_msg is not None or sum(ran.run_secs or ()) > 0:
                    cands.append(cand)
                    results.append(ran)
            cost_model.update(ctx, cands, results)
