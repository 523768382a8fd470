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

Tasks are confirmed in order of their weighted best latency (weight x best time), heaviest
first, and the whole confirmation spends at most ``ms_confirm_share`` of the measurements
the search made (at least one task's worth): a model's tiny kernels (a reshape, a pooling)
cannot change its time whichever schedule wins, and ResNet-18's 20 tasks otherwise cost 120
re-measurements after a 200-trial search. A task its rival implementation outruns
(:mod:`.task_scheduler.rivals`) is skipped: the build will not call it.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from workbench import options
from workbench.meta_schedule.measure_callback.update_cost_model import UpdateCostModel
from workbench.meta_schedule.measured_schedules import measured_schedules
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


def _share(value: float) -> None:
    if not 0 <= value <= 10:
        raise ValueError(f"must be within [0, 10], got {value!r}")


options.register("ms_confirm_share", float, 0.25, env="WORKBENCH_MS_CONFIRM_SHARE",
                 doc="The confirmation's measurements, at most this fraction of the search's "
                     "(heaviest tasks first; at least one task's worth).",
                 validate=_share)


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


def _by_weight(scheduler: "TaskScheduler") -> list[int]:
    """Task ids, heaviest weighted best latency first (tasks without a best last)."""
    def weighted(task_id: int) -> float:
        task = scheduler.tasks_[task_id]
        best = task.best_latency_ms
        return -1.0 if best is None else task.task_weight * best
    return sorted(range(len(scheduler.tasks_)), key=weighted, reverse=True)


def _candidate(ctx: Any, record: Any) -> Any:
    """``record`` as a MeasureCandidate: the schedule measured in this run when the task
    kept it (:mod:`..measured_schedules`), else a replay of its trace."""
    from workbench.meta_schedule.search_strategy import MeasureCandidate
    sch = measured_schedules(ctx).get(record.trace)
    if sch is None or record.args_info is None:
        return record.as_measure_candidate()
    return MeasureCandidate(sch, record.args_info)


def confirm_best(scheduler: "TaskScheduler", *, rounds: int | None = None,
                 top_k: int | None = None, max_trials: int | None = None,
                 share: float | None = None,
                 should_stop: Callable[[], bool] | None = None) -> list[ConfirmResult]:
    """Re-measure the leaders of the tasks of ``scheduler`` (after its ``tune`` returned),
    heaviest first; see the module docstring. Arguments default to the options;
    ``max_trials`` (per task) to ``2 * rounds * top_k``; ``share``: the whole confirmation's
    measurements are at most that fraction of the search's (at least ``max_trials``)."""
    from workbench.meta_schedule.database.database import trace_key
    rounds = int(options.get("ms_confirm_rounds")) if rounds is None else rounds
    top_k = int(options.get("ms_confirm_top_k")) if top_k is None else top_k
    share = float(options.get("ms_confirm_share")) if share is None else share
    for name, value, low in (("rounds", rounds, 0), ("top_k", top_k, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ValueError(f"confirm_best: {name} must be an int >= {low}, got {value!r}")
    if isinstance(share, bool) or not isinstance(share, (int, float)) or share < 0:
        raise ValueError(f"confirm_best: share must be a number >= 0, got {share!r}")
    if max_trials is None:
        max_trials = 2 * rounds * top_k
    stop = should_stop or (lambda: False)
    database = scheduler.database_
    if rounds == 0 or database is None:
        return []
    searched = sum(t.trials for t in scheduler.tasks_)
    budget = max(max_trials, int(share * searched))
    callbacks = [cb for cb in scheduler.measure_callbacks_
                 if not isinstance(cb, UpdateCostModel)]
    out: list[ConfirmResult] = []
    outrun = getattr(scheduler, "task_outrun", lambda task_id: False)
    for task_id in _by_weight(scheduler):
        task = scheduler.tasks_[task_id]
        ctx = task.ctx
        if stop() or budget <= 0:
            break
        if outrun(task_id):  # the build takes its rival (task_scheduler.rivals)
            continue
        if not database.has_workload(ctx.mod):
            continue
        workload = database.commit_workload(ctx.mod)
        leaders = database.get_top_k(workload, top_k)
        if not leaders:
            continue
        before, first_key = leaders[0].mean_run_secs, trace_key(leaders[0])
        spent, t0 = 0, time.perf_counter()
        with Profiler.timeit("ConfirmBest"):
            while spent < min(max_trials, budget) and not stop():
                need = [r for r in leaders if measurements(r) < rounds][
                    :min(max_trials, budget) - spent]
                if not need:
                    break
                scheduler.measure_batch(task_id, [_candidate(ctx, r) for r in need],
                                        callbacks, remeasure=True)
                spent += len(need)
                counts = {trace_key(r): measurements(r) for r in leaders}
                leaders = database.get_top_k(workload, top_k)
                if all(counts.get(trace_key(r)) == measurements(r) for r in leaders):
                    break  # nothing was added (failed runs, or a database that does not pool)
        budget -= spent
        best = database.get_top_k(workload, 1)
        if not best or spent == 0:
            continue
        res = ConfirmResult(ctx.task_name, before, best[0].mean_run_secs,
                            trace_key(best[0]) != first_key, spent, time.perf_counter() - t0)
        out.append(res)
        logger.info("%s", res.summary(), extra={"confirm": res})
        ctx.logger.info("%s", res.summary())
    return out
