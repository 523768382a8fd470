"""``tune_tasks(..., post_optimization=True)``: a Droplet search after the main search.

For every task of a finished :class:`TaskScheduler` run, in task order:

1. the task's best valid record in the scheduler's database is the start (a task without one
   is skipped with a log line);
2. :class:`DropletSearch` walks its tile sizes and categorical choices; each batch of traces is
   replayed on the task's module with the task's postprocessors (a trace that no longer
   applies or that a postprocessor rejects is a failed point, never built) and measured with
   :meth:`TaskScheduler.measure_batch`: the same builder, runner and output check as the
   search, and the same measure callbacks (a dashboard shows the trials, the statistics count
   them) except ``UpdateCostModel`` (the model is not used any more) and ``AddToDatabase``;
3. if the search moved, its result and the start are measured side by side
   (``DUEL_ROUNDS`` rounds in turns in one batch; the median round of each is compared: a
   single measurement on a shared machine can be far off either way);
4. records are committed through the run's ``AddToDatabase`` so that a lucky measurement
   never becomes the best: failures and candidates not faster than the database's best are
   committed as measured; a faster-looking one is committed only if it is the search's result
   and beat the start side by side (with every time measured for it), the others are
   dropped and counted (see :class:`_TaskMeasure`);
5. one log line reports the database's best before and after, the trials and the seconds
   spent (also under ``Profiler`` scope ``PostOptimization``).

So the database's best after post-optimization is the old best or a schedule that was
faster than it when both ran in the same batch, and no record is rewritten or removed.
Budget and acceptance margin are the options ``ms_post_opt_trials`` (per task, the final
comparison included; TVM uses 100) and ``ms_post_opt_min_gain``.

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
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from workbench import options
from workbench.meta_schedule.arg_info import ArgInfo
from workbench.meta_schedule.database.database import mean_run_secs
from workbench.meta_schedule.builder import BuilderResult
from workbench.meta_schedule.measure_callback.add_to_database import AddToDatabase
from workbench.meta_schedule.measure_callback.update_cost_model import UpdateCostModel
from workbench.meta_schedule.post_optimization.space import decision_key
from workbench.meta_schedule.runner import RunnerResult
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


#: Rounds of the final side-by-side measurement of the start and the search's result.
DUEL_ROUNDS = 3

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
    and after (seconds), the search (its batches and same-batch times), the wall seconds and
    measurements spent (the final comparison included), whether the search's result beat the
    start side by side (None: nothing to compare), how many faster-looking records were held
    back unconfirmed, and ``side_by_side_gain``: the start's time over the result's in that
    comparison (medians of its rounds; None when there was none)."""

    task_name: str
    mod: IRModule
    best_before: float
    best_after: float
    search: DropletResult
    seconds: float
    trials: int
    confirmed: bool | None
    held_back: int
    side_by_side_gain: float | None = None

    def schedule_before(self) -> Schedule:
        """The best schedule before post-optimization (the search's start), replayed."""
        sch = Schedule(self.mod)
        self.search.start.apply_to_schedule(sch, remove_postproc=False)
        return sch

    @property
    def recorded_gain(self) -> float:
        """best_before / best_after as recorded in the database (>= 1 by construction)."""
        return self.best_before / self.best_after

    def summary(self) -> str:
        s = self.search
        if not s.improved:
            moved = "no faster neighbour"
        else:
            gain = ("" if self.side_by_side_gain is None
                    else f": start / result {self.side_by_side_gain:.3f}")
            moved = (f"{len([b for b in s.batches if b.accepted])} move(s), "
                     f"{'confirmed' if self.confirmed else 'not confirmed'} against the start "
                     f"side by side{gain}")
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
    if isinstance(max_trials, bool) or not isinstance(max_trials, int) or \
            max_trials < 2 + 2 * DUEL_ROUNDS:
        raise ValueError(f"post_optimize: max_trials must be an int >= {2 + 2 * DUEL_ROUNDS} "
                         f"(a batch and the final comparison), got {max_trials!r}")
    stop = should_stop or (lambda: False)
    database = scheduler.database_
    if database is None:
        logger.warning("post-optimization needs a database to start from; skipped")
        return []
    # the final comparison with the start is paid from the same budget
    search = DropletSearch(max_trials - 2 * DUEL_ROUNDS, min_gain)
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
        measure = _TaskMeasure(scheduler, task_id, before)
        t0 = time.perf_counter()
        with Profiler.timeit("PostOptimization"):
            found = search.run(record.trace, measure, recorded_secs=before, should_stop=stop)
            confirmed = None
            if found.improved and not stop():
                confirmed = measure.duel(record.trace, found.best_trace, min_gain)
            measure.finish(found.best_trace if confirmed else None)
        after_rec = database.query_tuning_record(ctx.mod, ctx.target)
        after = before if after_rec is None else min(before, after_rec.mean_run_secs)
        res = PostOptResult(ctx.task_name, ctx.mod, before, after, found,
                            time.perf_counter() - t0, measure.trials, confirmed,
                            measure.held_back, measure.gain)
        out.append(res)
        # ``post_opt`` carries the result for programs that collect it (the benchmark).
        logger.info("%s", res.summary(), extra={"post_opt": res})
        ctx.logger.info("%s", res.summary())
    return out


class _TaskMeasure:
    """``measure(traces)`` for one task's search, and the commit policy.

    Traces are replayed with the task's postprocessing; what applies is measured through
    ``scheduler.measure_batch`` with the run's callbacks except ``UpdateCostModel`` (the
    model is not used any more) and ``AddToDatabase``: committing is decided here. A failed
    candidate, or one whose mean time is at least ``floor`` (the database's best before),
    is committed at once through the run's ``AddToDatabase`` (if it has one): it cannot
    become the best. A faster one is held back: only the final incumbent, once it beat the
    start side by side (:meth:`duel`), is committed, with every time measured for it. A lucky
    single measurement therefore never becomes the database's best.
    """

    def __init__(self, scheduler: "TaskScheduler", task_id: int, floor: float) -> None:
        self.scheduler, self.task_id, self.floor = scheduler, task_id, floor
        self.ctx = scheduler.tasks_[task_id].ctx
        self.callbacks = [cb for cb in scheduler.measure_callbacks_
                          if not isinstance(cb, (UpdateCostModel, AddToDatabase))]
        adders = [cb for cb in scheduler.measure_callbacks_ if isinstance(cb, AddToDatabase)]
        self.adder = adders[0] if adders else None
        postprocs = list(getattr(self.ctx.space_generator, "postprocs", None) or [])
        self.applier = TraceApplier(self.ctx.mod, postprocs)
        self.held: dict[tuple, tuple[MeasureCandidate, BuilderResult, list[float]]] = {}
        self.trials = 0
        self.held_back = 0
        self.gain: float | None = None

    def _run(self, traces: Sequence[Trace]) -> list[tuple[MeasureCandidate | None,
                                                          BuilderResult | None,
                                                          RunnerResult | None]]:
        cands: list[MeasureCandidate] = []
        where: list[int] = []
        for i, trace in enumerate(traces):
            sch = self.applier.apply(trace, self.ctx.fork_seed())
            if sch is not None:
                cands.append(MeasureCandidate(
                    sch, ArgInfo.from_entry_func(sch.mod, remove_preproc=True)))
                where.append(i)
        self.trials += len(traces)
        out: list[tuple[Any, Any, Any]] = [(None, None, None)] * len(traces)
        if cands:
            built, results = self.scheduler.measure_batch(self.task_id, cands, self.callbacks)
            for i, cand, b, r in zip(where, cands, built, results):
                out[i] = (cand, b, r)
        return out

    def _commit(self, cand: MeasureCandidate, built: BuilderResult,
                result: RunnerResult) -> None:
        if self.adder is not None:
            self.adder.apply(self.scheduler, self.task_id, [cand], [built], [result])

    def __call__(self, traces: Sequence[Trace]) -> list[float | None]:
        times: list[float | None] = []
        for trace, (cand, built, res) in zip(traces, self._run(traces)):
            ok = res is not None and res.error_msg is None and bool(res.run_secs)
            times.append(mean_run_secs(res.run_secs) if ok else None)
            if cand is None:
                continue  # did not apply: nothing was built or measured
            if not ok or mean_run_secs(res.run_secs) >= self.floor:
                self._commit(cand, built, res)
                continue
            key = decision_key(trace)
            if key in self.held:
                self.held[key][2].extend(res.run_secs)
            else:
                self.held[key] = (cand, built, list(res.run_secs))
        return times

    def duel(self, start: Trace, final: Trace, min_gain: float) -> bool:
        """Measure ``start`` and ``final`` in turns, ``DUEL_ROUNDS`` times in one batch; True
        when ``final``'s median round is faster than ``start``'s by more than ``min_gain``
        (its times are kept for the commit). ``self.gain``: start / final, medians."""
        runs = self._run([start, final] * DUEL_ROUNDS)
        start_secs = [s for c, b, r in runs[0::2] if r is not None and r.error_msg is None
                      for s in (r.run_secs or [])]
        final_secs = [s for c, b, r in runs[1::2] if r is not None and r.error_msg is None
                      for s in (r.run_secs or [])]
        if not start_secs or not final_secs:
            return False
        # the median of each side's rounds: one round far off in either direction (a burst
        # of load, or a quiet moment, on a shared machine) must not decide the comparison
        self.gain = float(np.median(start_secs) / np.median(final_secs))
        won = self.gain > 1.0 / (1.0 - min_gain)
        key = decision_key(final)
        if won and key in self.held:
            self.held[key][2].extend(final_secs)
        return won

    def finish(self, confirmed: Trace | None) -> None:
        """Commit the confirmed final incumbent (all its times); drop the other held ones."""
        key = None if confirmed is None else decision_key(confirmed)
        for k, (cand, built, secs) in self.held.items():
            if k == key:
                self._commit(cand, built, RunnerResult(secs, None))
            else:
                self.held_back += 1
        self.held.clear()
