"""time_evaluator and BenchmarkResult, with TVM's semantics (reference: runtime_vm_profiling.md
section 2).

Each call of an evaluator makes one untimed warm-up call, then ``repeat`` measurements of
``number`` back-to-back calls each, recording seconds per call. With ``min_repeat_ms > 0`` a
too-short measurement is discarded and redone with a larger ``number``::

    number = int(max(GROWTH_TARGET * min_repeat_ms / (duration_ms / number) + 1,
                     number * 1.618))

TVM aims at exactly ``min_repeat_ms`` (``GROWTH_TARGET`` 1); Workbench aims 10% past it. The
estimate comes from a short first measurement, right after the warm-up, and is as often a
little high as low; aimed exactly, 40% of a tuner's measurements of a 1.2 ms kernel fell just
short (96-99.8 ms of 100) and were redone with 1.618x the calls: 260 ms instead of 110.
Like TVM, the grown ``number`` is kept by the evaluator object: later repeats and later calls
of the same evaluator start from it (read it back as ``evaluator.number``). A new evaluator
starts from the ``number`` it was created with. The timer is ``time.perf_counter_ns``, and the
measurement includes the Python call overhead of ``f`` (as TVM's includes its packed-call
overhead).

Beyond TVM, each call first waits (up to the option ``timing_settle_ms``) until the
process's other threads stop running, so a pool still spinning after another library's call
(OpenBLAS after a numpy matmul) does not slow the measured kernel (:mod:`.settle`); and
after the warm-up call, its own OpenMP team is kept running until its parallel regions are
fast (up to ``timing_team_settle_ms``, :func:`.settle.settle_team`): on a VM, threads that
slept can take hundreds of microseconds per region for the first 10-35 ms.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np

from workbench import options

from .device import Device
from .settle import settle_team, wait_for_quiet_threads

__all__ = ["BenchmarkResult", "TimeEvaluator", "time_evaluator"]

# How far past min_repeat_ms a grown measurement aims (module docstring).
GROWTH_TARGET = 1.1


class BenchmarkResult:
    """Timing results in seconds; ``mean``, ``median``, ``min``, ``max`` and ``std``
    (population, ddof=0) are numpy scalars computed once."""

    def __init__(self, results: Sequence[float]) -> None:
        try:
            n = len(results)
        except TypeError:
            raise TypeError(f"BenchmarkResult: results must be a sequence of seconds, got "
                            f"{results!r}") from None
        if n == 0:
            raise ValueError("BenchmarkResult: results must not be empty")
        self.results = results
        data = np.asarray(results, dtype=np.float64)
        self.mean = np.mean(data)
        self.std = np.std(data)
        self.median = np.median(data)
        self.min = np.min(data)
        self.max = np.max(data)

    def __repr__(self) -> str:
        return (f"BenchmarkResult(min={self.min}, mean={self.mean}, median={self.median}, "
                f"max={self.max}, std={self.std}, results={self.results})")

    def __str__(self) -> str:
        ms = [v * 1000 for v in (self.mean, self.median, self.max, self.min, self.std)]
        header = " ".join(f"{h:^12}" for h in
                          ("mean (ms)", "median (ms)", "max (ms)", "min (ms)", "std (ms)"))
        values = " ".join(f"{v:^12.4f}" for v in ms)
        return f"Execution time summary:\n{header}\n{values}" + " " * 15

    def _repr_html_(self) -> str:
        names = ("mean", "median", "max", "min", "std")
        vals = (self.mean, self.median, self.max, self.min, self.std)
        head = "".join(f"<th>{n} (ms)</th>" for n in names)
        row = "".join(f"<td>{v * 1000:.4f}</td>" for v in vals)
        return (f"<table class='workbench-benchmark'><caption>Execution time summary "
                f"({len(self.results)} result{'s' if len(self.results) != 1 else ''})"
                f"</caption><tr>{head}</tr><tr>{row}</tr></table>")


def _check_int(name: str, value: Any, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise ValueError(f"time_evaluator: {name} must be an int >= {low}, got {value!r}")
    return int(value)


def _check_ms(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"time_evaluator: {name} must be a number >= 0, got {value!r}")
    return float(value)


class TimeEvaluator:
    """``evaluator(*args) -> BenchmarkResult``; see the module docstring for the protocol."""

    def __init__(self, func: Callable[..., Any], dev: Device, number: int, repeat: int,
                 min_repeat_ms: float, limit_zero_time_iterations: int,
                 cooldown_interval_ms: float, repeats_to_cooldown: int,
                 cache_flush_bytes: int, f_preproc: Callable[..., Any] | None) -> None:
        self.func = func
        self.dev = dev
        self.number = number
        self.repeat = repeat
        self.min_repeat_ms = min_repeat_ms
        self.limit_zero_time_iterations = limit_zero_time_iterations
        self.cooldown_interval_ms = cooldown_interval_ms
        self.repeats_to_cooldown = repeats_to_cooldown
        self.cache_flush_bytes = cache_flush_bytes
        self.f_preproc = f_preproc

    def __call__(self, *args: Any) -> BenchmarkResult:
        f = self.func
        # Other libraries' thread pools may still spin after their last call (OpenBLAS for
        # ~0.1 s after a numpy matmul) and would share the cores with a parallel kernel.
        wait_for_quiet_threads(float(options.get("timing_settle_ms")) / 1000.0)
        f(*args)  # warm-up: lazy initialisation, page faults, caches
        settle_team()
        flush = None
        if self.cache_flush_bytes > 0:
            count = max(1, self.cache_flush_bytes // 4)
            flush = (np.empty(count, dtype=np.int32), np.ones(count, dtype=np.int32))
        self.dev.sync()
        results = []
        number = self.number
        clock = time.perf_counter_ns
        for i in range(self.repeat):
            if self.f_preproc is not None:
                self.f_preproc(*args)
            duration_ms = 0.0
            zero_count = 0
            while True:
                if duration_ms > 0.0:
                    number = int(max(GROWTH_TARGET * self.min_repeat_ms /
                                     (duration_ms / number) + 1, number * 1.618))
                if flush is not None:
                    np.copyto(flush[0], flush[1])
                self.dev.sync()
                start = clock()
                for _ in range(number):
                    f(*args)
                self.dev.sync()
                ns = clock() - start
                if ns == 0:
                    zero_count += 1
                duration_ms = ns / 1e6
                if not (duration_ms < self.min_repeat_ms
                        and zero_count < self.limit_zero_time_iterations):
                    break
            self.number = number  # TVM keeps the grown number for later repeats and calls
            results.append(duration_ms / 1000.0 / number)
            if self.cooldown_interval_ms > 0 and i % self.repeats_to_cooldown == 0:
                time.sleep(self.cooldown_interval_ms / 1000.0)
        return BenchmarkResult(tuple(results))


def time_evaluator(func: Callable[..., Any], dev: Device, number: int = 10, repeat: int = 1,
                   min_repeat_ms: float = 0, limit_zero_time_iterations: int = 100,
                   cooldown_interval_ms: float = 0, repeats_to_cooldown: int = 1,
                   cache_flush_bytes: int = 0,
                   f_preproc: str | Callable[..., Any] = "") -> TimeEvaluator:
    """Build an evaluator for an already resolved callable (Module and VM resolve names).

    ``f_preproc`` is a global-registry name (as in TVM), a callable, or "" for none; a
    missing name raises ``AttributeError``. Argument errors raise ``ValueError``/``TypeError``
    naming the parameter.
    """
    if not callable(func):
        raise TypeError(f"time_evaluator: func must be callable, got {func!r}")
    if not isinstance(dev, Device):
        raise TypeError(f"time_evaluator: dev must be a workbench Device such as "
                        f"workbench.cpu(0), got {dev!r}")
    pre = None
    if isinstance(f_preproc, str):
        if f_preproc:
            from .registry import get_global_func

            pre = get_global_func(f_preproc, allow_missing=True)
            if pre is None:
                raise AttributeError(f"time_evaluator: cannot find f_preproc {f_preproc!r} in "
                                     "the global registry (register it with "
                                     "workbench.runtime.register_func)")
    elif callable(f_preproc):
        pre = f_preproc
    else:
        raise TypeError(f"time_evaluator: f_preproc must be a registry name or a callable, "
                        f"got {f_preproc!r}")
    return TimeEvaluator(
        func, dev,
        number=_check_int("number", number, 1),
        repeat=_check_int("repeat", repeat, 1),
        min_repeat_ms=_check_ms("min_repeat_ms", min_repeat_ms),
        limit_zero_time_iterations=_check_int("limit_zero_time_iterations",
                                              limit_zero_time_iterations, 1),
        cooldown_interval_ms=_check_ms("cooldown_interval_ms", cooldown_interval_ms),
        repeats_to_cooldown=_check_int("repeats_to_cooldown", repeats_to_cooldown, 1),
        cache_flush_bytes=_check_int("cache_flush_bytes", cache_flush_bytes, 0),
        f_preproc=pre,
    )
