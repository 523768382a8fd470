"""The first code every process started by :func:`workbench.workers.launch_python` runs.

It is executed by path (``python -P -c "runpy.run_path(<this file>)" <config>``), not imported,
so it uses the standard library only and starts without importing the ``workbench`` package
(a JupyterLab server or a Dask worker started this way pays nothing for it). ``<config>`` is a
JSON object written by ``launch_python``:

- ``parent_pid``: the process that launched us; ``lifeline_fd``: the read end of a pipe whose
  write end only the parent holds. When the parent process ends, for whatever reason (SIGKILL
  included), the pipe reports end-of-file and a watcher thread ends this process: with
  ``exit_signal`` sent to itself (SIGTERM lets a server shut down its own children), then
  ``os._exit`` after ``exit_grace`` seconds if that did not end it. The watcher also notices a
  changed ``getppid()`` (the pipe could be held open by a stray ``fork`` of the parent).
- ``pdeathsig``: when non-zero (Linux, and the parent launched us from its main thread, since
  the kernel ties this signal to the launching *thread*), ``prctl(PR_SET_PDEATHSIG)`` makes the
  kernel deliver it the moment the parent dies, even while this process holds the GIL in a
  long C call and the watcher cannot run.
- ``ignore_sigint``: ignore SIGINT, which a terminal's Ctrl-C or Jupyter's interrupt sends to
  the whole process group; the parent decides what an interrupt stops. (The launcher starts
  us with SIGINT blocked, so none is lost to a traceback before this runs.)
- ``name``: the process name ``ps`` and ``top`` show (``PR_SET_NAME``), e.g. ``wb-build``.
- ``sys_path``: the parent's ``sys.path``, so the parent's modules import here too (a script's
  own directory, a notebook's working directory, test helpers).
- ``call`` (``"package.module:function"`` called with ``args``) or ``module`` (run as
  ``__main__`` with ``sys.argv = [module, *args]``, like ``python -m``).

The parent's ``__main__`` is never imported: this is the difference from ``multiprocessing``'s
spawn, which re-runs the parent's main script (so a script without a main guard would start
its work again in every worker).
"""
import json
import os
import select
import signal
import sys
import threading
import time

_PR_SET_PDEATHSIG = 1
_PR_SET_NAME = 15


def _prctl(option: int, arg: object) -> None:
    """``prctl(option, arg)`` on Linux; nothing elsewhere or if it fails (both uses are
    conveniences: the lifeline watcher ends us anyway, a moment later)."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(option, arg, 0, 0, 0)
    except (OSError, AttributeError, TypeError):
        pass


def _end_self(exit_signal: int, grace: float) -> None:
    if exit_signal:
        try:
            os.kill(os.getpid(), exit_signal)
        except OSError:
            pass
        time.sleep(grace)
    os._exit(1)


def _watch_parent(lifeline_fd: int, parent_pid: int, exit_signal: int, grace: float) -> None:
    def watch() -> None:
        while True:
            try:
                readable, _, _ = select.select([lifeline_fd], [], [], 1.0)
                if readable and not os.read(lifeline_fd, 64):
                    break  # end-of-file: the parent process is gone
            except InterruptedError:
                continue
            except OSError:
                break
            if os.getppid() != parent_pid:
                break
        _end_self(exit_signal, grace)

    threading.Thread(target=watch, name="workbench-lifeline", daemon=True).start()


def main(config: dict) -> None:
    parent_pid = config["parent_pid"]
    if config.get("pdeathsig"):
        _prctl(_PR_SET_PDEATHSIG, int(config["pdeathsig"]))
    if config.get("name"):
        _prctl(_PR_SET_NAME, str(config["name"]).encode()[:15])
    if os.getppid() != parent_pid:  # the parent died before we could watch it
        os._exit(1)
    if config.get("ignore_sigint"):
        # The launcher blocked SIGINT around the start, so none arrived before this line.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    if config.get("lifeline_fd") is not None:
        _watch_parent(config["lifeline_fd"], parent_pid, config.get("exit_signal", 0),
                      config.get("exit_grace", 10.0))
    sys.path[:] = config["sys_path"]
    args = [str(a) for a in config.get("args", [])]
    if config.get("call"):
        import importlib

        module_name, _, func_name = config["call"].partition(":")
        sys.argv = [module_name, *args]
        func = getattr(importlib.import_module(module_name), func_name)
        func(*args)
    else:
        import runpy

        sys.argv = [config["module"], *args]
        runpy.run_module(config["module"], run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main(json.loads(sys.argv[-1]))
