"""``WorkerProcess``: the parent's handle on one job worker (a fresh interpreter running
:func:`workbench.workers.jobs.serve`), and ``WorkerStartError``.

A worker goes through the states ``starting`` (launched, initializer running), ``idle``,
``busy`` (one job sent) and ``dead``. Nothing here blocks except :meth:`WorkerProcess.kill`
(which reaps): the pool waits on many workers' connections at once.
"""
from __future__ import annotations

import multiprocessing
import time
from typing import Any, Callable

from workbench.workers.jobs import describe_exit, dumps
from workbench.workers.launch import launch_python, stop_process

__all__ = ["WorkerProcess", "WorkerStartError"]


class WorkerStartError(RuntimeError):
    """A worker process could not be started. ``reason`` is one line saying why; ``kind`` is
    "launch" (no process: ``sys.executable`` missing, process limits, ...), "died" (it ended
    or hung while starting) or "init" (the initializer raised; ``detail`` is its traceback)."""

    def __init__(self, reason: str, kind: str, detail: str | None = None) -> None:
        super().__init__(reason if detail is None else f"{reason}\n{detail}")
        self.reason = reason
        self.kind = kind
        self.detail = detail


class WorkerProcess:
    """One job worker. ``initializer`` (a picklable zero-argument callable) runs once in it
    before any job; ``name`` is its process name (``ps``)."""

    def __init__(self, initializer: Callable[[], None] | None = None, *,
                 name: str = "wb-worker") -> None:
        self.initializer = initializer
        self.name = name
        self.proc: Any = None
        self.conn: Any = None
        self.state = "new"
        self.launched_at = 0.0

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def launch(self) -> None:
        """Start the process and send it the initializer; returns at once (state
        ``starting``). Raises :class:`WorkerStartError` (kind "launch") if no process starts."""
        init = dumps(self.initializer) if self.initializer is not None else None
        parent, child = multiprocessing.Pipe(duplex=True)
        try:
            self.proc = launch_python(call="workbench.workers.jobs:serve",
                                      args=[child.fileno()], name=self.name,
                                      pass_fds=[child.fileno()])
        except OSError as err:
            parent.close()
            raise WorkerStartError(f"cannot start a Python process "
                                   f"({type(err).__name__}: {err})", "launch") from err
        finally:
            child.close()
        self.conn = parent
        self.launched_at = time.monotonic()
        self.state = "starting"
        try:
            parent.send(("init", init))
        except OSError:
            pass  # it died at once: the pool sees end-of-file on the connection

    def take_ready(self, message: Any) -> None:
        """Handle the first message of a starting worker (``idle`` on success)."""
        kind, value = message
        if kind == "ready":
            self.state = "idle"
            return
        self.kill()
        raise WorkerStartError("the worker initializer raised an exception", "init",
                               detail=str(value))

    def send_job(self, payload: bytes, snapshot: dict[str, Any]) -> None:
        self.conn.send(("job", payload, snapshot))
        self.state = "busy"

    def looks_dead(self) -> bool:
        """True if an idle worker is known to have died (its connection reports end-of-file
        or the process has exited)."""
        if self.proc is None or self.proc.poll() is not None:
            return True
        try:
            return self.conn.poll(0)  # an idle worker never sends: readable means closed
        except (OSError, EOFError):
            return True

    def death(self) -> str:
        """Reap a worker whose connection closed; words for how it ended."""
        code = None
        if self.proc is not None:
            try:
                code = self.proc.wait(5)
            except Exception:  # noqa: BLE001 - subprocess.TimeoutExpired
                self.kill()
                code = self.proc.returncode
        self._close()
        self.state = "dead"
        return describe_exit(code)

    def kill(self) -> None:
        """End the process now (SIGKILL) and reap it."""
        if self.proc is not None:
            stop_process(self.proc, grace=0)
        self._close()
        self.state = "dead"

    def _close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except OSError:
                pass
            self.conn = None

    def __repr__(self) -> str:
        return f"WorkerProcess({self.name!r}, pid={self.pid}, state={self.state!r})"
