"""Child processes of a cluster worker: where remote sessions, builds and measurements run.

A Dask worker never runs a kernel itself. Everything that loads or runs compiled code on a
worker happens in a :class:`ChildProcess`: a persistent, fresh Python interpreter started
with ``python -m workbench.rpc._child_main`` (never a fork, never a re-import of anybody's
``__main__``), spoken to over a pair of pipes one job at a time. So a kernel that segfaults
kills its child, the job comes back as ``Outcome("crashed", "...signal SIGSEGV...")`` and the
worker carries on, as TVM's RPC server does by forking a process per session.

- A job is a module-level function and its arguments, pickled by the caller (functions by
  reference: the child must be able to import them; it gets the caller's ``sys.path``).
  Its result is an :class:`Outcome`: "ok" (the return value), "error" (an
  :class:`RemoteException` with the type name, message and traceback), "timeout" (the child
  was killed at the deadline) or "crashed" (what happened to the process).
- Options the caller set explicitly (``options.set`` / ``options.override``) travel with each
  job; defaults and environment variables stay those of the child's machine.
- A child exits when its parent dies (it watches its parent id and its request pipe), so a
  killed worker or Jupyter kernel leaves nothing behind. A crashed or timed-out child is
  replaced by the next call.
"""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Callable, Sequence

from workbench import options

__all__ = ["Outcome", "RemoteException", "ChildProcess", "WarmUp", "describe_exit",
           "explicit_options"]


@dataclass
class Outcome:
    """How a job ended: ``kind`` is "ok" (``value`` = the result), "error" (``value`` = a
    :class:`RemoteException`), "timeout", or "crashed" (``value`` = what happened)."""

    kind: str
    value: Any = None


@dataclass
class RemoteException:
    """An exception raised by a job, as data (exceptions themselves need not pickle)."""

    type_name: str
    message: str
    traceback: str

    def __str__(self) -> str:
        return self.traceback or f"{self.type_name}: {self.message}"


def describe_exit(returncode: int | None) -> str:
    """Words for a dead child's exit status, naming the signal if there was one."""
    if returncode is None:
        return "the process died unexpectedly"
    if returncode < 0:
        try:
            sig = signal.Signals(-returncode)
        except ValueError:
            return f"the process was killed by signal {-returncode}"
        desc = signal.strsignal(sig) or ""
        return f"the process was killed by signal {sig.name}" + (f" ({desc})" if desc else "")
    return f"the process exited with code {returncode}"


def explicit_options() -> dict[str, Any]:
    """The options given with ``options.set`` or an active ``options.override`` here."""
    return options.explicit_values()


class WarmUp:
    """A child's initializer: import ``modules`` (so a first job's timeout is not spent on
    imports), then call ``user`` (a module-level callable, or None). Equal when both are,
    so a worker reuses the children made for the same ones."""

    def __init__(self, modules: tuple[str, ...], user: Callable[[], None] | None) -> None:
        self.modules = modules
        self.user = user

    def __call__(self) -> None:
        import importlib
        for name in self.modules:
            importlib.import_module(name)
        if self.user is not None:
            self.user()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WarmUp) and (other.modules, other.user) == (self.modules,
                                                                              self.user)

    def __hash__(self) -> int:
        return hash(self.modules)


class ChildProcess:
    """One persistent child interpreter running one job at a time (module docstring).

    ``initializer`` (a module-level callable, or None) runs once in every new child;
    ``startup_timeout`` bounds the child's start-up (imports, initializer).
    """

    def __init__(self, name: str = "workbench-child",
                 initializer: Callable[[], None] | None = None,
                 startup_timeout: float = 120.0) -> None:
        self.name = name
        self.initializer = initializer
        self.startup_timeout = startup_timeout
        self.starts = 0
        self.startup_seconds: float | None = None
        self._proc: subprocess.Popen | None = None
        self._send: Connection | None = None
        self._recv: Connection | None = None
        self._lock = threading.Lock()  # the pipes carry one job at a time

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def exit_description(self) -> str | None:
        """How the started child ended (None while it runs, or before a start)."""
        proc = self._proc
        if proc is None or proc.poll() is None:
            return None
        return describe_exit(proc.returncode)

    # -- start and stop ------------------------------------------------------------------------
    def _start(self) -> None:
        start = time.perf_counter()
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        try:
            proc = subprocess.Popen(
                # -P: nothing of the current directory shadows a module; the child takes
                # the caller's sys.path from its first message instead.
                [sys.executable, "-P", "-m", "workbench.rpc._child_main", str(req_r),
                 str(resp_w), self.name],
                pass_fds=(req_r, resp_w), stdin=subprocess.DEVNULL, close_fds=True)
        except BaseException:
            for fd in (req_r, req_w, resp_r, resp_w):
                os.close(fd)
            raise
        os.close(req_r)
        os.close(resp_w)
        self._proc, self._send, self._recv = proc, Connection(req_w), Connection(resp_r)
        try:
            self._send.send((list(sys.path), self.initializer))
            if not self._recv.poll(self.startup_timeout):
                raise RuntimeError(f"{self.name}: the child process did not start within "
                                   f"{self.startup_timeout} seconds")
            kind, value = self._recv.recv()
        except (EOFError, OSError):
            code = self._reap()
            self._discard()
            raise RuntimeError(f"{self.name}: the child process died while starting: "
                               f"{describe_exit(code)}") from None
        except BaseException:
            self._discard()
            raise
        if kind != "ready":
            self._discard()
            raise RuntimeError(f"{self.name}: the child's initializer failed:\n{value}")
        self.starts += 1
        self.startup_seconds = time.perf_counter() - start

    def _reap(self, wait: float = 5.0) -> int | None:
        proc = self._proc
        if proc is None:
            return None
        try:
            return proc.wait(wait)
        except subprocess.TimeoutExpired:
            return None

    def _discard(self) -> None:
        proc, send, recv = self._proc, self._send, self._recv
        self._proc = self._send = self._recv = None
        for conn in (send, recv):
            if conn is not None:
                try:
                    conn.close()
                except OSError:
                    pass
        if proc is not None:
            if proc.poll() is None:
                try:
                    proc.kill()
                except OSError:
                    pass
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                pass

    def ensure_started(self) -> None:
        """Start the child now if it is not running (a crashed one is replaced)."""
        with self._lock:
            if not self.alive():
                self._discard()
                self._start()

    def close(self) -> None:
        """Ask the child to exit, then make sure it has (a later call starts a new one)."""
        with self._lock:
            if self._send is not None and self.alive():
                try:
                    self._send.send(None)
                    self._proc.wait(2)
                except (OSError, subprocess.TimeoutExpired):
                    pass
            self._discard()

    def kill(self) -> None:
        """Kill the child at once, even while a job runs (that job reports "crashed")."""
        proc = self._proc
        if proc is not None and proc.poll() is None:
            try:
                proc.kill()
            except OSError:
                pass

    def __del__(self) -> None:
        try:
            self._discard()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # -- jobs ----------------------------------------------------------------------------------
    def call(self, fn: Callable[..., Any], args: Sequence[Any] = (),
             timeout: float | None = None) -> Outcome:
        """Run ``fn(*args)`` in the child (started if needed); a crash or a timeout kills and
        forgets the child. ``timeout`` covers the job, not the child's start-up."""
        try:
            payload = pickle.dumps((fn, tuple(args)), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as err:  # noqa: BLE001
            raise TypeError(f"cannot send {getattr(fn, '__name__', fn)!r} and its arguments "
                            f"to a child process: {err}. Job functions must be module-level "
                            "functions of an importable module") from err
        with self._lock:
            if not self.alive():
                self._discard()
                self._start()
            return self._call(payload, timeout)

    def _call(self, payload: bytes, timeout: float | None) -> Outcome:
        try:
            self._send.send_bytes(pickle.dumps((payload, explicit_options())))
            if not self._recv.poll(timeout):
                self._discard()
                return Outcome("timeout")
            kind, value = self._recv.recv()
            return Outcome(kind, value)
        except (EOFError, OSError):
            code = self._reap()
            self._discard()
            return Outcome("crashed", describe_exit(code))
        except BaseException:
            self._discard()  # interrupted mid-job: the child's state is unknown
            raise


# ---- the child's side (run by workbench/rpc/_child_main.py) ----------------------------------

_applied: set[str] = set()


def _apply_options(snapshot: dict[str, Any]) -> None:
    for name in list(_applied - set(snapshot)):
        try:
            options.reset(name)
        except KeyError:
            pass
        _applied.discard(name)
    for name, value in snapshot.items():
        try:
            if options.get(name) != value:
                options.set(name, value)
            _applied.add(name)
        except (KeyError, TypeError, ValueError):
            pass  # an option of a package this child has not imported (yet)


def _watch_parent(parent: int, poll_seconds: float = 1.0) -> None:
    def watch() -> None:
        while True:
            time.sleep(poll_seconds)
            if os.getppid() != parent:  # re-parented: the worker died
                os._exit(0)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def _run_job(message: tuple) -> tuple:
    try:
        payload, snapshot = message
        _apply_options(snapshot)
        fn, args = pickle.loads(payload)
        return ("ok", fn(*args))
    except BaseException as err:  # noqa: BLE001 - everything goes back to the caller
        return ("error", RemoteException(type(err).__name__, str(err), traceback.format_exc()))


def child_main(argv: Sequence[str]) -> None:
    """The child's loop: ``argv = [prog, request_fd, response_fd, name]``."""
    import faulthandler

    recv, send = Connection(int(argv[1])), Connection(int(argv[2]))
    # A crashing job dumps its Python stack to stderr; the signal still kills the process,
    # so the parent sees the real exit status.
    faulthandler.enable()
    _watch_parent(os.getppid())
    try:
        path, initializer = recv.recv()
        sys.path[:] = list(path) + [p for p in sys.path if p not in path]
        if initializer is not None:
            initializer()
    except BaseException:  # noqa: BLE001
        send.send(("init_error", traceback.format_exc()))
        return
    send.send(("ready", os.getpid()))
    while True:
        try:
            raw = recv.recv_bytes()
        except (EOFError, OSError):
            return
        message = pickle.loads(raw)  # (job bytes, option values) or None: plain data
        if message is None:
            return
        result = _run_job(message)
        try:
            send.send(result)
        except Exception as err:  # noqa: BLE001 - an unpicklable result
            send.send(("error", RemoteException(
                type(err).__name__, f"the job's result cannot be sent back: {err}",
                traceback.format_exc())))
