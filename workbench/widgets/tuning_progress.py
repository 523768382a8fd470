"""``TuningProgress``: what the tuning dashboard knows, kept apart from how it is shown.

It is fed the arguments of ``MeasureCallback.apply(task_scheduler, task_id,
measure_candidates, builder_results, runner_results)`` and turns them into:

- one :class:`TaskStats` per task (TVM's statistics-table facts plus an error count), read
  from ``task_scheduler.tasks_`` (each record's ``ctx.task_name``, ``task_weight``, ``flop``,
  ``is_terminated``; ``flop`` falls back to ``max(1, estimate_tir_flops(ctx.mod))``);
- one :class:`Measurement` per measured candidate, numbered in measurement order across all
  tasks (the *trial index*, 1-based), with its latency (TVM's rule: the median of
  ``run_secs`` in ms) and GFLOPS, or the error that replaced them, and the cluster worker
  that measured it (``RunnerResult.worker``, "rpc" runner) -- :meth:`ProgressSnapshot.
  workers_table` sums those up per worker;
- totals, the elapsed time and an ETA against a trial budget when one is known;
- each task's roofline bound: ``min(peak, FLOP / bytes x bandwidth)`` GFLOPS from the
  machine's measured limits (:func:`workbench.runtime.machine_limits.machine_limits`, measured
  once per machine and cached) and the bytes of the task PrimFunc's buffers (each read or
  written once: a lower bound of the traffic), so the table shows how far each task's best
  is from what the machine allows (``Bound (GFLOPS)``, ``% of bound``).

Every public method takes one lock, so ``record_batch`` may run in the tuner's thread while a
renderer reads :meth:`snapshot` from another. Nothing here imports widgets: the text
fallback and the tests use it as is.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from workbench.meta_schedule.roofline import func_bytes
from workbench.runtime.machine_limits import MachineLimits, machine_limits
from workbench.runtime.profiling.rows import first_and_more

__all__ = ["TaskStats", "Measurement", "ProgressSnapshot", "TuningProgress", "TABLE_COLUMNS",
           "WORKER_COLUMNS", "SEARCH", "PHASES", "REMEASURED", "BOUND_COLUMNS",
           "candidate_latency_ms", "candidate_error"]

#: The "which worker measured what" table (cluster runs).
WORKER_COLUMNS = ("Worker", "Measured", "Errors", "Tasks")

#: TVM's ``print_tuning_statistics`` columns, then ours.
TABLE_COLUMNS = ("ID", "Name", "FLOP", "Weight", "Speed (GFLOPS)", "Latency (us)",
                 "Weighted Latency (us)", "Trials", "Done", "Errors")
#: Inserted after "Name" when the tasks come from an imported model: the layers they run for.
LAYERS = "Layers"
#: Inserted after "Trials" once measurements outside the search were made.
REMEASURED = "Re-measured"
#: Inserted after "Speed (GFLOPS)" when the machine's limits and a task's bytes are known.
BOUND_COLUMNS = ("Bound (GFLOPS)", "% of bound")

#: The phases of a run (``tune_tasks`` announces them): the search spends the trial budget;
#: the Droplet post-optimization and the confirmation of each task's leaders measure beyond
#: it, so their measurements are counted apart ("16/16 trials + 9 re-measurements").
SEARCH = "search"
PHASES = {SEARCH: "trials", "post-optimization": "post-optimization trials",
          "confirmation": "re-measurements"}


@dataclass
class TaskStats:
    """One task's row. ``best_latency_ms`` is ``inf`` until a candidate ran successfully."""

    task_id: int
    name: str
    flop: float
    weight: float
    trials: int = 0
    errors: int = 0
    best_latency_ms: float = math.inf
    best_trial: int | None = None
    #: Measurements after the search (post-optimization, confirmation), not in ``trials``.
    remeasured: int = 0
    done: bool = False
    layers: str = ""
    #: Why the task found no valid candidate, once tuning ended (the scheduler's note).
    note: str | None = None
    #: The roofline's GFLOPS for the task on this machine (NaN when unknown).
    bound_gflops: float = math.nan
    #: The roofline's time for one call, in microseconds: max(FLOP / peak, bytes /
    #: bandwidth) (NaN when unknown). A kernel that only moves data has no GFLOPS to compare.
    bound_us: float = math.nan

    @property
    def best_gflops(self) -> float:
        """FLOP / best latency, in GFLOPS (NaN before the first valid measurement)."""
        if not math.isfinite(self.best_latency_ms):
            return math.nan
        return self.flop / self.best_latency_ms / 1e6

    @property
    def percent_of_bound(self) -> float:
        """The roofline's time as a percentage of the best latency (NaN when either is
        unknown): for a kernel that computes, its best GFLOPS against the bound's; for one that
        only moves data (a reshape), its bytes' time at the roof's bandwidth against its own."""
        if not self.bound_us > 0 or not math.isfinite(self.best_latency_ms):
            return math.nan
        return self.bound_us / (self.best_latency_ms * 1e3) * 100


@dataclass(frozen=True)
class Measurement:
    """A measured candidate. ``latency_ms``/``gflops`` are NaN when ``error`` is set."""

    trial: int
    task_id: int
    latency_ms: float
    gflops: float
    error: str | None = None
    worker: str | None = None  # the cluster worker that measured it ("rpc" runner)
    phase: str = SEARCH


@dataclass(frozen=True)
class ProgressSnapshot:
    """A consistent copy of the progress at one instant (safe to read without the lock)."""

    tasks: tuple[TaskStats, ...]
    measurements: tuple[Measurement, ...]
    elapsed_s: float
    budget: int | None
    stop_requested: bool
    finished: bool

    @property
    def trials(self) -> int:
        """Measurements of the search: what the trial budget counts."""
        return sum(m.phase == SEARCH for m in self.measurements)

    @property
    def measured(self) -> int:
        """Every measurement, the search's and those after it."""
        return len(self.measurements)

    def extra_counts(self) -> dict[str, int]:
        """Measurements after the search, per phase (only phases that measured anything)."""
        counts: dict[str, int] = {}
        for m in self.measurements:
            if m.phase != SEARCH:
                counts[m.phase] = counts.get(m.phase, 0) + 1
        return counts

    def budget_text(self) -> str:
        """``"16/16"``: the search's trials over the budget (when known)."""
        return f"{self.trials}/{self.budget}" if self.budget is not None else str(self.trials)

    def extra_text(self) -> str:
        """``" + 9 re-measurements"``: the measurements after the search ("" when none)."""
        return "".join(f" + {n} {PHASES.get(phase, phase)}"
                       for phase, n in self.extra_counts().items())

    def counts_text(self) -> str:
        """``"16/16 trials + 9 re-measurements"``."""
        return f"{self.budget_text()} trials{self.extra_text()}"

    @property
    def errors(self) -> int:
        return sum(t.errors for t in self.tasks)

    @property
    def eta_s(self) -> float | None:
        """Seconds left at the average pace so far; 0 when finished, None when unknown."""
        if self.finished or self.stop_requested:
            return 0.0
        if self.budget is None or self.trials == 0:
            return None
        left = max(0, self.budget - self.trials)
        return self.elapsed_s / self.trials * left

    @property
    def notes(self) -> list[str]:
        """The notes of tasks that found no valid candidate."""
        return [t.note for t in self.tasks if t.note]

    @property
    def total_latency_us(self) -> float:
        """Sum of weighted best latencies over tasks with a valid one (TVM's total)."""
        return sum(t.best_latency_ms * 1e3 * t.weight for t in self.tasks
                   if math.isfinite(t.best_latency_ms))

    def table(self) -> pd.DataFrame:
        """TVM's statistics table as numbers (NaN where TVM prints N/A) plus ``Errors``, and
        ``Layers`` after ``Name`` when tasks know the model layers they run for."""
        rows = []
        for t in self.tasks:
            lat_us = t.best_latency_ms * 1e3 if math.isfinite(t.best_latency_ms) else math.nan
            rows.append((t.task_id, t.name, int(t.flop), t.weight, t.best_gflops, lat_us,
                         lat_us * t.weight, t.trials, "Y" if t.done else "", t.errors))
        frame = pd.DataFrame(rows, columns=list(TABLE_COLUMNS))
        if any(math.isfinite(t.bound_gflops) for t in self.tasks):
            at = frame.columns.get_loc("Speed (GFLOPS)") + 1
            frame.insert(at, BOUND_COLUMNS[0], [t.bound_gflops for t in self.tasks])
            frame.insert(at + 1, BOUND_COLUMNS[1], [t.percent_of_bound for t in self.tasks])
        if any(t.remeasured for t in self.tasks):
            frame.insert(frame.columns.get_loc("Trials") + 1, REMEASURED,
                         [t.remeasured for t in self.tasks])
        if any(t.layers for t in self.tasks):
            frame.insert(2, LAYERS, [t.layers for t in self.tasks])
        return frame

    def workers_table(self) -> pd.DataFrame:
        """Which worker measured what: one row per cluster worker (``RunnerResult.worker``)
        with its measurements, errors, and per-task counts; empty when nothing was measured
        on a cluster."""
        names = {t.task_id: t.name for t in self.tasks}
        rows: dict[str, list] = {}
        for m in self.measurements:
            if m.worker is None:
                continue
            row = rows.setdefault(m.worker, [m.worker, 0, 0, {}])
            row[1] += 1
            row[2] += m.error is not None
            row[3][m.task_id] = row[3].get(m.task_id, 0) + 1

        def label(task_id: int) -> str:
            return f"#{task_id} {names[task_id]}" if task_id in names else f"#{task_id}"
        out = [(w, n, e, ", ".join(f"{label(t)} x{c}" for t, c in sorted(per.items())))
               for w, n, e, per in (rows[k] for k in sorted(rows))]
        return pd.DataFrame(out, columns=list(WORKER_COLUMNS))

    def best_so_far(self, task_id: int, compress: bool = True) -> tuple[list[int], list[float]]:
        """(trial indices, running best GFLOPS) of one task: a non-decreasing series starting
        at its first valid measurement. With ``compress`` only the trials that improved the
        best are kept, plus the task's last trial (enough for a step line, and bounded)."""
        xs: list[int] = []
        ys: list[float] = []
        best = -math.inf
        last = None
        for m in self.measurements:
            if m.task_id != task_id:
                continue
            last = m.trial
            improved = m.error is None and m.gflops > best
            if improved:
                best = m.gflops
            if best > -math.inf and (improved or not compress):
                xs.append(m.trial)
                ys.append(best)
        if compress and xs and last is not None and xs[-1] != last:
            xs.append(last)
            ys.append(best)
        return xs, ys


def candidate_error(builder_result: Any, runner_result: Any) -> str | None:
    """The error of one candidate: the build's, else the run's, else None. A run that
    returned no times without a message is an error too (nothing was measured)."""
    for result in (builder_result, runner_result):
        msg = getattr(result, "error_msg", None)
        if msg is not None:
            return str(msg) or "error"
    run_secs = getattr(runner_result, "run_secs", None)
    if not run_secs:
        return "no run time measured"
    return None


def candidate_latency_ms(run_secs: Sequence[float]) -> float:
    """TVM's per-trial latency: the median of ``run_secs`` in ms (mean of the two middle
    values for an even count)."""
    return float(np.median(np.asarray(run_secs, dtype=float))) * 1e3


def _task_flop(record: Any) -> float:
    flop = getattr(record, "flop", None)
    if flop is not None:
        return float(flop)
    mod = getattr(getattr(record, "ctx", None), "mod", None)
    if mod is None:
        return 1.0
    try:
        from workbench.meta_schedule.utils import estimate_tir_flops
        return max(1.0, float(estimate_tir_flops(mod)))
    except Exception:  # a FLOP estimate must never stop a tuning run
        return 1.0


def _task_bytes(record: Any) -> float:
    """Bytes of the task's PrimFunc buffers; NaN without a module (or a symbolic shape)."""
    mod = getattr(getattr(record, "ctx", None), "mod", None)
    if mod is None:
        return math.nan
    try:
        func = mod["main"] if not hasattr(mod, "buffers") else mod
        return func_bytes(func)
    except Exception:  # a roofline is a hint: it must never stop a tuning run
        return math.nan


def _task_weight(record: Any) -> float:
    # TVM's TaskRecord calls it task_weight; accept a plain ``weight`` too.
    weight = getattr(record, "task_weight", None)
    if weight is None:
        weight = getattr(record, "weight", 1.0)
    return float(weight)


def _task_name(record: Any, task_id: int) -> str:
    ctx = getattr(record, "ctx", None)
    name = getattr(ctx, "task_name", None) or getattr(record, "task_name", None)
    return str(name) if name else f"task_{task_id}"


class TuningProgress:
    """Accumulates tuning progress (see the module docstring).

    ``budget`` is the total number of trials expected (``max_trials_global``), used for the
    ETA; ``max_trials_per_task`` caps it further once the number of tasks is known.
    ``limits``: the MachineLimits the tasks' bounds are computed from; ``"auto"`` (default)
    takes this machine's (cached, or measured once when the first task with a module
    appears); None shows no bounds.
    """

    def __init__(self, budget: int | None = None, max_trials_per_task: int | None = None,
                 limits: MachineLimits | str | None = "auto") -> None:
        if limits is not None and limits != "auto" and not isinstance(limits, MachineLimits):
            raise TypeError(f"TuningProgress: limits must be MachineLimits, 'auto' or None, "
                            f"got {limits!r}")
        self._limits: MachineLimits | str | None = limits
        self._lock = threading.Lock()
        self._max_global = budget
        self._max_per_task = max_trials_per_task
        self._tasks: dict[int, TaskStats] = {}
        self._layers: dict[str, str] = {}
        self._measurements: list[Measurement] = []
        self._start = time.monotonic()
        self._end: float | None = None
        self._phase = SEARCH
        self.stop_requested = False
        self.finished = False

    # -- configuration ------------------------------------------------------------------------
    def set_budget(self, max_trials_global: int | None = None,
                   max_trials_per_task: int | None = None) -> None:
        """Set or replace the trial budget used for the ETA (None keeps the old value)."""
        with self._lock:
            if max_trials_global is not None:
                self._max_global = int(max_trials_global)
            if max_trials_per_task is not None:
                self._max_per_task = int(max_trials_per_task)

    def restart_clock(self) -> None:
        """Measure elapsed time and the ETA from now (a run starts)."""
        with self._lock:
            self._start = time.monotonic()
            self._end = None

    def set_task_layers(self, layers: Mapping[str, Sequence[str]]) -> None:
        """Name the model layers each task runs for: ``{task name: [layer label per call
        site]}`` (``relax_integration`` passes ``ExtractedTask.layers``). Shown as
        ``"layer1.0.conv1 + bn1 + relu (+1 more)"``."""
        if not isinstance(layers, Mapping):
            raise TypeError(f"set_task_layers: expected a dict of task name -> layer labels, "
                            f"got {type(layers).__name__}")
        texts = {}
        for name, labels in layers.items():
            if isinstance(labels, str) or not isinstance(labels, Sequence):
                raise TypeError(f"set_task_layers: the layers of task {name!r} must be a list "
                                f"of str, got {labels!r}")
            texts[str(name)] = first_and_more([str(x) for x in labels])
        with self._lock:
            self._layers.update(texts)
            for stats in self._tasks.values():
                stats.layers = self._layers.get(stats.name, stats.layers)

    def begin_phase(self, phase: str) -> None:
        """Measurements from now on belong to ``phase`` (one of :data:`PHASES`): only the
        search's count against the trial budget."""
        if phase not in PHASES:
            raise ValueError(f"begin_phase: phase must be one of {sorted(PHASES)}, got "
                             f"{phase!r}")
        with self._lock:
            self._phase = phase

    def _budget(self) -> int | None:
        caps = []
        if self._max_global is not None:
            caps.append(self._max_global)
        if self._max_per_task is not None and self._tasks:
            caps.append(self._max_per_task * len(self._tasks))
        return min(caps) if caps else None

    # -- input --------------------------------------------------------------------------------
    def limits(self) -> MachineLimits | None:
        """The machine limits the bounds use (resolving ``"auto"``: cached, or measured now,
        about 1.5 s once per machine); None when there are none."""
        if self._limits == "auto":
            try:
                self._limits = machine_limits()
            except Exception as err:  # noqa: BLE001 - no bound is better than no tuning run
                logging.getLogger("workbench.widgets").warning(
                    "tuning dashboard: no roofline bounds (%s: %s)", type(err).__name__, err)
                self._limits = None
        return self._limits if isinstance(self._limits, MachineLimits) else None

    def _bound(self, record: Any, flop: float) -> tuple[float, float]:
        """(roofline GFLOPS, roofline microseconds per call) of a task; NaNs when unknown."""
        nbytes = _task_bytes(record)
        if not nbytes > 0 or getattr(getattr(record, "ctx", None), "mod", None) is None:
            return math.nan, math.nan
        limits = self.limits()
        if limits is None:
            return math.nan, math.nan
        return (float(limits.bound_gflops(flop / nbytes, nbytes)),
                float(limits.bound_seconds(flop, nbytes)) * 1e6)

    def sync_tasks(self, task_scheduler: Any) -> None:
        """Add rows for tasks not seen yet (with their roofline bound) and copy each task's
        ``is_terminated`` flag and ``note``."""
        records = list(getattr(task_scheduler, "tasks_", None) or ())
        with self._lock:
            known = set(self._tasks)
        # Outside the lock: the first bound may measure the machine (about 1.5 s), and
        # renders read snapshots meanwhile.
        bounds = {tid: self._bound(record, _task_flop(record))
                  for tid, record in enumerate(records) if tid not in known}
        with self._lock:
            for tid, record in enumerate(records):
                stats = self._tasks.get(tid)
                if stats is None:
                    name = _task_name(record, tid)
                    bound_gflops, bound_us = bounds.get(tid, (math.nan, math.nan))
                    stats = self._tasks[tid] = TaskStats(
                        tid, name, _task_flop(record), _task_weight(record),
                        layers=self._layers.get(name, ""),
                        bound_gflops=bound_gflops, bound_us=bound_us)
                if bool(getattr(record, "is_terminated", False)):
                    stats.done = True
                stats.note = getattr(record, "note", None)

    def record_batch(self, task_scheduler: Any, task_id: int,
                     measure_candidates: Sequence[Any], builder_results: Sequence[Any],
                     runner_results: Sequence[Any]) -> list[Measurement]:
        """Take in one measured batch of task ``task_id``; returns its measurements."""
        self.sync_tasks(task_scheduler)
        n = len(measure_candidates)
        builder_results = list(builder_results) + [None] * (n - len(builder_results))
        runner_results = list(runner_results) + [None] * (n - len(runner_results))
        with self._lock:
            stats = self._tasks.get(task_id)
            if stats is None:  # a scheduler without tasks_: still count the task
                stats = self._tasks[task_id] = TaskStats(task_id, f"task_{task_id}", 1.0, 1.0)
            batch = []
            for built, ran in zip(builder_results, runner_results):
                error = candidate_error(built, ran)
                trial = len(self._measurements) + 1
                worker = getattr(ran, "worker", None)
                if self._phase == SEARCH:
                    stats.trials += 1
                else:
                    stats.remeasured += 1
                if error is not None:
                    stats.errors += 1
                    m = Measurement(trial, task_id, math.nan, math.nan, error, worker,
                                    self._phase)
                else:
                    latency = candidate_latency_ms(ran.run_secs)
                    gflops = stats.flop / latency / 1e6 if latency > 0 else math.inf
                    m = Measurement(trial, task_id, latency, gflops, worker=worker,
                                    phase=self._phase)
                    if latency < stats.best_latency_ms:
                        stats.best_latency_ms, stats.best_trial = latency, trial
                self._measurements.append(m)
                batch.append(m)
            return batch

    def mark_finished(self, task_scheduler: Any = None) -> None:
        """The run ended: freeze the clock and, given the scheduler, copy the done flags."""
        if task_scheduler is not None:
            self.sync_tasks(task_scheduler)
        with self._lock:
            self.finished = True
            if self._end is None:
                self._end = time.monotonic()

    # -- output -------------------------------------------------------------------------------
    def snapshot(self) -> ProgressSnapshot:
        with self._lock:
            end = self._end if self._end is not None else time.monotonic()
            return ProgressSnapshot(
                tasks=tuple(replace(self._tasks[k]) for k in sorted(self._tasks)),
                measurements=tuple(self._measurements),
                elapsed_s=end - self._start,
                budget=self._budget(),
                stop_requested=self.stop_requested,
                finished=self.finished)

    def task(self, task_id: int) -> TaskStats | None:
        with self._lock:
            stats = self._tasks.get(task_id)
            return None if stats is None else replace(stats)


def format_seconds(secs: float | None) -> str:
    """``12s``, ``3m05s``, ``1h02m``; ``?`` when unknown."""
    if secs is None or not math.isfinite(secs):
        return "?"
    secs = max(0, int(round(secs)))
    if secs < 60:
        return f"{secs}s"
    if secs < 3600:
        return f"{secs // 60}m{secs % 60:02d}s"
    return f"{secs // 3600}h{secs % 3600 // 60:02d}m"
