"""``WorkerPool``: jobs with per-job time limits in a set of persistent worker processes.

``run(fn, jobs, timeout)`` gives every job to an idle worker (one job per worker at a time,
so a job's clock starts when a worker takes it) and waits on all busy workers at once:

- a job past its deadline is a "timeout": only its worker is killed, and replaced;
- a worker that dies during a job makes that job "crashed" (the exit status names the signal);
  the other jobs are unaffected, and the worker is replaced;
- an exception inside a job is an "error" with the worker's traceback.

Workers start lazily, all at once, and stay alive between calls; a worker that dies while idle
is replaced before it gets a job. If no worker can be started (every start of a round fails),
``run`` raises :class:`WorkerStartError`, whose ``reason`` is one line the caller can print
before falling back to doing the work itself. An interrupt (``KeyboardInterrupt``) or any
other exception escaping ``run`` kills every worker of the pool first, so nothing keeps
running; the next call starts new ones.
"""
from __future__ import annotations

import collections
import logging
import threading
import time
import weakref
from multiprocessing.connection import wait as wait_for_connections
from typing import Any, Callable, Sequence

from workbench.workers.jobs import Outcome, options_snapshot, pack_job, run_here
from workbench.workers.worker import WorkerProcess, WorkerStartError

__all__ = ["WorkerPool"]

# After a failed launch while other workers still serve, wait this long before trying again.
_LAUNCH_RETRY_SECONDS = 5.0


def _kill_all(workers: list[WorkerProcess]) -> None:
    for w in list(workers):
        try:
            w.kill()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
    workers.clear()


class WorkerPool:
    """``max_workers`` persistent job workers (see the module docstring). ``initializer``
    runs once in each new worker; ``name`` is their process name; a worker that has not
    answered ``startup_timeout`` seconds after its launch counts as a failed start.

    ``fallback`` (words for what happens instead, e.g. "building in this process") turns a
    pool that cannot start into in-process execution: ``run`` then logs one warning,
    ``"<label>: cannot start worker processes (<reason>); <fallback>"``, on ``logger`` and
    runs this and every later call's jobs here (the initializer runs once first). An
    initializer that raises is not a reason to fall back: every job then fails with its
    traceback. Without ``fallback``, ``run`` raises :class:`WorkerStartError`.
    """

    def __init__(self, max_workers: int, initializer: Callable[[], None] | None = None, *,
                 name: str = "wb-worker", startup_timeout: float = 120.0,
                 fallback: str | None = None, label: str | None = None,
                 logger: logging.Logger | None = None) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self.max_workers = max_workers
        self.initializer = initializer
        self.name = name
        self.startup_timeout = startup_timeout
        self.fallback = fallback
        self.label = label or name
        self.logger = logger or logging.getLogger("workbench.workers")
        self.fallen_back: str | None = None  # why the pool runs jobs in-process, if it does
        self._workers: list[WorkerProcess] = []
        self._lock = threading.Lock()  # one run() at a time
        self._start_failures = 0
        self._retry_launch_at = 0.0
        self._round_started: float | None = None
        # Seconds from the launch of the last round of workers to its latest ready one.
        self.startup_seconds: float | None = None
        self.starts = 0  # workers that became ready, over the pool's life
        # Workers die with the pool object, not only at interpreter exit.
        self._finalizer = weakref.finalize(self, _kill_all, self._workers)

    @property
    def pids(self) -> list[int]:
        """Process ids of the live workers (idle, busy or starting)."""
        return [w.pid for w in self._workers if w.state != "dead" and w.pid is not None]

    def run(self, fn: Callable[..., Any], jobs: Sequence[Sequence[Any]],
            timeout: float | None) -> list[Outcome]:
        """``fn(*job)`` for every job in the workers; one :class:`Outcome` per job, in order."""
        payloads = [pack_job(fn, job) for job in jobs]
        if not payloads:
            return []
        with self._lock:
            if self.fallen_back is None:
                try:
                    return self._run(payloads, timeout)
                except WorkerStartError as err:
                    _kill_all(self._workers)
                    if self.fallback is None:
                        raise
                    if err.kind == "init":
                        return [Outcome("error", f"the worker initializer failed:\n{err.detail}")
                                for _ in jobs]
                    self._fall_back(err.reason)
                except BaseException:
                    # Interrupted, or a bug: leave nothing running.
                    _kill_all(self._workers)
                    raise
            return [run_here(fn, job) for job in jobs]

    def prestart(self) -> None:
        """Launch the missing workers now, without waiting for them: a later ``run`` finds
        them ready (or still starting) instead of paying their start-up then. A pool that
        fell back to in-process execution, or is busy in ``run``, is left alone."""
        if self.fallen_back is not None or not self._lock.acquire(blocking=False):
            return
        try:
            self._fill()
        except WorkerStartError:
            pass  # the next run() tries again and reports
        finally:
            self._lock.release()

    @property
    def ready(self) -> int:
        """How many workers have started and take jobs (idle or busy). Start-up answers that
        came in since the last ``run`` are read first: a prestarted worker counts once its
        interpreter is up, not only after a job went to it."""
        if self._lock.acquire(blocking=False):  # busy in run(): it reads them itself
            try:
                self._collect_ready({}, [])
            except WorkerStartError:
                pass  # every start failed: the next run() starts again and reports
            finally:
                self._lock.release()
        return sum(1 for w in self._workers if w.state in ("idle", "busy"))

    def _fall_back(self, reason: str) -> None:
        self.fallen_back = reason
        self.logger.warning("%s: cannot start worker processes (%s); %s", self.label, reason,
                            self.fallback)
        if self.initializer is not None:
            self.initializer()

    def call(self, fn: Callable[..., Any], args: Sequence[Any],
             timeout: float | None) -> Outcome:
        """One job: ``run(fn, [args], timeout)[0]``."""
        return self.run(fn, [args], timeout)[0]

    def shutdown(self) -> None:
        """Stop every worker now (a later ``run`` starts new ones). Workers hold no state
        worth a polite goodbye, so they are killed: this is fast even on a loaded machine."""
        with self._lock:
            _kill_all(self._workers)

    # ---- the loop -----------------------------------------------------------------------------

    def _run(self, payloads: list[bytes], timeout: float | None) -> list[Outcome]:
        snapshot = options_snapshot()
        results: list[Outcome | None] = [None] * len(payloads)
        queue = collections.deque(range(len(payloads)))
        busy: dict[WorkerProcess, tuple[int, float]] = {}
        self._replace_dead_idle()
        self._collect_ready(busy, results)
        self._fill()
        while queue or busy:
            for w in list(self._workers):
                if queue and w.state == "idle":
                    self._dispatch(w, queue, payloads, snapshot, timeout, busy)
            waiting = [w for w in self._workers if w.state in ("starting", "busy")]
            if not waiting:  # every worker is gone: start new ones (raises if none can)
                self._fill(now=True)
                continue
            by_conn = {w.conn: w for w in waiting}
            for conn in wait_for_connections(list(by_conn), self._wait_time(waiting, busy)):
                self._receive(by_conn[conn], busy, results)
            self._expire(busy, results)
            self._fill()
        return results  # type: ignore[return-value]

    def _dispatch(self, w: WorkerProcess, queue: collections.deque, payloads: list[bytes],
                  snapshot: dict, timeout: float | None, busy: dict) -> None:
        idx = queue.popleft()
        try:
            w.send_job(payloads[idx], snapshot)
        except OSError:  # it died while idle, just now: not this job's fault
            queue.appendleft(idx)
            w.death()
            self._workers.remove(w)
            return
        busy[w] = (idx, time.monotonic() + timeout if timeout is not None else float("inf"))

    def _receive(self, w: WorkerProcess, busy: dict, results: list) -> None:
        try:
            message = w.conn.recv()
        except (EOFError, OSError):
            death = w.death()
            self._workers.remove(w)
            if w in busy:
                idx, _ = busy.pop(w)
                results[idx] = Outcome("crashed", death)
            else:
                self._start_failed(w, f"the worker process died while starting: {death}")
            return
        if w.state == "starting":
            w.take_ready(message)  # raises WorkerStartError if the initializer failed
            self.starts += 1
            self._start_failures = 0
            if self._round_started is not None:
                self.startup_seconds = time.monotonic() - self._round_started
                if all(x.state != "starting" for x in self._workers):
                    self._round_started = None
            return
        idx, _ = busy.pop(w)
        kind, value = message
        results[idx] = Outcome(kind, value)
        w.state = "idle"

    def _wait_time(self, waiting: list[WorkerProcess], busy: dict) -> float | None:
        deadlines = [d for _, d in busy.values()]
        deadlines += [w.launched_at + self.startup_timeout for w in waiting
                      if w.state == "starting"]
        earliest = min(deadlines, default=float("inf"))
        if earliest == float("inf"):
            return None
        return max(0.0, earliest - time.monotonic())

    def _expire(self, busy: dict, results: list) -> None:
        now = time.monotonic()
        for w, (idx, deadline) in list(busy.items()):
            if deadline <= now:
                results[idx] = Outcome("timeout")
                del busy[w]
                w.kill()
                self._workers.remove(w)
        for w in [w for w in self._workers if w.state == "starting"]:
            if now - w.launched_at >= self.startup_timeout and not w.conn.poll(0):
                w.kill()
                self._workers.remove(w)
                self._start_failed(w, f"the worker process did not start within "
                                      f"{self.startup_timeout:g} seconds")

    # ---- starting workers ---------------------------------------------------------------------

    def _collect_ready(self, busy: dict, results: list) -> None:
        # Workers still starting when the last call ended may have answered since.
        for w in [w for w in self._workers if w.state == "starting"]:
            if w.conn.poll(0):
                self._receive(w, busy, results)

    def _replace_dead_idle(self) -> None:
        for w in [w for w in self._workers if w.state == "idle" and w.looks_dead()]:
            w.death()
            self._workers.remove(w)

    def _fill(self, now: bool = False) -> None:
        """Launch workers up to ``max_workers`` (they become ready asynchronously); after a
        failed launch, not again for a few seconds unless ``now``."""
        missing = self.max_workers - len(self._workers)
        if missing <= 0 or (not now and time.monotonic() < self._retry_launch_at):
            return
        if self._round_started is None:
            self._round_started = time.monotonic()
        for _ in range(missing):
            w = WorkerProcess(self.initializer, name=self.name)
            try:
                w.launch()
            except WorkerStartError as err:
                self._start_failed(w, err.reason, err)  # raises when nothing is left
                # Others carry on; do not retry the launch at every turn of the loop.
                self._retry_launch_at = time.monotonic() + _LAUNCH_RETRY_SECONDS
                return
            self._workers.append(w)

    def _start_failed(self, w: WorkerProcess, reason: str,
                      err: WorkerStartError | None = None) -> None:
        """Count a failed start; give up (raise) once a whole round of starts has failed and
        no worker is left to do the work."""
        self._start_failures += 1
        alive = any(x.state in ("idle", "busy") for x in self._workers)
        if self._start_failures >= self.max_workers and not alive:
            self._start_failures = 0
            if err is not None:
                raise err
            raise WorkerStartError(reason, "died")
