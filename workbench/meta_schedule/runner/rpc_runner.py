"""RPCRunner: measure candidates on the workers of a Dask cluster (TVM's ``RPCRunner``).

``Runner.create("rpc", rpc_config=RPCConfig(...), evaluator_config=..., max_workers=...)``.
Each candidate is one Dask task asking for one unit of the config's key (a worker resource),
so every worker offering the key measures one candidate at a time and the cluster's workers
measure in parallel. On the worker the task runs, in the worker's *measuring child process*
(:func:`workbench.rpc.server.isolated_call`, kind "measure"; never in the worker process),
exactly what :class:`~workbench.meta_schedule.runner.LocalRunner` runs: load the artifact,
check its output against the task's reference, allocate the arguments, time the entry
function. Results and their messages mirror the LocalRunner's, with the worker named:

- ``RunnerResult(run_secs, None, worker="tcp://...")``;
- ``"RPCRunner: wrong result: ..."`` (the output check failed; no timing);
- ``"RPCRunner: Timeout, killed after N seconds (worker ...)"`` (``session_timeout_sec``
  bounds load, check and timing of one candidate, as TVM's server-side session timeout);
- ``"RPCRunner: The measuring process on worker ... crashed: ...signal SIGSEGV..."`` (the
  worker itself is unaffected and measures the next candidate);
- ``"RPCRunner: An exception occurred on worker ...\\n<traceback>"``.

The artifact travels as bytes with the task (object code, a few KB), and so does the output
reference (kept in a per-worker cache by content hash); a result whose task carried a
reference but did not report a passed check is refused, never taken. References themselves
are computed on a worker of the key (:meth:`RPCRunner.compute_reference`), so a target the
client's CPU cannot run is still checked.

Faults: a worker that dies mid-measurement makes Dask run the task again elsewhere (one
result, counted once); a lost scheduler connection is waited for and the candidate
resubmitted; a scheduler that stays away raises ``ClusterUnavailable`` from
``future.result()``, which ends tuning cleanly (see :mod:`workbench.rpc.tasks`).

Timing: workers on one machine measure at the same time and share its cores (the in-process
cluster's workers all do). For timings to trust, give each machine one worker offering the
key with one unit (``--resources "KEY=1"``), as TVM runs one RPC server per device.

``f_alloc_argument``, ``f_run_evaluator``, ``f_cleanup`` and ``initializer`` take the
LocalRunner's signatures and run on the worker (module-level functions importable there).
TVM's ``f_create_session`` / ``f_upload_module`` have no counterpart: sessions and uploads are
not part of a measurement here.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import socket
import tempfile
import threading
from typing import Any, Callable, Sequence

from workbench.meta_schedule.runner.config import EvaluatorConfig
from workbench.meta_schedule.runner.runner import (
    PyRunner, RunnerFuture, RunnerInput, RunnerResult,
)
from workbench.rpc.child import WarmUp
from workbench.rpc.config import RPCConfig

__all__ = ["RPCRunner", "RPCRunnerFuture"]

PREFIX = "RPCRunner: "


# ---- on the worker ----------------------------------------------------------------------------

_REF_LOCK = threading.Lock()


def _reference_file(name: str, data: bytes) -> str:
    """The reference in this worker's cache (written once per content)."""
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    folder = os.path.join(tempfile.gettempdir(), "workbench_rpc_references")
    path = os.path.join(folder, f"{digest}_{os.path.basename(name)}")
    with _REF_LOCK:
        if not os.path.exists(path):
            os.makedirs(folder, exist_ok=True)
            tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.part"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, path)
            _prune(folder, keep=REFERENCES_KEPT)
    return path


REFERENCES_KEPT = 32


def _prune(folder: str, keep: int) -> None:
    """Drop the oldest cached references beyond ``keep`` (one per tuning task)."""
    try:
        entries = sorted((e for e in os.scandir(folder) if e.name.endswith(".npz")),
                         key=lambda e: e.stat().st_mtime)
        for entry in entries[:-keep]:
            os.remove(entry.path)
    except OSError:
        pass  # another worker on this machine pruned first


MEASURE_MODULES = ("workbench.meta_schedule.runner.local_runner",
                   "workbench.meta_schedule.runner.reference")


def _measure_checked(artifact: str, device_type: str, args_json: list,
                     evaluator_config: EvaluatorConfig, alloc_repeat: int, f_alloc: Any,
                     f_run: Any, f_cleanup: Any, reference: str | None) -> dict:
    """In the measuring child: LocalRunner's job, plus whether the output check ran."""
    from workbench.meta_schedule.runner.local_runner import _run_job

    out = _run_job(artifact, device_type, args_json, evaluator_config, alloc_repeat, f_alloc,
                   f_run, f_cleanup, reference)
    if "run_secs" in out:
        out["checked"] = bool(reference)
    return out


def _measure_task(job: dict) -> dict:
    """The Dask task: unpack the artifact and reference, measure in the worker's measuring
    child, report where it ran."""
    from workbench.rpc.server import isolated_call, worker_address

    tmp = tempfile.mkdtemp(prefix="workbench_rpc_measure_")
    try:
        artifact = os.path.join(tmp, job["artifact_name"])
        with open(artifact, "wb") as f:
            f.write(job["artifact"])
        reference = None
        if job["reference"] is not None:
            reference = _reference_file(job["reference_name"], job["reference"])
        out = isolated_call("measure", _measure_checked, (
            artifact, job["device_type"], job["args_json"], job["evaluator_config"],
            job["alloc_repeat"], job["f_alloc_argument"], job["f_run_evaluator"],
            job["f_cleanup"], reference), job["timeout"], initializer=job["initializer"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    value = out.value if out.kind == "ok" else str(out.value) if out.value is not None else None
    return {"kind": out.kind, "value": value, "worker": worker_address(),
            "host": socket.gethostname()}


def _reference_task(obj: bytes, args_json: list, outputs: list, timeout: float,
                    initializer: Any) -> dict:
    """The Dask task behind :meth:`RPCRunner.compute_reference`: run the unscheduled
    function on the worker, return the reference ``.npz`` as bytes."""
    from workbench.rpc.server import isolated_call, worker_address

    tmp = tempfile.mkdtemp(prefix="workbench_rpc_reference_")
    try:
        obj_path = os.path.join(tmp, "reference.o")
        out_path = os.path.join(tmp, "reference.npz")
        with open(obj_path, "wb") as f:
            f.write(obj)
        from workbench.meta_schedule.runner.reference import _compute_reference
        out = isolated_call("measure", _compute_reference,
                            (obj_path, args_json, outputs, out_path), timeout,
                            initializer=initializer)
        data = None
        if out.kind == "ok":
            with open(out_path, "rb") as f:
                data = f.read()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return {"kind": out.kind, "value": None if out.value is None else str(out.value),
            "data": data, "worker": worker_address()}


# ---- on the client ----------------------------------------------------------------------------

class RPCRunnerFuture(RunnerFuture):
    """A measurement on the cluster: ``done()`` polls Dask, ``result()`` waits (and may raise
    ``ClusterUnavailable``; see the module docstring)."""

    def __init__(self, job: Any, timeout: float, checked: bool) -> None:
        self._job = job
        self._timeout = timeout
        self._checked = checked
        self._result: RunnerResult | None = None
        super().__init__(self._done, self._get)

    def _done(self) -> bool:
        return self._result is not None or self._job.done()

    def _get(self) -> RunnerResult:
        if self._result is None:
            self._result = self._convert()
        return self._result

    def _convert(self) -> RunnerResult:
        from workbench.rpc.tasks import TaskFailed

        try:
            out = self._job.result()
        except TaskFailed as err:
            if err.killed_workers:
                return RunnerResult(None, f"{PREFIX}every worker that measured this candidate "
                                          f"died while doing so ({err.cause})")
            return RunnerResult(None, f"{PREFIX}An exception occurred\n{err}")
        worker, kind, value = out["worker"], out["kind"], out["value"]
        if kind == "ok":
            if "wrong" in value:
                return RunnerResult(None, f"{PREFIX}wrong result: {value['wrong']}",
                                    worker=worker)
            if self._checked and not value.get("checked"):
                return RunnerResult(None, f"{PREFIX}the output check did not run on "
                                          f"{worker}; the timing is not used", worker=worker)
            return RunnerResult(value["run_secs"], None, worker=worker)
        if kind == "timeout":
            return RunnerResult(None, f"{PREFIX}Timeout, killed after {self._timeout:g} "
                                      f"seconds (worker {worker})", worker=worker)
        if kind == "error":
            return RunnerResult(None, f"{PREFIX}An exception occurred on worker {worker}\n"
                                      f"{value}", worker=worker)
        return RunnerResult(None, f"{PREFIX}The measuring process on worker {worker} "
                                  f"crashed: {value}", worker=worker)


class RPCRunner(PyRunner):
    """Measures on a Dask cluster's workers of one key (see the module docstring).

    ``rpc_config``: where (an :class:`~workbench.rpc.RPCConfig`; None reads the options
    ``rpc_address`` / ``rpc_key``). ``evaluator_config``: how to time. ``max_workers``: at
    most this many candidates in flight (None: all of a batch are handed to Dask, which
    gives each worker of the key one at a time). ``cooldown_sec`` is accepted and unused, as
    in TVM. ``reconnect_timeout_sec``: how long a lost scheduler may take to come back.
    """

    def __init__(self, rpc_config: RPCConfig | None = None,
                 evaluator_config: EvaluatorConfig | None = None, cooldown_sec: float = 0.0,
                 alloc_repeat: int = 1, f_create_session: Any = None,
                 f_upload_module: Any = None, f_alloc_argument: Callable | str | None = None,
                 f_run_evaluator: Callable | str | None = None,
                 f_cleanup: Callable | str | None = None, max_workers: int | None = None,
                 initializer: Callable[[], None] | None = None,
                 reconnect_timeout_sec: float = 30.0) -> None:
        if f_create_session is not None or f_upload_module is not None:
            raise TypeError("RPCRunner: f_create_session and f_upload_module do not exist here "
                            "(candidates are measured by a task on the worker, not through a "
                            "session); use f_alloc_argument / f_run_evaluator / f_cleanup")
        if alloc_repeat < 1:
            raise ValueError(f"RPCRunner: alloc_repeat must be >= 1, got {alloc_repeat}")
        if max_workers is not None and max_workers < 1:
            raise ValueError(f"RPCRunner: max_workers must be >= 1 or None, got {max_workers}")
        if rpc_config is not None and not isinstance(rpc_config, RPCConfig):
            raise TypeError(f"RPCRunner: rpc_config must be an RPCConfig, got "
                            f"{type(rpc_config).__name__}")
        self.rpc_config = (rpc_config or RPCConfig())._normalized()
        self.evaluator_config = EvaluatorConfig._normalized(evaluator_config)
        self.cooldown_sec = cooldown_sec
        self.alloc_repeat = alloc_repeat
        self.f_alloc_argument = f_alloc_argument
        self.f_run_evaluator = f_run_evaluator
        self.f_cleanup = f_cleanup
        self.max_workers = max_workers
        self.initializer = initializer
        self.reconnect_timeout_sec = reconnect_timeout_sec
        self._files: dict[str, tuple[float, bytes]] = {}

    @property
    def key(self) -> str | None:
        return self.rpc_config.tracker_key

    def cluster(self) -> Any:
        """The cluster this runner measures on (connected on first use)."""
        return self.rpc_config.cluster()

    def workers(self) -> list:
        """The workers that offer the key now."""
        return self.cluster().workers(self.key)

    def _resources(self, cluster: Any) -> dict | None:
        return {self.key: 1} if self.key is not None and not cluster.is_local else None

    def _read(self, path: str) -> bytes:
        mtime = os.path.getmtime(path)
        hit = self._files.get(path)
        if hit is None or hit[0] != mtime:
            with open(path, "rb") as f:
                hit = self._files[path] = (mtime, f.read())
            while len(self._files) > 8:
                self._files.pop(next(iter(self._files)))
        return hit[1]

    def run(self, runner_inputs: Sequence[RunnerInput]) -> list[RunnerFuture]:
        from workbench.rpc.tasks import ClusterJob, ready_workers, run_jobs

        cluster = self.cluster()
        ready_workers(cluster, self.key, self.reconnect_timeout_sec,
                      self.rpc_config.session_timeout_sec, "measurement")
        timeout = float(self.rpc_config.session_timeout_sec)
        jobs, futures = [], []
        for ri in runner_inputs:
            with open(ri.artifact_path, "rb") as f:
                artifact = f.read()
            job = {
                "artifact_name": os.path.basename(ri.artifact_path), "artifact": artifact,
                "device_type": ri.device_type,
                "args_json": [a.as_json() for a in ri.args_info],
                "evaluator_config": self.evaluator_config, "alloc_repeat": self.alloc_repeat,
                "f_alloc_argument": self.f_alloc_argument,
                "f_run_evaluator": self.f_run_evaluator, "f_cleanup": self.f_cleanup,
                "reference_name": os.path.basename(ri.reference) if ri.reference else None,
                "reference": self._read(ri.reference) if ri.reference else None,
                "timeout": timeout,
                "initializer": WarmUp(MEASURE_MODULES, self.initializer),
            }
            cjob = ClusterJob(cluster, _measure_task, (job,), resources=self._resources(cluster),
                              priority=self.rpc_config.session_priority,
                              reconnect_timeout=self.reconnect_timeout_sec,
                              what="measurement")
            jobs.append(cjob)
            futures.append(RPCRunnerFuture(cjob, timeout, checked=bool(ri.reference)))
        run_jobs(jobs, self.max_workers)
        return futures

    def compute_reference(self, obj_path: str, args_json: list, outputs: list,
                          out_path: str, timeout_sec: float) -> str:
        """Run the unscheduled function (object code at ``obj_path``) on a worker of the key
        and write its reference to ``out_path`` (``make_reference``'s hook); raises
        ``RuntimeError`` naming the worker when the function fails there."""
        from workbench.rpc.tasks import ClusterJob, TaskFailed, ready_workers

        cluster = self.cluster()
        ready_workers(cluster, self.key, self.reconnect_timeout_sec,
                      self.rpc_config.session_timeout_sec, "reference run")
        with open(obj_path, "rb") as f:
            obj = f.read()
        job = ClusterJob(cluster, _reference_task,
                         (obj, args_json, outputs, timeout_sec,
                          WarmUp(MEASURE_MODULES, self.initializer)),
                         resources=self._resources(cluster),
                         priority=self.rpc_config.session_priority + 1,
                         reconnect_timeout=self.reconnect_timeout_sec, what="reference run")
        job.submit()
        try:
            out = job.result()
        except TaskFailed as err:
            raise RuntimeError(f"make_reference: the reference task failed: {err}") from None
        if out["kind"] != "ok":
            detail = {"timeout": f"timed out after {timeout_sec} seconds"}.get(
                out["kind"], out["value"])
            raise RuntimeError(f"make_reference: the unscheduled function failed on "
                               f"{out['worker']}: {detail}")
        tmp = f"{out_path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(out["data"])
        os.replace(tmp, out_path)
        return out_path

    def __repr__(self) -> str:
        return (f"RPCRunner(address={self.rpc_config.address!r}, key={self.key!r}, "
                f"evaluator_config={self.evaluator_config})")
