"""Waiting for the process's other threads to go quiet before a measurement.

Thread pools of other libraries keep their threads spinning for a while after a call, so the
next parallel kernel shares the cores with them: right after a 512x512 ``numpy.matmul`` on a
2-core machine, OpenBLAS's worker stays runnable for about 0.1 s and our kernel runs up to 2x
slower (``benchmarks/bench_blas_interference.py``). Limiting OpenBLAS's thread count
(threadpoolctl) does not stop a worker that is already spinning, and nothing else can be
asked of a foreign pool, so a measurement waits for it instead.

:func:`wait_for_quiet_threads` polls the scheduler state of every thread of this process
(Linux ``/proc/self/task/*/stat``) until none but the caller is running or runnable, for at
most the given time: a pool spinning down ends the wait as soon as it sleeps, a thread that
really computes (a worker thread of the user's) only delays the measurement by the bound.
Where ``/proc`` is not available it returns at once.
"""
from __future__ import annotations

import os
import threading
import time

__all__ = ["running_threads", "wait_for_quiet_threads"]

_TASKS = "/proc/self/task"
_POLL_SECS = 0.001


def running_threads() -> list[int] | None:
    """Native ids of this process's threads that are running or runnable (state ``R``),
    the caller excluded; None where ``/proc`` cannot tell."""
    me = threading.get_native_id()
    try:
        tids = os.listdir(_TASKS)
    except OSError:
        return None
    out = []
    for tid in tids:
        if int(tid) == me:
            continue
        try:
            with open(f"{_TASKS}/{tid}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # the thread ended meanwhile
        # "pid (comm) S ...": comm may hold spaces or parentheses, the state follows the last ')'
        state = stat[stat.rindex(b")") + 2:stat.rindex(b")") + 3]
        if state == b"R":
            out.append(int(tid))
    return out


def wait_for_quiet_threads(max_seconds: float) -> float:
    """Sleep until no other thread of this process runs, at most ``max_seconds``; returns the
    seconds waited."""
    if max_seconds <= 0:
        return 0.0
    t0 = time.perf_counter()
    while True:
        busy = running_threads()
        waited = time.perf_counter() - t0
        if not busy or waited >= max_seconds:
            return waited
        time.sleep(_POLL_SECS)
