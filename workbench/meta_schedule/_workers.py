"""Worker processes with time limits: where the tuner compiles and measures untrusted code.

Two shapes, both started with ``spawn`` (or ``forkserver``; option ``ms_worker_start_method``)
because libgomp and llvmlite's MCJIT are not fork-safe:

- :class:`TimedProcessPool` (the builder): a ``ProcessPoolExecutor`` kept alive across calls.
  ``run(fn, jobs, timeout)`` keeps at most ``max_workers`` jobs in flight, so a job's clock
  starts when a worker takes it. A job past its deadline is reported as a timeout and the
  whole pool is killed and recreated (the only way to stop a hung worker); the other jobs in
  flight are re-run. If a worker dies, the jobs that were in flight are re-run one at a time,
  which pins the crash on the job that caused it.
- :class:`IsolatedWorker` (the runner): one persistent process spoken to over a pipe, one job
  at a time. A crash shows up as the pipe closing, and the exit status names the signal; a
  hang is killed at the deadline. Either way the worker is replaced on the next call.

Jobs are module-level callables (they are pickled by reference). The result of a job is an
:class:`Outcome`; exceptions inside a job come back as formatted tracebacks, so they need not
be picklable. Every job also receives the parent's option values, because a spawned process
would otherwise see only environment variables.
"""
from __future__ import annotations

import collections
import concurrent.futures as cf
import faulthandler
import multiprocessing as mp
import os
import pickle
import signal
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from workbench import options

__all__ = ["Outcome", "TimedProcessPool", "IsolatedWorker", "describe_exit", "Chain",
           "exit_with_parent"]


def _check_start_method(value: str) -> None:
    if value not in ("spawn", "forkserver"):
        raise ValueError(f"must be 'spawn' or 'forkserver' (fork is unsafe with libgomp and "
                         f"MCJIT), got {value!r}")


options.register("ms_worker_start_method", str, "spawn", env="WORKBENCH_MS_WORKER_START_METHOD",
                 doc="How the tuner starts builder/runner worker processes: 'spawn' or "
                     "'forkserver'.", validate=_check_start_method)


@dataclass
class Outcome:
    """How a job ended: ``kind`` is "ok" (``value`` = the result), "error" (``value`` = the
    traceback text), "timeout", or "crashed" (``value`` = what happened to the process)."""

    kind: str
    value: Any = None


def describe_exit(exitcode: int | None) -> str:
    """Words for a dead worker's exit status, naming the signal if there was one."""
    if exitcode is None:
        return "the worker process died unexpectedly"
    if exitcode < 0:
        try:
            sig = signal.Signals(-exitcode)
            desc = signal.strsignal(sig) or ""
            return f"the worker process was killed by signal {sig.name}" + \
                (f" ({desc})" if desc else "")
        except ValueError:
            return f"the worker process was killed by signal {-exitcode}"
    return f"the worker process exited with code {exitcode}"


def _context() -> Any:
    return mp.get_context(options.get("ms_worker_start_method"))


def _options_snapshot() -> dict[str, Any]:
    snap = {}
    for opt in options.all_options():
        try:
            snap[opt.name] = options.get(opt.name)
        except (TypeError, ValueError):
            pass
    return snap


def _apply_options(snapshot: dict[str, Any]) -> None:
    for name, value in snapshot.items():
        try:
            if options.get(name) != value:
                options.set(name, value)
        except (KeyError, TypeError, ValueError):
            pass  # an option of a package this worker has not imported


def exit_with_parent(poll_seconds: float = 1.0) -> None:
    """In a worker process: exit as soon as the parent process is gone. Pool workers wait on
    their queue forever otherwise, so every killed or restarted Jupyter kernel would leave its
    idle workers behind."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(poll_seconds)
            if os.getppid() != parent:  # re-parented: the parent died
                os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _worker_setup(initializer: Callable[[], None] | None) -> None:
    # Dump the Python stack of a crashing job to stderr; the signal is re-raised afterwards,
    # so the parent still sees the real exit status.
    faulthandler.enable()
    exit_with_parent()
    if initializer is not None:
        initializer()


def _pack(fn: Callable[..., Any], args: Sequence[Any]) -> bytes:
    """Pickle a job in the parent. Unpickling happens inside the worker's try block, so a
    function the worker cannot import (say, one defined in a notebook's ``__main__``) comes
    back as an ordinary error with its traceback instead of killing the worker."""
    try:
        return pickle.dumps((fn, tuple(args)), protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as err:  # noqa: BLE001
        raise TypeError(f"cannot send {getattr(fn, '__name__', fn)!r} and its arguments to a "
                        f"worker process: {err}. Worker functions (f_build, f_export, "
                        "f_alloc_argument, f_run_evaluator, ...) must be module-level "
                        "functions of an importable module") from err


def _call_job(payload: bytes, snapshot: dict[str, Any]) -> tuple:
    try:
        _apply_options(snapshot)
        fn, args = pickle.loads(payload)
        return ("ok", fn(*args))
    except BaseException:  # noqa: BLE001 - everything is reported to the parent
        return ("error", traceback.format_exc())


class Chain:
    """A picklable "call these in order" (a built-in warm-up plus the user's initializer)."""

    def __init__(self, *fns: Callable[[], None] | None) -> None:
        self.fns = [f for f in fns if f is not None]

    def __call__(self) -> None:
        for f in self.fns:
            f()


def _ping() -> int:
    return os.getpid()


# ---- pool (builder) ---------------------------------------------------------------------------

class TimedProcessPool:
    """A persistent process pool with per-job deadlines (see the module docstring)."""

    def __init__(self, max_workers: int, initializer: Callable[[], None] | None = None,
                 startup_timeout: float = 120.0) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self.max_workers = max_workers
        self.initializer = initializer
        self.startup_timeout = startup_timeout
        self._pool: cf.ProcessPoolExecutor | None = None
        self._lock = threading.Lock()  # one run() at a time: deadlines assume idle workers
        # The worker Process objects of the current pool, kept here because the executor
        # forgets them when it breaks, and their exit codes name a crash's signal.
        self._procs: dict[int, Any] = {}
        self.startup_seconds: float | None = None  # of the last (re)start, for diagnostics

    def _ensure(self) -> cf.ProcessPoolExecutor:
        if self._pool is not None and getattr(self._pool, "_broken", False):
            self._restart()  # a worker died while idle (OOM killer, a stray signal)
        if self._pool is None:
            start = time.perf_counter()
            pool = cf.ProcessPoolExecutor(self.max_workers, mp_context=_context(),
                                          initializer=_worker_setup,
                                          initargs=(self.initializer,))
            # Start every worker now, so start-up time is not charged to the first jobs'
            # deadlines (spawned workers start lazily, one per submitted job).
            pings = [pool.submit(_ping) for _ in range(self.max_workers)]
            try:
                for f in pings:
                    f.result(timeout=self.startup_timeout)
            except BaseException:
                self._kill(pool)
                raise
            self._pool = pool
            self._procs = {}
            self._remember_processes()
            self.startup_seconds = time.perf_counter() - start
        return self._pool

    def _remember_processes(self) -> None:
        self._procs.update(getattr(self._pool, "_processes", None) or {})

    @staticmethod
    def _kill(pool: cf.ProcessPoolExecutor) -> None:
        procs = list((getattr(pool, "_processes", None) or {}).values())
        for p in procs:
            try:
                p.kill()
            except (OSError, ValueError, AttributeError):
                pass
        pool.shutdown(wait=False, cancel_futures=True)
        for p in procs:
            try:
                p.join(timeout=5)
            except (OSError, ValueError, AssertionError, AttributeError):
                pass

    def _restart(self) -> None:
        if self._pool is not None:
            self._kill(self._pool)
            self._pool = None
            self._procs = {}

    def run(self, fn: Callable[..., Any], jobs: Sequence[Sequence[Any]],
            timeout: float | None) -> list[Outcome]:
        """Run ``fn(*job)`` for every job; one Outcome per job, in order."""
        payloads = [_pack(fn, job) for job in jobs]
        with self._lock:
            return self._run(payloads, timeout)

    def _run(self, payloads: list[bytes], timeout: float | None) -> list[Outcome]:
        jobs = payloads
        results: list[Outcome | None] = [None] * len(jobs)
        queue = collections.deque(range(len(jobs)))
        suspects: collections.deque[int] = collections.deque()
        inflight: dict[cf.Future, tuple[int, float]] = {}
        snapshot = _options_snapshot()
        try:
            while queue or suspects or inflight:
                pool = self._ensure()
                # After a crash, run the jobs that were in flight alone to find the culprit.
                source, window = (suspects, 1) if suspects else (queue, self.max_workers)
                while source and len(inflight) < window:
                    idx = source.popleft()
                    try:
                        fut = pool.submit(_call_job, jobs[idx], snapshot)
                    except cf.process.BrokenProcessPool:
                        source.appendleft(idx)  # resubmitted to the next pool
                        break
                    deadline = time.monotonic() + timeout if timeout is not None else \
                        float("inf")
                    inflight[fut] = (idx, deadline)
                self._remember_processes()
                if not inflight:  # the pool broke before taking anything: start afresh
                    self._restart()
                    continue
                earliest = min(d for _, d in inflight.values())
                wait_for = None if earliest == float("inf") else \
                    max(0.0, earliest - time.monotonic())
                done, _ = cf.wait(inflight, timeout=wait_for, return_when=cf.FIRST_COMPLETED)
                if not done:
                    self._expire(inflight, results, queue)
                    continue
                broken = []
                for fut in done:
                    idx, _ = inflight.pop(fut)
                    try:
                        kind, value = fut.result()
                        results[idx] = Outcome(kind, value)
                    except cf.process.BrokenProcessPool:
                        broken.append(idx)
                if broken:
                    self._on_broken(broken, inflight, results, suspects, window == 1)
        except BaseException:
            # Interrupted (e.g. KeyboardInterrupt in a notebook): do not leave jobs running.
            self._restart()
            raise
        return results  # type: ignore[return-value]

    def _expire(self, inflight: dict, results: list, queue: collections.deque) -> None:
        now = time.monotonic()
        retry = []
        for idx, deadline in inflight.values():
            if deadline <= now:
                results[idx] = Outcome("timeout")
            else:
                retry.append(idx)
        inflight.clear()
        queue.extendleft(reversed(retry))  # innocent jobs run again, first
        self._restart()

    def _on_broken(self, broken: list[int], inflight: dict, results: list,
                   suspects: collections.deque, alone: bool) -> None:
        self._remember_processes()
        procs = list(self._procs.values())
        for p in procs:  # the culprit is dead already; stop the survivors
            if p.exitcode is None:
                try:
                    p.kill()
                except (OSError, ValueError, AttributeError):
                    pass
        exitcodes = []
        for p in procs:
            try:
                p.join(timeout=5)
            except (OSError, ValueError, AssertionError):
                pass
            if p.exitcode not in (None, 0):
                exitcodes.append(p.exitcode)
        # Survivors die of SIGKILL (ours) or SIGTERM (the executor's); the culprit of
        # something else, unless it was itself killed from outside.
        exitcodes.sort(key=lambda code: code in (-signal.SIGTERM, -signal.SIGKILL))
        # Every other in-flight future of a broken pool fails too: collect them.
        for idx, _ in list(inflight.values()):
            broken.append(idx)
        inflight.clear()
        self._restart()
        if alone and len(broken) == 1:
            results[broken[0]] = Outcome("crashed", describe_exit(
                exitcodes[0] if exitcodes else None))
        else:
            suspects.extend(sorted(broken))

    def shutdown(self) -> None:
        """Stop the workers (a later ``run`` starts new ones)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __del__(self) -> None:
        try:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


# ---- isolated worker (runner) -----------------------------------------------------------------

def _isolated_main(conn: Any, initializer: Callable[[], None] | None) -> None:
    try:
        _worker_setup(initializer)
    except BaseException:  # noqa: BLE001
        conn.send(("init_error", traceback.format_exc()))
        return
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return
        if msg is None:
            return
        payload, snapshot = msg
        conn.send(_call_job(payload, snapshot))


class IsolatedWorker:
    """One persistent worker process running one job at a time (see the module docstring)."""

    def __init__(self, initializer: Callable[[], None] | None = None,
                 startup_timeout: float = 120.0) -> None:
        self.initializer = initializer
        self.startup_timeout = startup_timeout
        self._proc: Any = None
        self._conn: Any = None
        self.startup_seconds: float | None = None
        self.starts = 0
        self._lock = threading.Lock()  # the pipe carries one job at a time

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _ensure(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            return
        self._discard()
        start = time.perf_counter()
        ctx = _context()
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_isolated_main, args=(child, self.initializer), daemon=True,
                           name="workbench-ms-runner")
        proc.start()
        child.close()
        self._proc, self._conn = proc, parent
        try:
            if not parent.poll(self.startup_timeout):
                raise RuntimeError(f"the worker process did not start within "
                                   f"{self.startup_timeout} seconds")
            kind, value = parent.recv()
        except (EOFError, OSError):
            proc.join(5)
            code = proc.exitcode
            self._discard()
            raise RuntimeError(f"the worker process died while starting: "
                               f"{describe_exit(code)}") from None
        except BaseException:
            self._discard()
            raise
        if kind != "ready":
            self._discard()
            raise RuntimeError(f"the worker initializer failed:\n{value}")
        self.startup_seconds = time.perf_counter() - start
        self.starts += 1

    def call(self, fn: Callable[..., Any], args: Sequence[Any],
             timeout: float | None) -> Outcome:
        """Run ``fn(*args)`` in the worker; a crash or timeout replaces the worker."""
        payload = _pack(fn, args)
        with self._lock:
            return self._call(payload, timeout)

    def _call(self, payload: bytes, timeout: float | None) -> Outcome:
        self._ensure()
        conn = self._conn
        try:
            conn.send((payload, _options_snapshot()))
            if not conn.poll(timeout):
                self._discard()
                return Outcome("timeout")
            kind, value = conn.recv()
            return Outcome(kind, value)
        except (EOFError, OSError, BrokenPipeError):
            proc = self._proc
            proc.join(5)
            code = proc.exitcode
            self._discard()
            return Outcome("crashed", describe_exit(code))
        except BaseException:
            self._discard()  # interrupted mid-job: the worker's state is unknown
            raise

    def _discard(self) -> None:
        proc, conn = self._proc, self._conn
        self._proc = self._conn = None
        if conn is not None:
            try:
                conn.close()
            except OSError:
                pass
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            proc.join(5)

    def shutdown(self) -> None:
        """Stop the worker politely (a later ``call`` starts a new one)."""
        if self._conn is not None and self._proc is not None and self._proc.is_alive():
            try:
                self._conn.send(None)
                self._proc.join(2)
            except (OSError, BrokenPipeError):
                pass
        self._discard()

    def __del__(self) -> None:
        try:
            self._discard()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass
