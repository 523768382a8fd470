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

Our own OpenMP team needs the opposite: to be awake. :func:`settle_team` runs empty parallel
regions until they run at full speed. On the project's 2-core VMs a team whose threads slept
for a while (between two candidates of a tuner, or during a cache flush) came back slowly: for
10-35 ms every parallel region, an empty one too, cost 250-900 us (in multiples of ~300 us,
as if the vCPU got the host's core a time slice at a time) instead of 2-5 us, and then was
fast again as long as it kept running. A tuner's measurement of a 16 us kernel, cache flushed
and the team woken once before each call, came out at 17-664 us (median of 10 calls, four
runs); with the team settled first, 16-23 us -- what the kernel takes in a model, where the
kernels keep the team busy.
"""
from __future__ import annotations

import os
import threading
import time

from workbench import options

from . import loader

__all__ = ["running_threads", "settle_team", "wait_for_quiet_threads"]

_TASKS = "/proc/self/task"
_POLL_SECS = 0.001
#: An empty parallel region that takes less than this is fast (2-5 us on a quiet machine).
FAST_REGION_SECS = 20e-6
#: So many fast regions in a row: settled.
FAST_STREAK = 4


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


def settle_team(max_seconds: float | None = None) -> int:
    """Run empty parallel regions on the calling thread's OpenMP team
    (:func:`~workbench.runtime.loader.wake_threads`) until :data:`FAST_STREAK` of them in a
    row each took less than :data:`FAST_REGION_SECS`, for at most ``max_seconds`` (None: the
    option ``timing_team_settle_ms``); at least one region, which wakes the team. Returns the
    number of regions run (0 without libgomp: no team). On a machine busier than its cores
    the regions never get fast and the bound ends the wait: a measurement is delayed, never
    blocked."""
    if max_seconds is None:
        max_seconds = float(options.get("timing_team_settle_ms")) / 1000.0
    t0 = clock = time.perf_counter()
    fast = regions = 0
    while True:
        if not loader.wake_threads():
            return regions
        regions += 1
        now = time.perf_counter()
        fast = fast + 1 if now - clock < FAST_REGION_SECS else 0
        if fast >= FAST_STREAK or now - t0 >= max_seconds:
            return regions
        clock = now
