"""Helper processes: how Workbench starts them, sends them work, and makes sure they end.

The contract (docs/internals.md, "Worker processes"):

- :func:`launch_python` is the one way to start a helper process. It runs a *fresh*
  interpreter that never imports the parent's ``__main__`` (so a script without a main guard,
  a notebook, or code running in a thread all behave alike), ends when the parent process
  ends (even by ``kill -9``), is stopped at the parent's normal exit, ignores SIGINT unless
  told otherwise, and sees the parent's ``sys.path``. :func:`stop_process` stops one.
- :class:`WorkerPool` runs jobs (``fn(*args)``, pickled with ``cloudpickle``) in persistent
  job workers with per-job time limits; a hang or a crash costs only its own job. A pool that
  cannot start raises :class:`WorkerStartError` with a one-line ``reason``; callers print
  that line once and fall back to doing the work in-process.
- Jobs carry the parent's option values; results come back as :class:`Outcome`.

This package sits below every layer (it imports only :mod:`workbench.options`), so the
tuner, the compiler and the RPC layer can all use it.
"""
from workbench.workers.jobs import Chain, Outcome, describe_exit, dumps, pack_job, run_here
from workbench.workers.launch import launch_python, stop_process
from workbench.workers.pool import WorkerPool
from workbench.workers.worker import WorkerProcess, WorkerStartError

__all__ = ["launch_python", "stop_process", "WorkerPool", "WorkerProcess", "WorkerStartError",
           "Chain", "Outcome", "describe_exit", "dumps", "pack_job", "run_here"]
