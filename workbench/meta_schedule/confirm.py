"""Confirming the best: each task's leading schedules are measured again after the search
(Workbench; TVM keeps whatever measured fastest once).

A search measures each candidate once. On a shared machine one measurement can be far off in
either direction (seen on a 2-core host, ResNet-18 conv kernels: a best record of 2.47 ms
re-measured at 3.4-4.1 ms, no faster than the default schedule's 3.5-3.8 ms, and another
"best" 1.4x slower than the default it had beaten by one measurement), so out of hundreds of
candidates the database keeps the luckiest, and a tuned model can come out slower than an
untuned one. After the search (and the post-optimization), for every task:

1. the database's ``top_k`` leaders are taken (``get_top_k``: a trace measured several times
   ranks by all its times, see :func:`~workbench.meta_schedule.database.pool_by_trace`);
2. those measured fewer than ``rounds`` times are measured once more, in one batch, with the
   run's builder, runner, output check and measure callbacks (except ``UpdateCostModel``: the
   model is not used any more), and each measurement is committed as a record of its own;
3. until every leader was measured ``rounds`` times, or the task's budget ``max_trials`` is
   spent, or a Stop was asked for.

A lucky time is then one of several in its schedule's mean, and a schedule that only looked
fast drops behind the ones that are. Nothing is removed from the database. Options:
``ms_confirm_rounds`` (0 turns this off), ``ms_confirm_top_k``; the budget per task is
``2 * rounds * top_k`` measurements.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from workbench import options
from workbench.meta_schedule.measure_callback.update_cost_model import UpdateCostModel
from workbench.meta_schedule.profiler import Profiler

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.task_scheduler import TaskScheduler

__all__ = ["ConfirmResult", "confirm_best", "measurements"]

logger = logging.getLogger("workbench.meta_schedule")


options.register("ms_confirm_rounds", int, 3, env="WORKBENCH_MS_CONFIRM_ROUNDS",
                 doc="After tuning, each task's leading schedules are measured until each "
                     "has this many measurements (meta_schedule.confirm); 0: off.",
                 validate=options.not_negative)
options.register("ms_confirm_top_k", int, 3, env="WORKBENCH_MS_CONFIRM_TOP_K",
                 doc="How many leading schedules per task the confirmation re-measures.",
                 validate=options.positive)


def measurements(record: object) -> int:
    """How many valid records a record returned by ``get_top_k`` pools (1 if not pooled)."""
    return int(getattr(record, "pooled_records", 1))


@dataclass
class ConfirmResult:
    """One task's confirmation: the best mean time before and after (seconds), whether the
    best schedule changed, the measurements spent and the wall seconds."""

    task_name: str
    best_before: float
    best_after: float
    changed: bool
    trials: int
    seconds: float

    def summary(self) -> str:
        what = "another schedule is the best" if self.changed else "the best stands"
        return (f"confirmation of {self.task_name!r}: best {self.best_before * 1e6:.2f} us -> "
                f"{self.best_after * 1e6:.2f} us as re-measured ({what}) in {self.trials} "
                f"measurement(s), {self.seconds:.1f} s")


def confirm_best(scheduler: "TaskScheduler", *, rounds: int | None = None,
                 top_k: int | None = None, max_trials: int | None = None,
                 should_stop: Callable[[], bool] | None = None) -> list[ConfirmResult]:
    """Re-measure the leaders of every task of ``scheduler`` (after its ``tune`` returned);
    see the module docstring. Arguments default to the options; ``max_trials`` (per task) to
    ``2 * rounds * top_k``."""
    from workbench.meta_schedule.database.database import trace_key
    rounds = int(options.get("ms_confirm_rounds")) if rounds is None else rounds
    top_k = int(options.get("ms_confirm_top_k")) if top_k is None else top_k
    for name, value, low in (("rounds", rounds, 0), ("top_k", top_k, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"confirm_best: {name} must be an int >= {low}, got {value!r}")
    if max_trials is None:
        max_trials = 2 * rounds * top_k
    stop = should_stop or (lambda: False)
    database = scheduler.database_
    if rounds == 0 or database is None:
        return []
    callbacks = [cb for cb in scheduler.measure_callbacks_
                 if not isinstance(cb, UpdateCostModel)]
    out: list[ConfirmResult] = []
    for task_id, task in enumerate(scheduler.tasks_):
        ctx = task.ctx
        if stop():
            break
        if not database.has_workload(ctx.mod):
            continue
        workload = database.commit_workload(ctx.mod)
        leaders = database.get_top_k(workload, top_k)
        if not leaders:
            continue
        before, first_key = leaders[0].mean_run_secs, trace_key(leaders[0])
        spent, t0 = 0, time.perf_counter()
        with Profiler.timeit("ConfirmBest"):
            while spent < max_trials and not stop():
                need = [r for r in leaders if measurements(r) < rounds][:max_trials - spent]
                if not need:
                    break
                scheduler.measure_batch(task_id, [r.as_measure_candidate() for r in need],
                                        callbacks)
                spent += len(need)
                counts = {trace_key(r): measurements(r) for r in leaders}
                leaders = database.get_top_k(workload, top_k)
                if all(counts.get(trace_key(r)) == measurements(r) for r in leaders):
                    break  # nothing was added (failed runs, or a database that does not pool)
        best = database.get_top_k(workload, 1)
        if not best or spent == 0:
            continue
        res = ConfirmResult(ctx.task_name, before, best[0].mean_run_secs,
                            trace_key(best[0]) != first_key, spent, time.perf_counter() - t0)
        out.append(res)
        logger.info("%s", res.summary(), extra={"confirm": res})
        ctx.logger.info("%s", res.summary())
    return out
