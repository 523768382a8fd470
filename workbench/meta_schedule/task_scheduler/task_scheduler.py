"""TaskScheduler: decides which task to tune next and runs TVM's main loop (reference 1.3).

``tune(tasks, task_weights, max_trials_global, max_trials_per_task, num_trials_per_iter,
builder, runner, measure_callbacks, database, cost_model)``::

    for each task: generate design spaces, log them, strategy.pre_tuning(...)
    while trials < max_trials_global and (tid := next_task_id()) != -1:
        if the task has max_trials_per_task trials: terminate it; continue
        cands = strategy.generate_measure_candidates(); None -> terminate; continue
        trials += len(cands)          # counted when generated, failures included
        build all, run the built ones (a build failure becomes a finished failed run)
    join and terminate whatever is left; strategy.post_tuning() for every task

``join_running_task(tid)`` waits for the task's runs, notifies its strategy, applies the
measure callbacks (which read ``tasks_``, ``database_``, ``cost_model_``), records each
trial's median latency (1e9 ms on failure) and logs the trial lines and the statistics table.

Beyond TVM: each task's unscheduled function is run once (``make_reference``) and every
``RunnerInput`` carries that reference, so a schedule computing wrong results fails its
measurement instead of becoming the best record (pass ``check_outputs=False`` to skip).

No silent empty run: a task whose search ran but ended without one valid measurement (not
one the trial budget never reached, which is only logged) gets a ``note`` saying
why, with the counts per cause (samples refused by each postprocessor, trace replays that
failed, builds and runs that failed) and the first message of each; it is logged and issued
as one :class:`NoValidCandidateWarning` per task. Measure callbacks with an
``attach_scheduler(task_scheduler)`` method are given the scheduler when tuning starts (the
dashboard shows the tasks, and the notes, even when no batch is ever measured).

Interrupts (Ctrl-C, a Jupyter interrupt) end the run without losing measurements: a batch is
committed whole (SIGINT is held back until the callbacks that store records -- those with
``stores_records``, i.e. ``AddToDatabase`` -- have returned; the cost model update after them
stays interruptible), and when a ``KeyboardInterrupt`` (or any exception) escapes
the loop, every batch already measured but not yet joined -- including the measured part of
a batch the runner was in the middle of (:class:`~..runner.MeasurementInterrupted`) -- is
joined first, so its records are in the database before the exception propagates.
"""
from __future__ import annotations

import abc
import contextlib
import logging
import os
import signal
import tempfile
import threading
import warnings
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from workbench.meta_schedule.arg_info import ArgInfo
from workbench.meta_schedule.measured_schedules import measured_schedules
from workbench.meta_schedule.profiler import Profiler
from workbench.meta_schedule.task_scheduler.rivals import check_rivals, outrun_by
from workbench.meta_schedule.utils import estimate_tir_flops, median

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.builder import Builder, BuilderResult
    from workbench.meta_schedule.cost_model import CostModel
    from workbench.meta_schedule.database import Database
    from workbench.meta_schedule.measure_callback import MeasureCallback
    from workbench.meta_schedule.runner import Runner, RunnerFuture, RunnerResult
    from workbench.meta_schedule.search_strategy import MeasureCandidate
    from workbench.meta_schedule.tune_context import TuneContext

__all__ = ["TaskRecord", "TaskScheduler", "PyTaskScheduler", "NoValidCandidateWarning"]

FAILED_LATENCY_MS = 1e9
GLOBAL_LOGGER = "workbench.meta_schedule"


class NoValidCandidateWarning(UserWarning):
    """A tuning task ended without one valid measurement (the message says why)."""


@contextlib.contextmanager
def _interrupts_held() -> Iterator[None]:
    """Hold SIGINT back for the block (main thread only, where Python delivers it): an
    interrupt during the block is re-delivered to the previous handler right after it (so a
    ``KeyboardInterrupt`` is raised there, as usual)."""
    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous is None:
        yield  # not Python's to hold (a handler installed outside Python)
        return
    caught: list[int] = []
    signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught:
            signal.raise_signal(signal.SIGINT)


class TaskRecord:
    """The scheduler's state for one task (TVM's ``TaskRecordNode``)."""

    def __init__(self, ctx: "TuneContext", task_weight: float) -> None:
        self.ctx = ctx
        self.task_weight = float(task_weight)
        self.flop = max(1.0, estimate_tir_flops(ctx.mod)) if ctx.mod is not None else 1.0
        self.is_terminated = False
        self.build_error_count = 0
        self.run_error_count = 0
        #: Every measurement's latency (failures as FAILED_LATENCY_MS), re-measurements too.
        self.latency_ms: list[float] = []
        #: How many of them re-measured a schedule measured before (meta_schedule.confirm).
        self.remeasured = 0
        self.measure_candidates: list["MeasureCandidate"] | None = None
        self.builder_results: list["BuilderResult"] | None = None
        self.runner_futures: list["RunnerFuture"] | None = None
        self.reference: str | None = None
        #: Is the reference output still to be made (before the task's first measurement)?
        self.reference_pending = False
        self.first_build_error: str | None = None
        self.first_run_error: str | None = None
        #: Why the task found no valid candidate (set when tuning ends; None otherwise).
        self.note: str | None = None
        #: Did the search run for this task (False: the global budget ran out before it)?
        self.searched = False

    @property
    def trials(self) -> int:
        """Schedules measured: the measurements less the re-measurements."""
        return len(self.latency_ms) - self.remeasured

    @property
    def best_latency_ms(self) -> float | None:
        valid = [x for x in self.latency_ms if x < FAILED_LATENCY_MS]
        return min(valid) if valid else None

    def __repr__(self) -> str:
        return (f"TaskRecord({self.ctx.task_name!r}, trials={self.trials}, "
                f"best_ms={self.best_latency_ms}, done={self.is_terminated})")


def _first_lines(text: str | None, lines: int = 3, limit: int = 400) -> str:
    """The gist of an error message: its first lines, or for one that holds a traceback its
    first line and the exception (the traceback's last line)."""
    all_lines = [ln for ln in str(text or "").strip().splitlines() if ln.strip()]
    if any(ln.startswith("Traceback (most recent call last)") for ln in all_lines):
        keep = [all_lines[0], all_lines[-1]] if len(all_lines) > 1 else all_lines
    else:
        keep = all_lines[:lines]
    out = "\n".join(keep)
    return out if len(out) <= limit else out[:limit - 3] + "..."


def empty_task_note(task_id: int, task: TaskRecord, earlier_record: bool = False) -> str:
    """Why ``task`` found no valid candidate: counts per cause and each cause's first
    message (module docstring). ``earlier_record``: the database holds a valid record of the
    workload from an earlier run."""
    fails = getattr(task.ctx.search_strategy, "sample_failures", None)
    trials = task.trials
    parts = []
    if fails is not None:
        refused = ", ".join(f"{name}: {n}" for name, n in fails.postproc.items() if n)
        parts.append(f"{fails.refused} sample(s) refused by postprocessors"
                     + (f" ({refused})" if refused else ""))
        parts.append(f"{fails.replay} trace replay failure(s)")
    parts.append(f"{task.build_error_count} build failure(s)")
    parts.append(f"{task.run_error_count} run failure(s)")
    text = (f"Task #{task_id} ({task.ctx.task_name!r}) found no valid candidate in {trials} "
            f"trial(s): {'; '.join(parts)}.")
    firsts = [("First refusal", getattr(fails, "first", None)),
              ("First build error", task.first_build_error),
              ("First run error", task.first_run_error)]
    text += "".join(f"\n{label}: {msg}" for label, msg in firsts if msg)
    if trials == 0 and not any(msg for _, msg in firsts):
        text += "\nThe search proposed no candidate (is the design space empty?)."
    if earlier_record:
        return text + "\nThe database keeps this workload's records of earlier runs."
    return text + ("\nThe database holds no record for this workload: compile_tir raises for "
                   "it; a Relax build gives it its default schedule (workbench.dlight).")


class TaskScheduler(abc.ABC):
    """Abstract task scheduler; subclasses choose ``next_task_id``."""

    def __init__(self) -> None:
        self.tasks_: list[TaskRecord] = []
        self.measure_callbacks_: list["MeasureCallback"] = []
        self.database_: "Database | None" = None
        self.cost_model_: "CostModel | None" = None
        self.remaining_tasks_ = 0
        self.logger = logging.getLogger(GLOBAL_LOGGER)
        self.check_outputs = True
        self.rivals_: list[list[int]] = []
        self._set_aside: set[int] = set()
        self._stopping = False  # joining what was measured while a run ends by an exception

    def task_outrun(self, task_id: int) -> bool:
        """Is the task outrun by its rivals (:mod:`.rivals`)? Logged once when it first is."""
        ratio = outrun_by(self.tasks_, self.rivals_, task_id)
        if ratio is not None and task_id not in self._set_aside:
            self._set_aside.add(task_id)
            names = ", ".join(f"#{j} ({self.tasks_[j].ctx.task_name!r})"
                              for j in self.rivals_[task_id])
            self.logger.info("Task #%d (%r) is set aside: its best runs %.2fx slower than "
                             "its rival implementation %s; it is tuned only when no other "
                             "task is left", task_id, self.tasks_[task_id].ctx.task_name,
                             ratio, names)
        return ratio is not None

    @abc.abstractmethod
    def next_task_id(self) -> int:
        """The task to tune next, or -1 when every task is done."""

    # -- the main loop -------------------------------------------------------------------------
    def tune(self, tasks: Sequence["TuneContext"], task_weights: Sequence[float],
             max_trials_global: int, max_trials_per_task: int, num_trials_per_iter: int,
             builder: "Builder", runner: "Runner",
             measure_callbacks: Sequence["MeasureCallback"], database: "Database | None",
             cost_model: "CostModel | None", *, work_dir: str | None = None,
             rivals: Sequence[Sequence[int]] | None = None) -> None:
        """Tune ``tasks`` (see the module docstring). ``work_dir`` (Workbench) is where the
        output references are kept (a temporary directory when None). ``rivals``
        (Workbench): per task, the tasks computing its layers another way; a task they
        outrun is tuned last (:mod:`.rivals`)."""
        if len(tasks) != len(task_weights):
            raise ValueError(f"tune: {len(tasks)} tasks but {len(task_weights)} weights")
        self.rivals_ = check_rivals(rivals, len(tasks))
        self._set_aside: set[int] = set()
        if max_trials_global < 0 or max_trials_per_task < 0 or num_trials_per_iter <= 0:
            raise ValueError("tune: trial counts must be non-negative and num_trials_per_iter "
                             "positive")
        self.tasks_ = []
        self.measure_callbacks_ = list(measure_callbacks)
        self.database_ = database
        self.cost_model_ = cost_model
        self.remaining_tasks_ = len(tasks)
        self._builder, self._runner = builder, runner
        self._ref_dir = work_dir or tempfile.mkdtemp(prefix="workbench_ms_")
        for part in (builder, runner):  # their workers start while the tasks initialize
            prestart = getattr(part, "prestart", None)
            if callable(prestart):
                prestart()
        for i, (ctx, weight) in enumerate(zip(tasks, task_weights)):
            with Profiler.timeit("InitializeTask"):
                self._initialize_task(i, ctx, weight, max_trials_per_task,
                                      num_trials_per_iter)
        for cb in self.measure_callbacks_:
            attach = getattr(cb, "attach_scheduler", None)
            if callable(attach):
                attach(self)
        try:
            self._loop(max_trials_global, max_trials_per_task)
            for task_id, task in enumerate(self.tasks_):
                if not task.is_terminated:
                    if task.runner_futures is not None:
                        self.join_running_task(task_id)
                    self.terminate_task(task_id)
                task.ctx.post_tuning()
        except BaseException as err:
            self._store_measured(err)
            raise
        for task_id in range(len(self.tasks_)):
            self._report_if_empty(task_id)

    def _report_if_empty(self, task_id: int) -> None:
        """Set the note of a task that found no valid candidate, log it and warn once."""
        task = self.tasks_[task_id]
        if task.best_latency_ms is not None:
            task.note = None
            return
        if not task.searched:  # not a failure: max_trials_global ran out before its turn
            task.note = None
            self.logger.info("Task #%d (%r) was not tuned: the trial budget ran out before its "
                             "turn", task_id, task.ctx.task_name)
            return
        earlier = False
        if self.database_ is not None and task.ctx.mod is not None:
            try:
                earlier = self.database_.query_tuning_record(
                    task.ctx.mod, task.ctx.target, "main") is not None
            except Exception:  # noqa: BLE001 - a user database that cannot answer: say nothing
                earlier = False
        task.note = empty_task_note(task_id, task, earlier)
        task.ctx.logger.warning("%s", task.note)
        self.logger.warning("%s", task.note)
        warnings.warn(task.note, NoValidCandidateWarning, stacklevel=2)

    def _loop(self, max_trials_global: int, max_trials_per_task: int) -> None:
        trials = 0
        while trials < max_trials_global:
            task_id = self.next_task_id()
            if task_id == -1:
                break
            task = self.tasks_[task_id]
            if task.is_terminated:
                continue
            if task.trials >= max_trials_per_task:
                self.terminate_task(task_id)
                continue
            cands = task.ctx.generate_measure_candidates()
            task.searched = True
            if cands is None:
                self.terminate_task(task_id)
                continue
            trials += len(cands)
            self.logger.info("Sending %d sample(s) to builder", len(cands))
            self._send(task_id, cands)

    def _store_measured(self, err: BaseException) -> None:
        """The run is ending by ``err``: join every batch whose measurements are all done, so
        what was measured is stored (callbacks not ``needed_when_stopping`` are skipped).
        Nothing here may hide ``err``."""
        self._stopping = True
        try:
            for task_id, task in enumerate(self.tasks_):
                futures = task.runner_futures
                if task.is_terminated or not futures:
                    continue
                try:
                    if all(f.done() for f in futures):
                        self.join_running_task(task_id)
                except Exception as inner:  # noqa: BLE001 - report it, keep the original error
                    self.logger.warning("Could not store the measured batch of task #%d while "
                                        "stopping (%s: %s)", task_id, type(inner).__name__,
                                        inner)
        finally:
            self._stopping = False
        if isinstance(err, KeyboardInterrupt):
            self.logger.info("Tuning interrupted; every measured candidate is stored")

    def _initialize_task(self, i: int, ctx: "TuneContext", weight: float,
                         max_trials_per_task: int, num_trials_per_iter: int) -> None:
        if ctx.mod is None or ctx.space_generator is None or ctx.search_strategy is None:
            raise ValueError(f"task #{i} ({ctx.task_name}) needs a mod, a space_generator "
                             "and a search_strategy")
        record = TaskRecord(ctx, weight)
        self.tasks_.append(record)
        log = ctx.logger
        log.info("Initializing Task #%d: %r", i, ctx.task_name)
        log.info("\n%s", ctx.mod.script() if hasattr(ctx.mod, "script") else ctx.mod)
        spaces = ctx.space_generator.generate_design_space(ctx.mod)
        log.info("Total %d design space(s) generated", len(spaces))
        for k, sch in enumerate(spaces):
            log.info("Design space #%d:\n%s\n%s", k, sch.mod["main"].script(),
                     sch.trace.simplified(remove_postproc=True))
        ctx.search_strategy.pre_tuning(max_trials_per_task, num_trials_per_iter, spaces,
                                       self.database_, self.cost_model_)
        # The reference is made before the task's first measurement, not here: its run needs
        # the runner's worker, which is still starting now (prestarted in tune()).
        record.reference_pending = bool(self.check_outputs)

    def _compile_reference(self, ctx: "TuneContext", ref_dir: str) -> Any:
        """The task's reference compiled (``compile_reference``), in a thread while its first
        batch builds: it touches no worker, so an interrupt leaves nothing running. Returns
        the exception instead of raising it: :meth:`_make_reference` reports it."""
        try:
            from workbench.meta_schedule.runner.reference import compile_reference
        except ImportError:  # pragma: no cover - a runner package without output checking
            return None
        try:
            return compile_reference(ctx.mod, ctx.target, ArgInfo.from_entry_func(ctx.mod),
                                     os.path.join(ref_dir, "references"))
        except Exception as e:  # noqa: BLE001 - reported by _make_reference
            return e

    def _make_reference(self, ctx: "TuneContext", compiled: Any) -> str | None:
        """The path of the task's reference outputs, run from ``compiled`` (what
        :meth:`_compile_reference` returned), or None when it cannot be made: the task is
        then tuned without the output check."""
        from workbench.rpc.base import RPCError
        try:
            from workbench.meta_schedule.runner.reference import run_reference
        except ImportError:  # pragma: no cover - a runner package without output checking
            return None
        try:
            if isinstance(compiled, BaseException):
                raise compiled
            return None if compiled is None else run_reference(compiled, runner=self._runner)
        except RPCError:
            raise  # the cluster cannot measure either: stop rather than tune unchecked
        except Exception as e:  # noqa: BLE001 - tune anyway, just without the output check
            ctx.logger.warning("Cannot compute the reference output of task %r (%s); its "
                               "candidates are measured without an output check",
                               ctx.task_name, e)
            return None

    def _send(self, task_id: int, cands: list["MeasureCandidate"]) -> None:
        from workbench.meta_schedule.builder import BuilderInput
        from workbench.meta_schedule.runner import MeasurementInterrupted, RunnerInput
        task = self.tasks_[task_id]
        target = task.ctx.target
        compiling = None
        if task.reference_pending:
            # compiled while the first batch builds (this thread only waits for the builder's
            # workers then), run after it on the runner's idle worker: MakeReference in the
            # profile is what is left to wait for
            task.reference_pending = False
            compiling = _Background(self._compile_reference, task.ctx, self._ref_dir)
        try:
            with Profiler.timeit("SendToBuilder"):
                built = self._builder.build([BuilderInput(c.sch.mod, target) for c in cands])
        except BaseException:
            # the thread is not waited for (an interrupt stops now) and starts no worker;
            # the task's next batch makes the reference again
            task.reference_pending = True if compiling is not None else task.reference_pending
            raise
        if compiling is not None:
            with Profiler.timeit("MakeReference"):
                task.reference = self._make_reference(task.ctx, compiling.result())
        inputs, positions = [], []
        for k, (cand, res) in enumerate(zip(cands, built)):
            if res.error_msg is None:
                inputs.append(RunnerInput(res.artifact_path, "cpu", cand.args_info,
                                          reference=task.reference))
                positions.append(k)
        try:
            with Profiler.timeit("SendToRunner"):
                ran = self._runner.run(inputs) if inputs else []
        except MeasurementInterrupted as stop:
            # Keep the candidates settled before the interrupt (measured, or failed to
            # build) as this task's batch: tune() stores it on the way out.
            ran = stop.futures
            cut = positions[len(ran)] if len(ran) < len(positions) else len(cands)
            self._pending(task, cands[:cut], built[:cut], positions, ran)
            # The user sees the interrupt itself, not the runner's wrapper of it.
            interrupt = stop.__cause__ if isinstance(stop.__cause__, KeyboardInterrupt) \
                else KeyboardInterrupt()
            raise interrupt from None
        self._pending(task, cands, built, positions, ran)

    @staticmethod
    def _pending(task: TaskRecord, cands: list, built: list, positions: list[int],
                 ran: Sequence["RunnerFuture"]) -> None:
        """Make ``cands`` the task's batch in flight: runner futures at ``positions``, build
        failures as finished failed runs."""
        from workbench.meta_schedule.runner import RunnerFuture, RunnerResult
        futures: list[Any] = [None] * len(cands)
        for k, fut in zip(positions, ran):
            if k < len(cands):
                futures[k] = fut
        for k, res in enumerate(built):
            if futures[k] is None:
                failed = RunnerResult(None, res.error_msg or "the runner returned no result")
                futures[k] = RunnerFuture(lambda: True, lambda r=failed: r)
        task.measure_candidates = cands
        task.builder_results = built
        task.runner_futures = futures

    # -- task state ----------------------------------------------------------------------------
    def join_running_task(self, task_id: int) -> list["RunnerResult"]:
        """Wait for the task's runs, notify its strategy, run the callbacks, record latencies."""
        task = self.tasks_[task_id]
        if task.runner_futures is None:
            return []
        with Profiler.timeit("JoinRunnerFutures"):
            results = [f.result() for f in task.runner_futures]
        cands, built = task.measure_candidates, task.builder_results
        self._record_batch(task_id, cands, built, results, notify=True)
        return results

    def measure_batch(self, task_id: int, cands: list["MeasureCandidate"],
                      callbacks: Sequence["MeasureCallback"] | None = None, *,
                      remeasure: bool = False,
                      ) -> tuple[list["BuilderResult"], list["RunnerResult"]]:
        """Build and run ``cands`` of task ``task_id`` now (same builder, runner and output
        check as the search), apply ``callbacks`` (default: the run's measure callbacks) and
        record the latencies, without telling the task's search strategy: post-optimization
        measures its own points. ``remeasure``: the candidates were measured before (the
        confirmation), so they are counted as re-measurements, not trials. Returns the build
        and run results, one per candidate."""
        if getattr(self, "_builder", None) is None:
            raise RuntimeError("measure_batch: the scheduler has no builder and runner yet; "
                               "call tune() first")
        task = self.tasks_[task_id]
        if task.runner_futures is not None:
            raise RuntimeError(f"measure_batch: task #{task_id} still has a batch in flight; "
                               "join it first")
        self._send(task_id, cands)
        with Profiler.timeit("JoinRunnerFutures"):
            results = [f.result() for f in task.runner_futures]
        built = task.builder_results
        if remeasure:
            task.remeasured += len(cands)
        self._record_batch(task_id, cands, built, results, callbacks)
        return built, results

    def _record_batch(self, task_id: int, cands: list["MeasureCandidate"],
                      built: list["BuilderResult"], results: list["RunnerResult"],
                      callbacks: Sequence["MeasureCallback"] | None = None,
                      notify: bool = False) -> None:
        """Take the task's finished batch, tell its strategy (``notify``), apply the measure
        callbacks, record and log its latencies.

        The batch is taken (so it is never committed twice) and stored as one step: an
        interrupt waits until the callbacks that store records (``stores_records``) have
        returned. While the run is ending by an exception, callbacks not
        ``needed_when_stopping`` are skipped."""
        task = self.tasks_[task_id]
        callbacks = list(self.measure_callbacks_ if callbacks is None else callbacks)
        if getattr(self, "_stopping", False):
            callbacks = [cb for cb in callbacks if getattr(cb, "needed_when_stopping", True)]
        stored = 1 + max((i for i, cb in enumerate(callbacks)
                          if getattr(cb, "stores_records", False)), default=-1)
        with _interrupts_held():
            task.measure_candidates = task.builder_results = task.runner_futures = None
            if notify:
                task.ctx.notify_runner_results(cands, results)
            for cb in callbacks[:stored]:
                cb.apply(self, task_id, cands, built, results)
        for cb in callbacks[stored:]:
            cb.apply(self, task_id, cands, built, results)
        log = task.ctx.logger
        name = f"[Task #{task_id}: {task.ctx.task_name}]"
        kept = measured_schedules(task.ctx)
        for cand, b, r in zip(cands, built, results):
            trial = len(task.latency_ms)
            if b.error_msg is not None or r.error_msg is not None or not r.run_secs:
                task.latency_ms.append(FAILED_LATENCY_MS)
                stage = "building" if b.error_msg is not None else "running"
                if stage == "building":
                    task.build_error_count += 1
                    task.first_build_error = task.first_build_error or _first_lines(
                        b.error_msg)
                else:
                    task.run_error_count += 1
                    task.first_run_error = task.first_run_error or _first_lines(
                        r.error_msg or "no run time measured")
                log.info("%s Trial #%d: Error in %s:\n%s\n%s\n%s", name, trial, stage,
                         b.error_msg if b.error_msg is not None else r.error_msg,
                         cand.sch.mod["main"].script(), cand.sch.trace)
                continue
            ms = median(r.run_secs) * 1000.0
            task.latency_ms.append(ms)
            kept.put(cand.sch, ms)
            best = task.best_latency_ms
            log.info("%s Trial #%d: GFLOPs: %.4f. Time: %.4f us. Best GFLOPs: %.4f", name,
                     trial, task.flop / ms / 1e6, ms * 1e3, task.flop / best / 1e6)
        best = task.best_latency_ms
        self.logger.info("%s %d trial(s) done; best %s", name, task.trials,
                         "N/A" if best is None else
                         f"{best * 1e3:.4f} us ({task.flop / best / 1e6:.4f} GFLOPs)")
        self.print_tuning_statistics()

    def touch_task(self, task_id: int) -> None:
        """Join the task if it is alive and all of its runs have finished."""
        task = self.tasks_[task_id]
        if not task.is_terminated and task.runner_futures is not None and \
                all(f.done() for f in task.runner_futures):
            self.join_running_task(task_id)

    def terminate_task(self, task_id: int) -> None:
        task = self.tasks_[task_id]
        if task.is_terminated:
            return
        task.is_terminated = True
        self.remaining_tasks_ -= 1
        self.logger.info("Task #%d has finished. Remaining task(s): %d", task_id,
                         self.remaining_tasks_)
        self.print_tuning_statistics()

    # -- statistics ----------------------------------------------------------------------------
    def tuning_statistics(self) -> str:
        """TVM's statistics table (reference section 9) as text."""
        from workbench.meta_schedule.profiler import _render_table
        rows: list[list[str] | None] = [
            ["ID", "Name", "FLOP", "Weight", "Speed (GFLOPS)", "Latency (us)",
             "Weighted Latency (us)", "Trials", "Done"], None]
        total_trials = 0
        remeasured = 0
        total_latency = 0.0
        for i, task in enumerate(self.tasks_):
            best = task.best_latency_ms
            trials = task.trials
            total_trials += trials
            remeasured += task.remeasured
            if best is None:
                speed = latency = weighted = "N/A"
            else:
                lat_us = best * 1000.0
                speed = f"{task.flop / lat_us / 1000.0:.4f}"
                latency = f"{lat_us:.4f}"
                weighted = f"{lat_us * task.task_weight:.4f}"
                total_latency += lat_us * task.task_weight
            rows.append([str(i), task.ctx.task_name, str(int(task.flop)),
                         str(int(task.task_weight)), speed, latency, weighted, str(trials),
                         "Y" if task.is_terminated else ""])
        rows.append(None)
        again = f" + {remeasured} re-measurements" if remeasured else ""
        return (_render_table(rows) + f"Total trials: {total_trials}{again}\n"
                f"Total latency (us): {total_latency:.6g}\n")

    def print_tuning_statistics(self) -> None:
        """Log the statistics table to the global tuning logger."""
        self.logger.info("\n%s", self.tuning_statistics())

    # -- factory -------------------------------------------------------------------------------
    @staticmethod
    def create(kind: Any = "gradient", *args: Any, **kwargs: Any) -> "TaskScheduler":
        """"gradient" (:class:`GradientBased`, the default) or "round-robin"."""
        from workbench.meta_schedule.task_scheduler.gradient_based import GradientBased
        from workbench.meta_schedule.task_scheduler.round_robin import RoundRobin
        if isinstance(kind, TaskScheduler):
            return kind
        if kind == "gradient":
            return GradientBased(*args, **kwargs)
        if kind == "round-robin":
            return RoundRobin(*args, **kwargs)
        raise ValueError(f"TaskScheduler.create: unknown kind {kind!r}; expected 'gradient' "
                         "or 'round-robin'")


class PyTaskScheduler(TaskScheduler):
    """Base for user schedulers (decorate with ``@derived_object``): implement
    ``next_task_id``; the main loop and the task helpers are inherited."""

    _tvm_metadata = {"cls": TaskScheduler,
                     "methods": ["tune", "next_task_id", "join_running_task", "touch_task"]}


class _Background:
    """``fn(*args)`` run in a thread from construction; :meth:`result` joins it and returns
    its value or raises its exception, here."""

    def __init__(self, fn: Any, *args: Any) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn, args), daemon=True,
                                        name="wb-make-reference")
        self._thread.start()

    def _run(self, fn: Any, args: tuple) -> None:
        try:
            self._value = fn(*args)
        except BaseException as err:  # noqa: BLE001 - handed to the joining thread
            self._error = err

    def result(self) -> Any:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value
