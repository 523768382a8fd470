"""``launch_python``: the one way Workbench starts a helper process.

Every process Workbench (or its tests) starts -- tuning workers, a compile helper, Dask
processes, a JupyterLab server for the browser tests -- goes through :func:`launch_python`,
which starts a *fresh* interpreter (``sys.executable``) running :mod:`._boot` first. That gives
every such process the same guarantees, whatever started it (a script without a main guard, a
notebook cell, a thread):

- the parent's ``__main__`` is never imported or run (``multiprocessing``'s spawn re-runs a
  script's module-level code in every worker);
- it ends when the parent process ends, however the parent ends (``kill -9`` included): a
  lifeline pipe, plus ``PR_SET_PDEATHSIG`` where the kernel's semantics allow it (Linux, started
  from the parent's main thread);
- it is stopped at the parent's normal exit (``atexit``), unless asked otherwise;
- it sees the parent's ``sys.path`` and working directory, and inherits its environment;
- by default it ignores SIGINT, so a Ctrl-C or a Jupyter interrupt reaches only the parent,
  which decides what stops (workers print no ``KeyboardInterrupt`` tracebacks);
- it stays in the parent's process group unless ``new_session=True`` (so Jupyter, which kills
  a kernel's whole group on restart, takes the kernel's workers with it).
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import sys
import threading
import weakref
from typing import IO, Any, Mapping, Sequence

__all__ = ["launch_python", "stop_process"]

_BOOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_boot.py")
# -P keeps the working directory off sys.path until the boot code installs the parent's.
_LOADER = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"

_LAUNCHED: "weakref.WeakSet[subprocess.Popen]" = weakref.WeakSet()
_LAUNCHED_LOCK = threading.Lock()


def _interpreter_flags() -> list[str]:
    # -O, -B, -X dev, -W ...: the worker runs Python the way the parent does.
    flags = subprocess._args_from_interpreter_flags()  # type: ignore[attr-defined]
    if "-P" not in flags and "-I" not in flags:
        flags.append("-P")
    return flags


def launch_python(*, call: str | None = None, module: str | None = None,
                  args: Sequence[str] = (), name: str | None = None,
                  ignore_sigint: bool = True, exit_signal: int = 0, exit_grace: float = 10.0,
                  new_session: bool = False, stop_at_exit: bool = True,
                  stop_grace: float = 0.0, pass_fds: Sequence[int] = (),
                  env: Mapping[str, str] | None = None, cwd: str | None = None,
                  stdin: int | IO[Any] | None = subprocess.DEVNULL,
                  stdout: int | IO[Any] | None = None,
                  stderr: int | IO[Any] | None = None) -> subprocess.Popen:
    """Start ``sys.executable`` as a helper process of this one; return its ``Popen``.

    What runs: ``call="package.module:function"`` (called as ``function(*args)``, strings) or
    ``module="package.module"`` (run as ``__main__`` with ``sys.argv = [module, *args]``, as
    ``python -m`` would). Exactly one of the two.

    ``name``: the process name shown by ``ps``/``top`` (Linux, at most 15 characters kept).
    ``ignore_sigint``: ignore SIGINT (Ctrl-C / a Jupyter interrupt go to the whole process
    group; the parent decides). Leave it False for programs that start processes of their own
    that must be interruptible (SIG_IGN is inherited), e.g. a Jupyter server.
    ``exit_signal``: what happens when the parent dies: 0 ends the process at once
    (``os._exit``); a signal number (say ``signal.SIGTERM``) is sent to the process first so it
    can shut down its own children, and it is ended ``exit_grace`` seconds later if still alive.
    ``new_session``: start a new session (and process group); ``stop_process`` then signals
    the whole group.
    ``stop_at_exit`` / ``stop_grace``: stop it with :func:`stop_process` when this interpreter
    exits normally.
    ``pass_fds``: more file descriptors to hand over (e.g. one end of a socketpair).
    ``env``, ``cwd``, ``stdin``, ``stdout``, ``stderr``: as for ``subprocess.Popen`` (stdin
    defaults to ``/dev/null``; stdout/stderr are inherited).

    Raises ``OSError`` if the interpreter cannot be started (``sys.executable`` missing, no
    more processes allowed, ...): callers fall back or report, see :mod:`workbench.workers`.
    """
    if (call is None) == (module is None):
        raise ValueError("launch_python: give exactly one of call= and module=")
    if call is not None and ":" not in call:
        raise ValueError(f"launch_python: call must be 'package.module:function', got {call!r}")
    if not sys.executable:
        raise OSError("this interpreter does not know its own executable (sys.executable is "
                      "empty), so it cannot start a Python process")
    lifeline_read, lifeline_write = os.pipe()  # both ends non-inheritable by default
    main_thread = threading.current_thread() is threading.main_thread()
    config = {
        "parent_pid": os.getpid(), "lifeline_fd": lifeline_read,
        "pdeathsig": (exit_signal or signal.SIGKILL) if main_thread else 0,
        "exit_signal": int(exit_signal), "exit_grace": float(exit_grace),
        "ignore_sigint": bool(ignore_sigint),
        # (a notebook may have put a Path or something stranger on sys.path)
        "sys_path": [os.fspath(p) for p in sys.path if isinstance(p, (str, os.PathLike))],
        "call": call, "module": module, "args": [str(a) for a in args], "name": name,
    }
    command = [sys.executable, *_interpreter_flags(), "-c", _LOADER, _BOOT, json.dumps(config)]
    # With SIGINT blocked while forking, the child inherits the block and cannot die of an
    # interrupt before its boot code has set it to "ignore".
    blocked = ignore_sigint and hasattr(signal, "pthread_sigmask")
    if blocked:
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        proc = subprocess.Popen(command, pass_fds=(lifeline_read, *pass_fds), env=env, cwd=cwd,
                                stdin=stdin, stdout=stdout, stderr=stderr,
                                start_new_session=new_session)
    except BaseException:
        os.close(lifeline_write)
        raise
    finally:
        os.close(lifeline_read)
        if blocked:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    proc.workbench_lifeline = lifeline_write  # type: ignore[attr-defined]
    proc.workbench_new_session = new_session  # type: ignore[attr-defined]
    proc.workbench_stop_grace = stop_grace  # type: ignore[attr-defined]
    # The pipe's write end lives exactly as long as the Popen object: dropping the object
    # (or this interpreter ending) closes it, and the child follows.
    weakref.finalize(proc, _close_quietly, lifeline_write)
    if stop_at_exit:
        with _LAUNCHED_LOCK:
            _LAUNCHED.add(proc)
    return proc


def _close_quietly(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass


def stop_process(proc: subprocess.Popen, grace: float | None = None) -> int | None:
    """Stop a process started by :func:`launch_python` and reap it; return its exit status.

    With ``grace > 0`` (default: the ``stop_grace`` it was launched with) it is sent SIGTERM
    first -- its whole process group when it was launched with ``new_session`` -- and SIGKILL
    after ``grace`` seconds; with 0 it is killed at once. Safe to call twice."""
    if grace is None:
        grace = getattr(proc, "workbench_stop_grace", 0.0)
    group = getattr(proc, "workbench_new_session", False)
    if proc.poll() is None:
        if grace > 0:
            _signal(proc, signal.SIGTERM, group)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            _signal(proc, signal.SIGKILL, group)
    elif group:
        _signal(proc, signal.SIGKILL, True)  # the leader is gone; its group may not be
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL is not ignorable
        pass
    with _LAUNCHED_LOCK:
        _LAUNCHED.discard(proc)
    return proc.returncode


def _signal(proc: subprocess.Popen, signum: int, group: bool) -> None:
    try:
        if group:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
    except (ProcessLookupError, PermissionError):
        pass


@atexit.register
def _stop_all_at_exit() -> None:
    with _LAUNCHED_LOCK:
        procs = list(_LAUNCHED)
    for proc in procs:
        try:
            stop_process(proc)
        except Exception:  # noqa: BLE001 - interpreter shutdown: best effort
            pass
