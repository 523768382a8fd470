"""The Dask worker's side: session actors and the worker's pool of child processes.

Nothing here loads or runs compiled code in the worker process: every such job goes to a
:class:`~workbench.rpc.child.ChildProcess` of the worker, so a segfaulting kernel ends its
child, never the worker (TVM's RPC server forks per session for the same reason).

- :class:`SessionServer` is a Dask *actor* (``client.submit(SessionServer, actor=True,
  workers=[address])``): one per remote session, holding that session's child process, which
  runs :func:`workbench.rpc.session_ops.serve_pickled`. Calls reach the actor directly from the
  client (no scheduler round trip) and run on a thread of their own, so sessions on one
  worker do not wait for each other. With ``session_timeout`` the child is killed once the
  session is that old (TVM's server-side session timeout).
- :func:`isolated_call` runs one job in a child of *this worker* kept for a kind of work
  ("measure", "build"): the runner's and the builder's Dask tasks use it. Children of kind
  "measure" run one job at a time per worker (timings must not overlap); other kinds keep
  one idle child per concurrently running task.
"""
from __future__ import annotations

import asyncio
import atexit
import concurrent.futures as cf
import pickle
import shutil
import threading
import time
from typing import Any, Callable, Sequence

from workbench.rpc.child import ChildProcess, Outcome

__all__ = ["SessionServer", "isolated_call", "worker_address", "shutdown_children"]


def worker_address() -> str:
    """The address of the Dask worker running this code ("" outside a worker)."""
    try:
        from distributed import get_worker
        return get_worker().address
    except (ImportError, ValueError):
        return ""


def _session_warm_up() -> None:
    import workbench.rpc.session_ops  # noqa: F401
    import workbench.runtime.relax_vm  # noqa: F401
    import workbench.target  # noqa: F401


class SessionServer:
    """A remote session's home on its worker (module docstring). ``session_timeout`` in
    seconds, 0 for none."""

    def __init__(self, session_timeout: float = 0) -> None:
        self.session_timeout = float(session_timeout or 0)
        self._child = ChildProcess("workbench-rpc-session", initializer=_session_warm_up)
        self._child.ensure_started()
        self._opened = time.monotonic()  # the session's clock starts once its process runs
        self._executor = cf.ThreadPoolExecutor(1, thread_name_prefix="workbench-session")
        self._dead: str | None = None
        self._workdir: str | None = None  # the session's directory, removed at the end
        self.address = worker_address()

    def _remaining(self) -> float | None:
        if self.session_timeout <= 0:
            return None
        return self.session_timeout - (time.monotonic() - self._opened)

    def _call_sync(self, op: str, payload: bytes) -> tuple:
        if self._dead is not None:
            return ("lost", self._dead)
        from workbench.rpc.session_ops import serve_pickled

        remaining = self._remaining()
        if remaining is not None and remaining <= 0:
            self._end(f"the session timed out after {self.session_timeout:g} seconds "
                      "(session_timeout)")
            return ("lost", self._dead)
        pid = self._child.pid
        ended = self._child.exit_description()
        if ended is not None:  # died between two calls: never start a fresh, empty one
            self._end(f"the session process (pid {pid}) died: {ended}")
            return ("lost", self._dead)
        out: Outcome = self._child.call(serve_pickled, (op, payload), remaining)
        if out.kind == "ok":
            if op == "init":  # (plain data) where the session's files are, for clean-up
                self._workdir = pickle.loads(out.value).get("workdir")
            return ("ok", out.value)
        if out.kind == "error":
            return ("error", out.value)
        if out.kind == "timeout":
            self._end(f"the session timed out after {self.session_timeout:g} seconds "
                      f"(session_timeout) during {op!r}")
        else:
            self._end(f"the session process (pid {pid}) crashed during {op!r}: "
                      f"{out.value}")
        return ("lost", self._dead)

    @property
    def _pid(self) -> int | None:
        return self._child.pid

    def _end(self, why: str) -> None:
        self._dead = why
        self._child.kill()
        self._child.close()
        self._remove_workdir()

    def _remove_workdir(self) -> None:
        # A crashed or killed session process cannot clean up after itself.
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    async def call(self, op: str, payload: bytes) -> tuple:
        """Run one session operation. ``payload`` is the pickled ``(args, releases)``: the
        worker passes the bytes through and never unpickles a client's data (a request
        that cannot be pickled fails on the client, before anything is sent). Returns
        ``("ok", pickled result)``, ``("error", RemoteException)`` or ``("lost", why)`` (the
        session is over)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._call_sync, op, bytes(payload))

    def info(self) -> dict[str, Any]:
        return {"worker": self.address, "pid": self._pid, "dead": self._dead}

    async def close(self) -> None:
        """End the session: its directory is removed and its child exits."""
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, self._close_sync)

    def _close_sync(self) -> None:
        if self._dead is None and self._child.alive():
            from workbench.rpc.session_ops import serve
            self._child.call(serve, ("close", ()), 10)  # (server-made: plain arguments)
        if self._dead is None:
            self._dead = "the session was closed"
        self._child.close()
        self._remove_workdir()

    def __del__(self) -> None:
        try:
            self._child.kill()
            self._remove_workdir()
            self._executor.shutdown(wait=False)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


# ---- children of this worker for tasks (runner, builder) -------------------------------------

class _Pool:
    """Idle children of one (worker, kind); ``serial`` kinds allow one job at a time."""

    def __init__(self, kind: str, serial: bool) -> None:
        self.kind = kind
        self.idle: list[ChildProcess] = []
        self.lock = threading.Lock()
        self.serial_lock = threading.Lock() if serial else None


_POOLS: dict[tuple[str, str], _Pool] = {}
_POOLS_LOCK = threading.Lock()
SERIAL_KINDS = frozenset({"measure"})


def _pool(kind: str) -> _Pool:
    key = (worker_address(), kind)
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = _Pool(kind, kind in SERIAL_KINDS)
        return pool


def isolated_call(kind: str, fn: Callable[..., Any], args: Sequence[Any],
                  timeout: float | None,
                  initializer: Callable[[], None] | None = None) -> Outcome:
    """Run ``fn(*args)`` in a child of this worker kept for ``kind`` (module docstring);
    a child that crashed or timed out is dropped, the next call starts a new one. Children
    are made with ``initializer``; a pool's children are reused only with the same one."""
    pool = _pool(kind)
    serial = pool.serial_lock
    if serial is not None:
        serial.acquire()
    try:
        with pool.lock:
            child = next((c for c in pool.idle if c.initializer == initializer), None)
            if child is not None:
                pool.idle.remove(child)
        if child is None:
            child = ChildProcess(f"workbench-{kind}", initializer=initializer)
        out = child.call(fn, args, timeout)
        if child.alive():
            with pool.lock:
                pool.idle.append(child)
        return out
    finally:
        if serial is not None:
            serial.release()


def child_pids(kind: str) -> list[int]:
    """Process ids of the idle children of ``kind`` on this worker (tests, diagnostics)."""
    pool = _pool(kind)
    with pool.lock:
        return [c.pid for c in pool.idle if c.pid is not None]


def shutdown_children() -> None:
    """Stop every idle child of every worker in this process. They hold nothing worth a
    polite exit (a measuring or building child between jobs), and a worker that is closing
    must not wait for interpreters to wind down: they are killed."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    children: list[ChildProcess] = []
    for pool in pools:
        with pool.lock:
            children += pool.idle
            pool.idle = []
    for child in children:
        child.kill()
    for child in children:
        child.close()


atexit.register(shutdown_children)
