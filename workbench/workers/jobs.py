"""How a job travels to a worker process and how it comes back.

A job is ``fn(*args)`` sent as one pickle made in the parent by :func:`pack_job` with
``cloudpickle``: importable functions and classes travel by reference (as with ``pickle``),
while functions and classes of ``__main__`` -- a notebook cell, a script -- and lambdas travel
by value, because a worker never imports the parent's ``__main__``. The worker unpickles the
job inside its ``try`` block, so a job that cannot be rebuilt there comes back as an ordinary
error with its traceback instead of killing the worker.

Every job also carries the parent's option values (:func:`options_snapshot`), because a fresh
interpreter would otherwise see only environment variables.

Worker side: :func:`serve` is the main loop of a job worker (``launch_python(call=
"workbench.workers.jobs:serve", args=[fd])``). Messages on its connection, parent to worker:
``("init", initializer_pickle | None)`` once, then ``("job", payload, options)`` per job, or
``None`` to stop; worker to parent: ``("ready", pid)`` or ``("init_error", traceback)`` once,
then ``("ok", value)`` or ``("error", traceback)`` per job.
"""
from __future__ import annotations

import os
import pickle
import signal
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from workbench import options

__all__ = ["Chain", "Outcome", "describe_exit", "dumps", "pack_job", "options_snapshot", "run_here",
           "serve"]


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


def dumps(obj: Any) -> bytes:
    """Pickle ``obj`` for another process (``__main__`` objects and lambdas by value)."""
    import cloudpickle

    return cloudpickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def pack_job(fn: Callable[..., Any], args: Sequence[Any]) -> bytes:
    """The pickle of one job; ``TypeError`` naming ``fn`` if it cannot be pickled at all."""
    try:
        return dumps((fn, tuple(args)))
    except Exception as err:  # noqa: BLE001 - any pickling failure
        raise TypeError(f"cannot send {getattr(fn, '__name__', fn)!r} and its arguments to a "
                        f"worker process: {err}. Worker functions (f_build, f_export, "
                        "f_alloc_argument, f_run_evaluator, ...) and their arguments must be "
                        "picklable (module-level functions, or functions of a notebook or "
                        "script that hold no locks, files or sockets)") from err


def options_snapshot() -> dict[str, Any]:
    """The parent's current value of every registered option."""
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


def _call_job(payload: bytes, snapshot: dict[str, Any]) -> tuple:
    try:
        _apply_options(snapshot)
        fn, args = pickle.loads(payload)
        return ("ok", fn(*args))
    except BaseException:  # noqa: BLE001 - everything is reported to the parent
        return ("error", traceback.format_exc())


class Chain:
    """A picklable "call these in order" (a built-in warm-up plus a user's initializer)."""

    def __init__(self, *fns: Callable[[], None] | None) -> None:
        self.fns = [f for f in fns if f is not None]

    def __call__(self) -> None:
        for f in self.fns:
            f()


def run_here(fn: Callable[..., Any], args: Sequence[Any]) -> Outcome:
    """Run a job in this process, reporting an exception as a worker would (the in-process
    fallback when no worker can start). ``KeyboardInterrupt`` and ``SystemExit`` propagate."""
    try:
        return Outcome("ok", fn(*args))
    except Exception:  # noqa: BLE001 - reported like a worker's error
        return Outcome("error", traceback.format_exc())


# ---- worker side ------------------------------------------------------------------------------

def serve(conn_fd: str) -> None:
    """Main loop of a job worker: run the initializer, then one job per message."""
    import faulthandler
    from multiprocessing.connection import Connection

    # A crashing job dumps its Python stack to stderr; the signal is re-raised afterwards, so
    # the parent still sees the real exit status.
    faulthandler.enable()
    conn = Connection(int(conn_fd))
    try:
        _tag, init = conn.recv()
    except (EOFError, OSError):
        return
    try:
        if init is not None:
            pickle.loads(init)()
    except BaseException:  # noqa: BLE001 - reported to the parent
        conn.send(("init_error", traceback.format_exc()))
        return
    conn.send(("ready", os.getpid()))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):
            return  # the parent closed the connection (or died)
        if msg is None:
            return
        _tag, payload, snapshot = msg
        result = _call_job(payload, snapshot)
        try:
            conn.send(result)
        except (EOFError, OSError):
            return
        except Exception:  # noqa: BLE001 - the result itself does not pickle
            conn.send(("error", "the job's result cannot be sent back to the parent:\n" +
                       traceback.format_exc()))
