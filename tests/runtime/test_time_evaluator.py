import threading

import numpy as np
import pytest

import rt_kernels as K
import workbench.nd as nd
from workbench.runtime import (BenchmarkResult, cpu, get_global_func, list_global_func_names,
                               register_func, remove_global_func, time_evaluator)
from workbench.runtime import evaluator as evaluator_mod


# -- BenchmarkResult ------------------------------------------------------------------------

def test_benchmark_result_statistics():
    r = BenchmarkResult([1, 2, 2, 5])
    assert r.mean == 2.5 and r.median == 2.0 and r.min == 1 and r.max == 5 and r.std == 1.5
    assert r.results == [1, 2, 2, 5]                   # stored unchanged


def test_benchmark_result_str_exact():
    r = BenchmarkResult((0.001, 0.002))
    assert str(r) == (
        "Execution time summary:\n"
        " mean (ms)   median (ms)    max (ms)     min (ms)     std (ms)  \n"
        "   1.5000       1.5000       2.0000       1.0000       0.5000                  ")


def test_benchmark_result_repr_and_html():
    r = BenchmarkResult((1.0, 3.0))
    assert repr(r) == ("BenchmarkResult(min=1.0, mean=2.0, median=2.0, max=3.0, std=1.0, "
                       "results=(1.0, 3.0))")
    h = r._repr_html_()
    assert "mean (ms)" in h and "2000.0000" in h and "2 results" in h
    with pytest.raises(ValueError, match="must not be empty"):
        BenchmarkResult(())


# -- call counts with a compiled kernel -----------------------------------------------------

def _count_kernel():
    mod = K.build(K.COUNT)
    out = nd.empty(1, "int64")
    return mod, out


@pytest.mark.parametrize("number, repeat", [(10, 1), (3, 4), (2, 3), (1, 1)])
def test_call_count_is_one_plus_number_times_repeat(number, repeat):
    mod, out = _count_kernel()
    ev = mod.time_evaluator("count", cpu(0), number=number, repeat=repeat)
    res = ev(out)
    assert out.numpy()[0] == 1 + number * repeat
    assert isinstance(res, BenchmarkResult) and isinstance(res.results, tuple)
    assert len(res.results) == repeat and all(t > 0 for t in res.results)
    assert res.results[0] < 1.0                         # seconds per call, not ms


def test_f_preproc_runs_once_per_repeat():
    mod, out = _count_kernel()
    seen = []

    @register_func("test.rt.preproc", override=True)
    def preproc(*args):
        seen.append(int(args[0].numpy()[0]))

    try:
        mod.time_evaluator("count", cpu(), number=2, repeat=3, f_preproc="test.rt.preproc")(out)
    finally:
        remove_global_func("test.rt.preproc")
    assert seen == [1, 3, 5]        # after warm-up, then after each repeat's 2 calls
    assert out.numpy()[0] == 7


# -- adaptive number, with a fake clock -----------------------------------------------------

class FakeClock:
    """perf_counter_ns replacement; the timed function advances it by ``step_ns`` per call."""

    def __init__(self, step_ns):
        self.now = 0
        self.step_ns = step_ns
        self.calls = 0

    def clock(self):
        return self.now

    def func(self, *args):
        self.calls += 1
        self.now += self.step_ns


def test_min_repeat_ms_grows_number_and_it_persists(monkeypatch):
    fake = FakeClock(1_000_000)                         # 1 ms per call
    monkeypatch.setattr(evaluator_mod.time, "perf_counter_ns", fake.clock)
    ev = time_evaluator(fake.func, cpu(), number=1, repeat=1, min_repeat_ms=10)
    res = ev()
    # warm-up + 1 (1 ms, too short) + int(max(1.1 * 10/1 + 1, 1.618)) = 12 -> 14 calls
    # (TVM aims at exactly 10 ms: 11 calls).
    assert fake.calls == 14
    assert ev.number == 12
    assert res.results == pytest.approx((0.001,))
    fake.calls = 0
    ev()                                                 # starts from the grown number
    assert fake.calls == 1 + 12
    fresh = time_evaluator(fake.func, cpu(), number=1, repeat=1, min_repeat_ms=10)
    assert fresh.number == 1


def test_growth_aims_past_min_repeat_ms(monkeypatch):
    """The first short measurement runs a little slow (caches, a core waking up): aimed at
    exactly min_repeat_ms, the grown one falls just short and is redone with 1.618x the calls;
    aimed 10% past it, one growth is enough."""
    fake = FakeClock(1_000_000)
    slow = {"left": 4}                                   # warm-up + the first 3 calls: 1.03 ms

    def func(*args):
        fake.calls += 1
        fake.now += 1_030_000 if slow["left"] > 0 else 1_000_000
        slow["left"] -= 1

    monkeypatch.setattr(evaluator_mod.time, "perf_counter_ns", fake.clock)
    ev = time_evaluator(func, cpu(), number=3, min_repeat_ms=100)
    res = ev()
    # 3 calls in 3.09 ms -> int(1.1 * 100 / 1.03 + 1) = 107 calls, 107 ms: done (TVM: 98
    # calls, 98 ms, then 158 more).
    assert ev.number == 107 and fake.calls == 1 + 3 + 107
    assert res.results == pytest.approx((0.001,))


def test_growth_by_golden_ratio(monkeypatch):
    fake = FakeClock(1_000_000)
    monkeypatch.setattr(evaluator_mod.time, "perf_counter_ns", fake.clock)
    # 10 calls take 10 ms: 1.1 * min_repeat_ms/(10/10)+1 = 14.2 < 10*1.618 = 16.18 -> 16.
    ev = time_evaluator(fake.func, cpu(), number=10, min_repeat_ms=12)
    ev()
    assert ev.number == 16 and fake.calls == 1 + 10 + 16


def test_zero_time_iterations_are_limited(monkeypatch):
    fake = FakeClock(0)                                  # the clock never moves
    monkeypatch.setattr(evaluator_mod.time, "perf_counter_ns", fake.clock)
    ev = time_evaluator(fake.func, cpu(), number=2, repeat=2, min_repeat_ms=5,
                        limit_zero_time_iterations=4)
    res = ev()
    assert fake.calls == 1 + 2 * (4 * 2)
    assert res.results == (0.0, 0.0)


def test_cooldown_schedule(monkeypatch):
    # time.sleep is patched for every thread: record this thread's calls only, and let other
    # threads (pools, clients left by earlier tests) really sleep
    sleeps, real_sleep, me = [], evaluator_mod.time.sleep, threading.get_ident()
    monkeypatch.setattr(evaluator_mod.time, "sleep", lambda s: sleeps.append(s)
                        if threading.get_ident() == me else real_sleep(s))
    # the settling wait polls with its own sleeps while a thread left by an earlier test runs
    # (test_timing_neighbours.py covers it): only the cooldown's sleeps are counted here
    monkeypatch.setattr(evaluator_mod, "wait_for_quiet_threads", lambda max_seconds: 0.0)
    ev = time_evaluator(lambda: None, cpu(), number=1, repeat=5, cooldown_interval_ms=3,
                        repeats_to_cooldown=2)
    assert len(ev().results) == 5
    assert sleeps == [0.003, 0.003, 0.003]              # after repeats 0, 2 and 4


def test_cache_flush_runs():
    calls = []
    res = time_evaluator(lambda: calls.append(1), cpu(), number=2, repeat=2,
                         cache_flush_bytes=1 << 16)()
    assert len(calls) == 5 and len(res.results) == 2


# -- lookup and argument errors -------------------------------------------------------------

def test_module_time_evaluator_falls_back_to_global_registry():
    mod, _ = _count_kernel()
    calls = []
    register_func("test.rt.target", lambda *a: calls.append(a), override=True)
    try:
        mod.time_evaluator("test.rt.target", cpu(), number=2)(5)
    finally:
        remove_global_func("test.rt.target")
    assert calls == [(5,)] * 3


def test_evaluator_errors():
    mod, _ = _count_kernel()
    with pytest.raises(AttributeError, match="cannot find 'nope'.*global registry"):
        mod.time_evaluator("nope", cpu())
    with pytest.raises(AttributeError, match="f_preproc 'missing.fn'"):
        mod.time_evaluator("count", cpu(), f_preproc="missing.fn")
    with pytest.raises(ValueError, match="number must be an int >= 1, got 0"):
        mod.time_evaluator("count", cpu(), number=0)
    with pytest.raises(ValueError, match="repeats_to_cooldown"):
        mod.time_evaluator("count", cpu(), repeats_to_cooldown=0)
    with pytest.raises(ValueError, match="min_repeat_ms"):
        mod.time_evaluator("count", cpu(), min_repeat_ms=-1)
    with pytest.raises(TypeError, match="dev must be a workbench Device"):
        mod.time_evaluator("count", "cpu")


def test_global_registry():
    @register_func("test.rt.add_one")
    def add_one(x):
        return x + 1

    try:
        f = get_global_func("test.rt.add_one")
        assert f(1) == 2 and f.name == "test.rt.add_one" and not f.is_kernel
        assert "test.rt.add_one" in list_global_func_names()
        with pytest.raises(ValueError, match="already registered"):
            register_func("test.rt.add_one", lambda x: x)
        register_func("test.rt.add_one", lambda x: x + 2, override=True)
        assert get_global_func("test.rt.add_one")(1) == 3
    finally:
        remove_global_func("test.rt.add_one")
    assert get_global_func("test.rt.add_one", allow_missing=True) is None
    with pytest.raises(ValueError, match="Cannot find global function 'test.rt.add_one'"):
        get_global_func("test.rt.add_one")

    @register_func
    def test_rt_named(x):
        return -x

    try:
        assert get_global_func("test_rt_named")(3) == -3
    finally:
        remove_global_func("test_rt_named")


def test_real_kernel_timing_is_plausible():
    mod = K.build(K.ADD)
    a = nd.array(np.ones(256, dtype="float32"))
    c = nd.empty(256)
    res = mod.time_evaluator("add", cpu(), number=50, repeat=3)(a, a, c)
    assert 0 < res.min <= res.median <= res.max < 0.01
    assert "Execution time summary" in str(res)
