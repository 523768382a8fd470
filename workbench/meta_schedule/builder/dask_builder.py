"""DaskBuilder: compile candidates on the workers of a Dask cluster.

``Builder.create("dask", rpc_config=RPCConfig(...), timeout_sec=30)``. Compilation is the
costly part of a trial; this builder hands each candidate to the cluster as one Dask task,
so every worker thread of the cluster compiles (any worker by default; ``use_key=True``
restricts it to the workers of the config's key). On the worker the task runs
:class:`~workbench.meta_schedule.builder.LocalBuilder`'s job -- ``f_build`` then
``f_export`` -- in one of the worker's *build children* (one per running task, never the
worker process: an LLVM crash ends a child, not the worker), and sends the artifact back as
bytes; the client writes it to a fresh temporary directory, so ``BuilderResult.artifact_path``
is a local file as with LocalBuilder (``RemoveBuildArtifact`` deletes it).

Results and messages mirror LocalBuilder's: ``"DaskBuilder: Timeout, killed after N
seconds"``, ``"DaskBuilder: An exception occurred\\n<traceback>"``, ``"DaskBuilder: The build
process on worker ... crashed: ..."``. A worker dying mid-build makes Dask build it again
elsewhere; a scheduler that is gone for good raises ``ClusterUnavailable`` from ``build``.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any, Callable, Sequence

from workbench.meta_schedule.builder.builder import BuilderInput, BuilderResult, PyBuilder
from workbench.rpc.child import WarmUp
from workbench.rpc.config import RPCConfig

__all__ = ["DaskBuilder"]

PREFIX = "DaskBuilder: "
BUILD_MODULES = ("workbench.codegen", "workbench.meta_schedule.builder.local_builder")


def _build_to_bytes(mod: Any, target: Any, params: Any, f_build: Any,
                    f_export: Any) -> tuple[str, bytes]:
    """In the build child: LocalBuilder's job, then the artifact's name and bytes."""
    from workbench.meta_schedule.builder.local_builder import _build_job

    path = _build_job(mod, target, params, f_build, f_export)
    try:
        with open(path, "rb") as f:
            return os.path.basename(path), f.read()
    finally:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def _build_task(mod: Any, target: Any, params: Any, f_build: Any, f_export: Any,
                timeout: float | None, initializer: Any) -> dict:
    """The Dask task: build in one of this worker's build children."""
    from workbench.rpc.server import isolated_call, worker_address

    out = isolated_call("build", _build_to_bytes, (mod, target, params, f_build, f_export),
                        timeout, initializer=initializer)
    value = out.value if out.kind == "ok" else None if out.value is None else str(out.value)
    return {"kind": out.kind, "value": value, "worker": worker_address()}


class DaskBuilder(PyBuilder):
    """Builds on a Dask cluster (see the module docstring). ``f_build`` / ``f_export`` /
    ``initializer`` as LocalBuilder's (module-level functions importable on the workers)."""

    def __init__(self, rpc_config: RPCConfig | None = None, timeout_sec: float = 30.0,
                 f_build: Callable | str | None = None, f_export: Callable | str | None = None,
                 initializer: Callable[[], None] | None = None, use_key: bool = False,
                 max_workers: int | None = None, reconnect_timeout_sec: float = 30.0) -> None:
        if timeout_sec is not None and timeout_sec <= 0:
            raise ValueError(f"DaskBuilder: timeout_sec must be > 0, got {timeout_sec}")
        if max_workers is not None and max_workers < 1:
            raise ValueError(f"DaskBuilder: max_workers must be >= 1 or None, got "
                             f"{max_workers}")
        if rpc_config is not None and not isinstance(rpc_config, RPCConfig):
            raise TypeError(f"DaskBuilder: rpc_config must be an RPCConfig, got "
                            f"{type(rpc_config).__name__}")
        self.rpc_config = (rpc_config or RPCConfig())._normalized()
        self.timeout_sec = timeout_sec
        self.f_build = f_build
        self.f_export = f_export
        self.initializer = initializer
        self.use_key = use_key
        self.max_workers = max_workers
        self.reconnect_timeout_sec = reconnect_timeout_sec

    def cluster(self) -> Any:
        return self.rpc_config.cluster()

    def build(self, build_inputs: Sequence[BuilderInput]) -> list[BuilderResult]:
        from workbench.rpc.tasks import ClusterJob, TaskFailed, ready_workers, run_jobs

        cluster = self.cluster()
        key = self.rpc_config.tracker_key if self.use_key else None
        ready_workers(cluster, key, self.reconnect_timeout_sec,
                      self.rpc_config.session_timeout_sec, "build")
        resources = {key: 1} if key is not None and not cluster.is_local else None
        jobs = [ClusterJob(cluster, _build_task,
                           (bi.mod, bi.target, bi.params, self.f_build, self.f_export,
                            self.timeout_sec, WarmUp(BUILD_MODULES, self.initializer)),
                           resources=resources, reconnect_timeout=self.reconnect_timeout_sec,
                           what="build") for bi in build_inputs]
        run_jobs(jobs, self.max_workers)
        results = []
        for job in jobs:
            try:
                out = job.result()
            except TaskFailed as err:
                results.append(BuilderResult(None, f"{PREFIX}An exception occurred\n{err}"))
                continue
            results.append(self._result(out))
        return results

    def _result(self, out: dict) -> BuilderResult:
        kind, value, worker = out["kind"], out["value"], out["worker"]
        if kind == "ok":
            name, data = value
            folder = tempfile.mkdtemp(prefix="workbench_ms_build_")
            path = os.path.join(folder, name)
            with open(path, "wb") as f:
                f.write(data)
            return BuilderResult(path, None)
        if kind == "timeout":
            return BuilderResult(None, f"{PREFIX}Timeout, killed after {self.timeout_sec} "
                                       f"seconds (worker {worker})")
        if kind == "error":
            return BuilderResult(None, f"{PREFIX}An exception occurred on worker {worker}\n"
                                       f"{value}")
        return BuilderResult(None, f"{PREFIX}The build process on worker {worker} crashed: "
                                   f"{value}")

    def __repr__(self) -> str:
        return (f"DaskBuilder(address={self.rpc_config.address!r}, "
                f"timeout_sec={self.timeout_sec})")
