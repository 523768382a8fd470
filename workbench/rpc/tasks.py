"""One job on the cluster, with the recovery the tuner needs: :class:`ClusterJob`.

Dask already reruns a task whose worker died while running it (on another worker, or on the
same one after its nanny restarted it), so a killed worker costs a re-measurement, never a
result. What Dask leaves to its client is the *scheduler* going away: every pending future is
cancelled ("scheduler-connection-lost") and the client tries to reconnect. A ClusterJob then
waits up to ``reconnect_timeout`` seconds for the connection to come back and submits itself
again (at most ``max_resubmits`` times); a job yields its result at most once, so nothing is
counted twice. If the scheduler does not come back, :meth:`ClusterJob.result` raises
:class:`~workbench.rpc.base.ClusterUnavailable`, which ends a tuning run cleanly.

Other outcomes are returned, not hidden: the task's own exception (or Dask's
``KilledWorker``, when the task was running on worker after worker that died) is raised as
:class:`TaskFailed`, for the caller to record as a failed build or measurement.
"""
from __future__ import annotations

import concurrent.futures as cf
import threading
from typing import Any, Callable, Sequence

from workbench.rpc.base import ClusterUnavailable
from workbench.rpc.cluster import Cluster

__all__ = ["ClusterJob", "TaskFailed", "run_jobs", "ready_workers"]


def ready_workers(cluster: Cluster, key: str | None, reconnect_timeout: float,
                  worker_timeout: float, what: str) -> list:
    """The workers offering ``key``, once the client is connected: a lost connection is
    waited for (``reconnect_timeout``), then a first matching worker (``worker_timeout``).
    ``ClusterUnavailable`` / ``NoMatchingWorker`` say which wait failed."""
    if not cluster.wait_until_running(reconnect_timeout):
        raise ClusterUnavailable(
            f"the Dask scheduler at {cluster.address} is unreachable (client status "
            f"{cluster.status!r}) and did not come back within {reconnect_timeout:g} s, so no "
            f"{what} can start. Tuning stops here: everything measured before is in the "
            "database; run again with the same work_dir when the cluster is back")
    return cluster.wait_for_workers(key, worker_timeout)


def _connection_lost(err: BaseException) -> bool:
    """Cancelled (Dask cancels every future when the scheduler connection drops) or a comm
    error (``CommClosedError`` is an ``OSError``)."""
    return isinstance(err, (cf.CancelledError, OSError, TimeoutError))


class TaskFailed(Exception):
    """The job's task ended with an exception on the cluster (``cause`` is it)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.cause = cause

    @property
    def killed_workers(self) -> bool:
        """Dask gave up on the task after the workers running it died
        (``distributed.scheduler.allowed-failures``)."""
        return type(self.cause).__name__ == "KilledWorker"


class ClusterJob:
    """``fn(*args)`` as a Dask task (module docstring). ``resources`` and ``priority`` are
    Dask's; ``what`` names the job in error messages."""

    def __init__(self, cluster: Cluster, fn: Callable[..., Any], args: Sequence[Any], *,
                 resources: dict | None = None, priority: int = 0,
                 reconnect_timeout: float = 30.0, max_resubmits: int = 2,
                 what: str = "job") -> None:
        self.cluster = cluster
        self.fn = fn
        self.args = tuple(args)
        self.resources = resources
        self.priority = priority
        self.reconnect_timeout = reconnect_timeout
        self.max_resubmits = max_resubmits
        self.what = what
        self.resubmits = 0
        self._future: Any = None
        self._submitted = threading.Event()
        self._error: BaseException | None = None

    def submit(self) -> None:
        """Hand the task to the scheduler (once; later calls resubmit after a loss)."""
        try:
            self._future = self.cluster.client.submit(
                self.fn, *self.args, pure=False, resources=self.resources,
                priority=self.priority)
        except Exception as err:  # noqa: BLE001 - a closed client, or arguments Dask refuses
            self._error = self._unavailable(err) if _connection_lost(err) or \
                self.cluster.status != "running" else TaskFailed(err)
        finally:
            self._submitted.set()

    def fail(self, err: BaseException) -> None:
        """Never submit: ``result()`` raises ``err`` (a dispatcher that could not go on)."""
        self._error = err
        self._submitted.set()

    @property
    def submitted(self) -> bool:
        return self._submitted.is_set()

    def done(self) -> bool:
        if self._error is not None:
            return True
        return self._future is not None and self._future.done()

    def dask_future(self) -> Any:
        return self._future

    def _unavailable(self, err: BaseException | None) -> ClusterUnavailable:
        detail = f" ({type(err).__name__}: {err})" if err is not None else ""
        return ClusterUnavailable(
            f"lost the Dask scheduler at {self.cluster.address} during a {self.what} and it "
            f"did not come back within {self.reconnect_timeout:g} s{detail}. Tuning stops "
            "here: everything measured before is in the database; run again with the same "
            "work_dir when the cluster is back")

    def result(self) -> Any:
        """The task's return value; :class:`TaskFailed` if it raised; ClusterUnavailable if
        the scheduler went away for good."""
        self._submitted.wait()
        while True:
            if self._error is not None:
                raise self._error
            future = self._future
            try:
                return future.result()
            except Exception as err:  # noqa: BLE001 - sorted out below
                if getattr(future, "status", None) == "error" or not _connection_lost(err):
                    raise TaskFailed(err) from None  # the task's own failure, or unsendable
                lost = err
            # Cancelled by the client (scheduler connection lost) or a comm failure.
            if self.resubmits >= self.max_resubmits or \
                    not self.cluster.wait_until_running(self.reconnect_timeout):
                self._error = self._unavailable(lost)
                continue
            self.resubmits += 1
            self.submit()


def run_jobs(jobs: Sequence[ClusterJob], max_in_flight: int | None) -> None:
    """Submit ``jobs``: all at once, or at most ``max_in_flight`` running at a time (a
    thread keeps the window full; read results with ``job.result()``)."""
    if not max_in_flight or max_in_flight >= len(jobs):
        for job in jobs:
            job.submit()
        return

    def pump() -> None:
        from distributed import wait

        pending = list(jobs)
        inflight: list[ClusterJob] = []
        try:
            while pending:
                inflight = [j for j in inflight if not j.done()]
                while pending and len(inflight) < max_in_flight:
                    job = pending.pop(0)
                    job.submit()
                    inflight.append(job)
                futures = [j.dask_future() for j in inflight if j.dask_future() is not None]
                if pending and futures:
                    try:  # (wait() uses the current client; ours is not the default)
                        with jobs[0].cluster.client.as_current():
                            wait(futures, timeout=1.0, return_when="FIRST_COMPLETED")
                    except TimeoutError:
                        pass
        except BaseException as err:  # noqa: BLE001 - never leave a job unsubmitted
            for job in pending:
                job.fail(ClusterUnavailable(f"could not submit the {job.what}: {err}"))

    threading.Thread(target=pump, name="workbench-cluster-jobs", daemon=True).start()
