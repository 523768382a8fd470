"""LocalRunner: measure built candidates in one isolated, persistent worker process.

For each input, in order (TVM's LocalRunner, run serially; the returned futures are done):

1. the worker loads the artifact (``workbench.runtime.load_module``);
2. if the input has a ``reference``, it calls the candidate once on the seeded inputs and
   checks every argument (:mod:`.reference`; weights that ``RewriteLayout`` packed are packed
   from the reference's inputs by the artifact's own packing functions first); a mismatch
   gives ``"LocalRunner: wrong result: max abs error ..."`` and no timing;
3. ``f_alloc_argument(device, args_info_json, alloc_repeat)`` makes the argument sets (seeded
   random data by default), ``f_run_evaluator(rt_mod, device, evaluator_config, sets)`` times
   the entry function (``time_evaluator``: one warm-up, ``repeat`` measurements of ``number``
   calls grown to ``min_repeat_ms``) and returns seconds, ``f_cleanup()`` runs last.

The worker is a separate process (a :class:`workbench.workers.WorkerPool` of one), so a
kernel that crashes it (a segfault) gives ``"LocalRunner: The worker process crashed:
...signal SIGSEGV..."`` and one that hangs gives ``"LocalRunner: Timeout, killed after N
seconds"``; an exception gives ``"LocalRunner: An exception occurred\\n<traceback>"``. The
worker is replaced and the next candidate is measured. The timeout covers one candidate's
load, check and measurement, not the worker's start-up. If no worker process can start at
all, one warning says why and candidates are measured in the tuning process from then on.

Interrupted (``KeyboardInterrupt``) in the middle of a batch, ``run`` raises
:class:`MeasurementInterrupted` (a ``KeyboardInterrupt``) carrying the futures of the
candidates measured so far, so the task scheduler can store them before the interrupt ends
the tuning run.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable, Sequence

from workbench.meta_schedule.runner.config import EvaluatorConfig
from workbench.meta_schedule.runner.runner import (
    LocalRunnerFuture, MeasurementInterrupted, PyRunner, RunnerFuture, RunnerInput,
)
from workbench.meta_schedule.runner.utils import (
    default_alloc_argument, default_cleanup, default_run_evaluator,
)
from workbench.runtime.registry import resolve_func
from workbench.workers import Chain, WorkerPool

__all__ = ["LocalRunner", "LocalRunnerFuture", "MeasurementInterrupted"]

T_ALLOC_ARGUMENT = Callable[[Any, list, int], list]
T_RUN_EVALUATOR = Callable[[Any, Any, EvaluatorConfig, list], list]
T_CLEANUP = Callable[[], None]

WRONG_RESULT_PREFIX = "LocalRunner: wrong result: "


def _run_job(artifact_path: str, device_type: str, args_json: list,
             evaluator_config: EvaluatorConfig, alloc_repeat: int, f_alloc_argument: Any,
             f_run_evaluator: Any, f_cleanup: Any, reference: str | None) -> dict:
    """Worker job: load, check, allocate, time, clean up (see the module docstring)."""
    from workbench.meta_schedule.runner.reference import WrongResult, check_arguments
    from workbench.runtime import device, load_module

    try:
        rt_mod = load_module(artifact_path)
        dev = device(device_type, 0)
        if reference:
            try:
                check_arguments(rt_mod, dev, args_json, reference)
            except WrongResult as err:
                return {"wrong": str(err)}
        alloc = resolve_func(f_alloc_argument, default_alloc_argument)
        repeated = alloc(dev, args_json, alloc_repeat)
        evaluate = resolve_func(f_run_evaluator, default_run_evaluator)
        costs = evaluate(rt_mod, dev, evaluator_config, repeated)
        return {"run_secs": [float(c) for c in costs]}
    finally:
        resolve_func(f_cleanup, default_cleanup)()


def _warm_up() -> None:
    import workbench.meta_schedule.runner.reference  # noqa: F401 - numpy, runtime, registry
    import workbench.runtime  # noqa: F401


class LocalRunner(PyRunner):
    """Measures on this machine in an isolated worker (see the module docstring).

    ``timeout_sec`` bounds one candidate; ``evaluator_config`` defaults to
    ``EvaluatorConfig()``; ``cooldown_sec`` sleeps between candidates (TVM ignores it);
    ``alloc_repeat`` argument sets are timed per candidate; ``f_alloc_argument``,
    ``f_run_evaluator``, ``f_cleanup`` replace the steps (importable module-level callables or
    names of registered global functions, resolved in the worker); ``initializer`` runs once in
    each new worker.
    """

    def __init__(self, timeout_sec: float = 30, evaluator_config: EvaluatorConfig | None = None,
                 cooldown_sec: float = 0.0, alloc_repeat: int = 1,
                 f_alloc_argument: T_ALLOC_ARGUMENT | str | None = None,
                 f_run_evaluator: T_RUN_EVALUATOR | str | None = None,
                 f_cleanup: T_CLEANUP | str | None = None,
                 initializer: Callable[[], None] | None = None) -> None:
        if timeout_sec is not None and timeout_sec <= 0:
            raise ValueError(f"LocalRunner: timeout_sec must be > 0, got {timeout_sec}")
        if alloc_repeat < 1:
            raise ValueError(f"LocalRunner: alloc_repeat must be >= 1, got {alloc_repeat}")
        self.timeout_sec = timeout_sec
        self.evaluator_config = EvaluatorConfig._normalized(evaluator_config)
        self.cooldown_sec = cooldown_sec
        self.alloc_repeat = alloc_repeat
        self.f_alloc_argument = f_alloc_argument
        self.f_run_evaluator = f_run_evaluator
        self.f_cleanup = f_cleanup
        self.initializer = initializer
        self._pool = WorkerPool(1, Chain(_warm_up, initializer), name="wb-run",
                                label="LocalRunner",
                                fallback="measuring in this process from now on (no time "
                                         "limit; a crashing kernel would end this process)",
                                logger=logging.getLogger("workbench.meta_schedule"))

    def run(self, runner_inputs: Sequence[RunnerInput]) -> list[RunnerFuture]:
        futures: list[RunnerFuture] = []
        try:
            for i, ri in enumerate(runner_inputs):
                if i and self.cooldown_sec > 0:
                    time.sleep(self.cooldown_sec)
                futures.append(self._run_one(ri))
        except KeyboardInterrupt as err:
            raise MeasurementInterrupted(futures) from err
        return futures

    def _run_one(self, ri: RunnerInput) -> LocalRunnerFuture:
        args_json = [a.as_json() for a in ri.args_info]
        out = self._pool.call(_run_job, (
            ri.artifact_path, ri.device_type, args_json, self.evaluator_config,
            self.alloc_repeat, self.f_alloc_argument, self.f_run_evaluator, self.f_cleanup,
            ri.reference), self.timeout_sec)
        if out.kind == "ok":
            if "wrong" in out.value:
                return LocalRunnerFuture(None, WRONG_RESULT_PREFIX + out.value["wrong"])
            return LocalRunnerFuture(out.value["run_secs"], None)
        if out.kind == "timeout":
            return LocalRunnerFuture(None, f"LocalRunner: Timeout, killed after "
                                           f"{self.timeout_sec} seconds")
        if out.kind == "error":
            return LocalRunnerFuture(None, f"LocalRunner: An exception occurred\n{out.value}")
        return LocalRunnerFuture(None, f"LocalRunner: The worker process crashed: "
                                       f"{out.value}")

    @property
    def worker_startup_seconds(self) -> float | None:
        """How long the last worker start took (None before the first run)."""
        return self._pool.startup_seconds

    @property
    def worker_pid(self) -> int | None:
        """Process id of the measurement worker (None when none is running)."""
        pids = self._pool.pids
        return pids[0] if pids else None

    def prestart(self) -> None:
        """Start the measurement worker processes in the background, without waiting for them (the
        task scheduler does so as a run begins: their start-up, ~1 s of imports each, then
        overlaps the design spaces and the first search, which leave a core idle, instead of
        delaying the first batch)."""
        self._pool.prestart()

    def shutdown(self) -> None:
        """Stop the worker now (it also stops when the runner is collected)."""
        self._pool.shutdown()

    def __repr__(self) -> str:
        return (f"LocalRunner(timeout_sec={self.timeout_sec}, "
                f"evaluator_config={self.evaluator_config})")

