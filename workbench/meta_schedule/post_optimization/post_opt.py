"""``tune_tasks(..., post_optimization=True)``: a Droplet search after the main search.

For every task of a finished :class:`TaskScheduler` run, in task order:

1. the task's best valid record in the scheduler's database is the start (a task without one
   is skipped with a log line);
2. :class:`DropletSearch` walks its tile sizes and categorical choices; each batch of traces is
   replayed on the task's module with the task's postprocessors (a trace that no longer
   applies or that a postprocessor rejects is a failed point, never built) and measured with
   :meth:`TaskScheduler.measure_batch`: the same builder, runner and output check as the
   search, and the same measure callbacks but ``UpdateCostModel`` (the model is not used any
   more), so every measurement is committed to the database (``AddToDatabase``), counted in
   the task's statistics and shown by a dashboard;
3. one log line reports the database's best before and after, the trials and the seconds
   spent (also under ``Profiler`` scope ``PostOptimization``).

The database keeps every record and ranks by recorded mean time, so the search can only add
candidates for "best": it never rewrites or removes a record. Budget and acceptance margin are
the options ``ms_post_opt_trials`` (per task; TVM uses 100) and ``ms_post_opt_min_gain``.

Differences from TVM's ``PostOpt`` (reference wave2 section 5), on purpose: it uses the run's
builder, runner and database (TVM builds with a fresh ``LocalBuilder`` and re-reads the JSON
files, so RPC runners and non-JSON databases are ignored there); tile moves keep the tiling
perfect (see :mod:`.space`); postprocessing is always re-run on the changed trace; the
incumbent is re-measured in every batch and a neighbour must beat it in the same batch; the
returned database object already holds the new records.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Sequence

from workbench import options
from workbench.meta_schedule.arg_info import ArgInfo
from workbench.meta_schedule.database.database import mean_run_secs
from workbench.meta_schedule.measure_callback.update_cost_model import UpdateCostModel
from workbench.meta_schedule.post_optimization.droplet import DropletResult, DropletSearch
from workbench.meta_schedule.profiler import Profiler
from workbench.meta_schedule.search_strategy.base import TraceApplier
from workbench.meta_schedule.search_strategy.search_strategy import MeasureCandidate
from workbench.ir.module import IRModule
from workbench.tir.schedule import Schedule, Trace

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.task_scheduler import TaskScheduler

__all__ = ["PostOptResult", "post_optimize"]

logger = logging.getLogger("workbench.meta_schedule.post_optimization")


def _at_least_two(value: int) -> None:
    if value < 2:
        raise ValueError(f"must be >= 2 (the incumbent and one neighbour), got {value}")


def _fraction(value: float) -> None:
    if not 0.0 <= value < 1.0:
        raise ValueError(f"must be in [0, 1), got {value}")


options.register("ms_post_opt_trials", int, 64, env="WORKBENCH_MS_POST_OPT_TRIALS",
                 doc="Measurements the post-optimization (Droplet search) may spend per task "
                     "after tune_tir(..., post_optimization=True).",
                 validate=_at_least_two)
options.register("ms_post_opt_min_gain", float, 0.02, env="WORKBENCH_MS_POST_OPT_MIN_GAIN",
                 doc="How much faster (relative) than the incumbent, measured in the same "
                     "batch, a post-optimization candidate must be to replace it.",
                 validate=_fraction)


@dataclass
class PostOptResult:
    """One task's post-optimization: the task's module, the database's best mean time before
    and after (seconds), the search (its batches, trials and same-batch times) and the wall
    seconds spent."""

    task_name: str
    mod: IRModule
    best_before: float
    best_after: float
    search: DropletResult
    seconds: float

    def schedule_before(self) -> Schedule:
        """The best schedule before post-optimization (the search's start), replayed."""
        sch = Schedule(self.mod)
        self.search.start.apply_to_schedule(sch, remove_postproc=False)
        return sch

    @property
    def trials(self) -> int:
        return self.search.trials

    @property
    def recorded_gain(self) -> float:
        """best_before / best_after as recorded in the database (>= 1 by construction)."""
        return self.best_before / self.best_after

    def summary(self) -> str:
        s = self.search
        moved = (f"{len([b for b in s.batches if b.accepted])} move(s), same-batch speedup "
                 f"{s.speedup:.3f}x" if s.improved else "no faster neighbour")
        return (f"post-optimization of {self.task_name!r}: best {self.best_before * 1e6:.2f} us"
                f" -> {self.best_after * 1e6:.2f} us ({self.recorded_gain:.3f}x recorded; "
                f"{moved}) in {self.trials} trial(s), {self.seconds:.1f} s")


def post_optimize(scheduler: "TaskScheduler", *, max_trials: int | None = None,
                  min_gain: float | None = None,
                  should_stop: Callable[[], bool] | None = None) -> list[PostOptResult]:
    """Run the Droplet search on every task of ``scheduler`` (after its ``tune`` returned);
    see the module docstring. ``max_trials`` / ``min_gain`` default to the options;
    ``should_stop()`` is asked before each batch."""
    if max_trials is None:
        max_trials = int(options.get("ms_post_opt_trials"))
    if min_gain is None:
        min_gain = float(options.get("ms_post_opt_min_gain"))
    stop = should_stop or (lambda: False)
    database = scheduler.database_
    if database is None:
        logger.warning("post-optimization needs a database to start from; skipped")
        return []
    search = DropletSearch(max_trials, min_gain)
    out: list[PostOptResult] = []
    for task_id, task in enumerate(scheduler.tasks_):
        if stop():
            break
        ctx = task.ctx
        record = database.query_tuning_record(ctx.mod, ctx.target)
        if record is None:
            logger.info("post-optimization of %r: no valid record to start from; skipped",
                        ctx.task_name)
            continue
        before = record.mean_run_secs
        measure = _measurer(scheduler, task_id)
        t0 = time.perf_counter()
        with Profiler.timeit("PostOptimization"):
            found = search.run(record.trace, measure, recorded_secs=before, should_stop=stop)
        after_rec = database.query_tuning_record(ctx.mod, ctx.target)
        after = before if after_rec is None else min(before, after_rec.mean_run_secs)
        res = PostOptResult(ctx.task_name, ctx.mod, before, after, found, time.perf_counter() - t0)
        out.append(res)
        # ``post_opt`` carries the result for programs that collect it (the benchmark).
        logger.info("%s", res.summary(), extra={"post_opt": res})
        ctx.logger.info("%s", res.summary())
    return out


def _measurer(scheduler: "TaskScheduler",
              task_id: int) -> Callable[[Sequence[Trace]], list[float | None]]:
    """``measure(traces)`` for one task: replay with postprocessing, measure what applied
    through the scheduler, and return each trace's mean seconds (None: failed)."""
    ctx = scheduler.tasks_[task_id].ctx
    # The cost model has done its job once the search is over: retraining it after every
    # batch would only cost time.
    callbacks = [cb for cb in scheduler.measure_callbacks_
                 if not isinstance(cb, UpdateCostModel)]
    postprocs = list(getattr(ctx.space_generator, "postprocs", None) or [])
    applier = TraceApplier(ctx.mod, postprocs)

    def measure(traces: Sequence[Trace]) -> list[float | None]:
        cands: list[MeasureCandidate] = []
        where: list[int] = []
        for i, trace in enumerate(traces):
            sch = applier.apply(trace, ctx.fork_seed())
            if sch is not None:
                cands.append(MeasureCandidate(
                    sch, ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))
                where.append(i)
        times: list[float | None] = [None] * len(traces)
        if cands:
            for i, res in zip(where, scheduler.measure_batch(task_id, cands, callbacks)):
                if res.error_msg is None and res.run_secs:
                    times[i] = mean_run_secs(res.run_secs)
        return times

    return measure
