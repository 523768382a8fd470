"""The runner interface (TVM's ``meta_schedule.runner``): artifacts in, run times out.

Beyond TVM, :class:`RunnerInput` may carry a ``reference``: the path of a file made by
:func:`workbench.meta_schedule.runner.make_reference` (an ``.npz`` of the expected outputs of
the *unscheduled* function on the runner's fixed, seeded inputs), or the path of a built
artifact of the unscheduled function (the runner then runs it on the same inputs). The runner
compares every argument after one call of the candidate (outputs against the expected values
with dtype-appropriate tolerances, inputs against their initial values) and reports a mismatch
as ``"LocalRunner: wrong result: max abs error ..."``, so a wrong kernel is a failed
measurement and never becomes the best record.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from workbench.meta_schedule.arg_info import ArgInfo

__all__ = ["RunnerInput", "RunnerResult", "RunnerFuture", "Runner", "PyRunner",
           "MeasurementInterrupted"]


class RunnerInput:
    """What to measure: the built artifact, the device type ("cpu"), the arguments, and an
    optional output ``reference`` (see the module docstring)."""

    def __init__(self, artifact_path: str, device_type: str, args_info: Sequence[ArgInfo],
                 reference: str | None = None) -> None:
        self.artifact_path = artifact_path
        self.device_type = device_type
        self.args_info = list(args_info)
        self.reference = reference

    def __repr__(self) -> str:
        ref = f", reference={self.reference!r}" if self.reference else ""
        return (f"RunnerInput({self.artifact_path!r}, {self.device_type!r}, "
                f"{self.args_info}{ref})")


class RunnerResult:
    """``run_secs`` (seconds, one per repeat and allocation) or ``error_msg``; ``worker``
    (Workbench) names the cluster worker that measured it ("rpc" runner), None locally."""

    def __init__(self, run_secs: Sequence[float] | None, error_msg: str | None,
                 worker: str | None = None) -> None:
        self.run_secs = None if run_secs is None else [float(s) for s in run_secs]
        self.error_msg = error_msg
        self.worker = worker

    def __repr__(self) -> str:
        if self.error_msg is not None:
            first = self.error_msg.splitlines()[0] if self.error_msg else ""
            return f"RunnerResult(error_msg={first!r})"
        return f"RunnerResult(run_secs={self.run_secs})"


class RunnerFuture:
    """A pending measurement: ``done()`` polls, ``result()`` waits for the RunnerResult."""

    def __init__(self, f_done: Callable[[], bool], f_result: Callable[[], RunnerResult]) -> None:
        self.f_done = f_done
        self.f_result = f_result

    def done(self) -> bool:
        return bool(self.f_done())

    def result(self) -> RunnerResult:
        return self.f_result()


class LocalRunnerFuture(RunnerFuture):
    """An already finished measurement (what :class:`LocalRunner` returns)."""

    def __init__(self, res: Sequence[float] | None, error_message: str | None = None) -> None:
        self._result = RunnerResult(res, error_message)
        super().__init__(lambda: True, lambda: self._result)


class MeasurementInterrupted(KeyboardInterrupt):
    """Raised by a runner's ``run`` interrupted by the user (Ctrl-C, a Jupyter interrupt) in
    the middle of a batch: ``futures`` are the finished measurements of its first
    ``len(futures)`` inputs, in order, which the task scheduler stores before the interrupt
    ends the tuning run (Workbench; TVM loses them). It is a ``KeyboardInterrupt``, so code
    that does not know it sees the interrupt it is."""

    def __init__(self, futures: Sequence[RunnerFuture]) -> None:
        super().__init__(f"interrupted after {len(futures)} measurement(s)")
        self.futures = list(futures)


class Runner:
    """The abstract runner: ``run(inputs) -> futures``, one per input, in order."""

    def run(self, runner_inputs: Sequence[RunnerInput]) -> list[RunnerFuture]:
        raise NotImplementedError(f"{type(self).__name__}.run")

    @staticmethod
    def create(kind: str = "local", *args: Any, **kwargs: Any) -> "Runner":
        """"local" (:class:`LocalRunner`) or "rpc" (:class:`RPCRunner`: measure on the
        workers of a Dask cluster; ``rpc_config=RPCConfig(...)``)."""
        if kind == "local":
            from workbench.meta_schedule.runner.local_runner import LocalRunner
            kwargs.pop("max_workers", None)  # as TVM: ignored for the local runner
            return LocalRunner(*args, **kwargs)
        if kind == "rpc":
            from workbench.meta_schedule.runner.rpc_runner import RPCRunner
            return RPCRunner(*args, **kwargs)
        raise ValueError(f"Runner.create: unknown kind {kind!r}; expected 'local' or 'rpc'")


class PyRunner(Runner):
    """Base for runners written in Python: override :meth:`run`."""

    _tvm_metadata = {"cls": Runner, "methods": ["run"]}
