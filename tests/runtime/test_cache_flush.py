"""The runner's cache flush: clflush of given arrays (TVM's cache_flush_cpu_non_first_arg)."""
import numpy as np
import pytest

import workbench as wb
from workbench.meta_schedule.runner import utils as runner_utils
from workbench.runtime import cache_flush, get_global_func

x86 = pytest.mark.skipif(not cache_flush.available(), reason="clflush needs an x86-64 CPU")


@x86
def test_flush_keeps_contents():
    rng = np.random.default_rng(0)
    a = rng.uniform(-1, 1, size=(300, 77)).astype("float32")   # not a whole number of lines
    b = wb.nd.array(a)
    c = np.arange(5, dtype="int8")
    cache_flush.flush([a, b, c, np.zeros(0, "float32"), wb.nd.array(np.zeros((0, 3)))])
    np.testing.assert_array_equal(b.numpy(), a)
    np.testing.assert_array_equal(c, np.arange(5, dtype="int8"))
    cache_flush.flush(())                                # nothing to do
    d = np.arange(100, dtype="int8")
    cache_flush.flush([d[1:], d[63:]])                   # views not starting on a line
    np.testing.assert_array_equal(d, np.arange(100, dtype="int8"))


@pytest.mark.parametrize("ptr,nbytes", [(0, 1), (0, 64), (32, 64), (63, 2), (64, 65),
                                        (100, 1000)])
def test_every_line_of_an_array_is_flushed(ptr, nbytes):
    """flush_lines flushes start, start + 64, ... below start + length: those addresses'
    lines must be exactly the lines the array's bytes lie in."""
    start, length = cache_flush._line_span(ptr, nbytes)
    flushed = {a // 64 for a in range(start, start + length, 64)}
    assert flushed == {b // 64 for b in range(ptr, ptr + nbytes)}


@x86
def test_flush_rejects_what_it_cannot_flush():
    a = np.zeros((64, 64), "float32")
    with pytest.raises(ValueError, match="array 1 is not contiguous"):
        cache_flush.flush([a, a[:, ::2]])
    with pytest.raises(TypeError, match="array 0 must be a workbench NDArray or a numpy"):
        cache_flush.flush([[1.0, 2.0]])


def test_flush_needs_x86(monkeypatch):
    monkeypatch.setattr(cache_flush.platform, "machine", lambda: "aarch64")
    assert not cache_flush.available()
    with pytest.raises(RuntimeError, match="clflush needs an x86-64 CPU, this one is 'aarch64'"):
        cache_flush.flush([np.zeros(4)])


def test_runner_flush_skips_the_first_argument(monkeypatch):
    """TVM's semantics: the first argument (the input a model's previous kernel just wrote)
    stays in cache, the others are flushed."""
    seen = []
    monkeypatch.setattr(cache_flush, "available", lambda: True)
    monkeypatch.setattr(cache_flush, "flush", lambda arrays: seen.append(list(arrays)))
    a, b, c = (np.zeros(16, "float32") for _ in range(3))
    get_global_func(runner_utils.CACHE_FLUSH_FUNC)(a, b, c)
    assert len(seen) == 1 and seen[0][0] is b and seen[0][1] is c and len(seen[0]) == 2


def test_runner_flush_without_clflush_sweeps_a_buffer(monkeypatch):
    from workbench import options
    monkeypatch.setattr(cache_flush, "available", lambda: False)
    monkeypatch.setattr(runner_utils, "_FLUSH", [])
    with options.override(ms_cache_flush_bytes=1 << 16):
        runner_utils._flush_cpu_caches(np.zeros(4), np.zeros(4))
        runner_utils._flush_cpu_caches(np.zeros(4), np.zeros(4))
    (buf,) = runner_utils._FLUSH
    assert buf.nbytes == 1 << 16 and (buf == 2).all()   # written once per call


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_wake_threads_runs_a_region_on_the_whole_team(threads):
    """The runner wakes the kernel's OpenMP team after a flush: the empty region runs on as
    many threads as a parallel kernel called from this thread would get."""
    from workbench import options
    from workbench.runtime import loader
    if loader.ensure_gomp(required=False) is None:
        pytest.skip("no libgomp here")
    with options.override(num_threads=threads):
        assert loader.wake_threads() == threads
        assert loader.wake_threads() == threads       # compiled once, runs again


def test_wake_threads_without_libgomp(monkeypatch):
    from workbench.runtime import loader
    monkeypatch.setattr(loader, "_gomp", None)
    assert loader.wake_threads() == 0


@pytest.mark.parametrize("clflush", [True, False])
def test_runner_flush_wakes_the_team_last(monkeypatch, clflush):
    """The timed call must not pay the wake-up of threads that fell asleep during the flush:
    the team is woken after the flush (clflush or the buffer sweep), once per call."""
    from workbench import options
    seen = []
    monkeypatch.setattr(cache_flush, "available", lambda: clflush)
    monkeypatch.setattr(cache_flush, "flush", lambda arrays: seen.append("flush"))
    monkeypatch.setattr(runner_utils, "_FLUSH", [])
    monkeypatch.setattr(runner_utils, "settle_team", lambda max_seconds=None: seen.append("wake") or 4)
    with options.override(ms_cache_flush_bytes=1 << 12):
        get_global_func(runner_utils.CACHE_FLUSH_FUNC)(np.zeros(4), np.zeros(4))
    assert seen == (["flush", "wake"] if clflush else ["wake"])
    if not clflush:
        assert (runner_utils._FLUSH[0] == 1).all()        # swept before the wake


class _Team:
    """A fake OpenMP team: each region takes the next of ``durations`` seconds on a fake
    clock (``settle.time.perf_counter``)."""

    def __init__(self, monkeypatch, durations, threads=2):
        from workbench.runtime import settle
        self.now, self.durations, self.regions = 0.0, list(durations), 0
        monkeypatch.setattr(settle.time, "perf_counter", lambda: self.now)
        monkeypatch.setattr(settle.loader, "wake_threads", self._region)
        self.threads = threads

    def _region(self):
        if not self.threads:
            return 0
        self.now += self.durations[min(self.regions, len(self.durations) - 1)]
        self.regions += 1
        return self.threads


def test_settle_team_runs_regions_until_a_streak_is_fast(monkeypatch):
    """Slow regions (a team coming back from sleep on a VM) are followed until FAST_STREAK
    fast ones in a row; a slow one in between starts the streak again."""
    from workbench.runtime import settle
    slow, fast = 600e-6, 3e-6
    team = _Team(monkeypatch, [slow] * 5 + [fast, fast, slow] + [fast] * 10)
    assert settle.settle_team(1.0) == 8 + settle.FAST_STREAK == team.regions


def test_settle_team_is_bounded(monkeypatch):
    """A team that never gets fast (a machine busier than its cores) delays the measurement
    by the bound, not longer; a bound of 0 runs the one region that wakes the team."""
    from workbench.runtime import settle
    team = _Team(monkeypatch, [600e-6])
    assert settle.settle_team(0.01) == 17                 # 17 x 0.6 ms >= 10 ms
    assert team.now >= 0.01 and team.now < 0.0107
    team = _Team(monkeypatch, [600e-6])
    assert settle.settle_team(0.0) == 1


def test_settle_team_without_a_team(monkeypatch):
    from workbench.runtime import settle
    team = _Team(monkeypatch, [1.0], threads=0)
    assert settle.settle_team(1.0) == 0 and team.now == 0.0


def test_settle_team_on_the_real_team():
    """On this machine's libgomp: at least one region, and never much past the bound."""
    import time as _time

    from workbench.runtime import loader, settle
    if loader.ensure_gomp(required=False) is None:
        pytest.skip("no libgomp here")
    t0 = _time.perf_counter()
    assert settle.settle_team(0.05) >= 1
    assert _time.perf_counter() - t0 < 1.0


def test_time_evaluator_settles_the_team_after_its_warm_up(monkeypatch):
    """time_evaluator: the warm-up call, then the team settled with the option's bound, then
    the timed calls."""
    from workbench.runtime import cpu, evaluator
    seen = []
    monkeypatch.setattr(evaluator, "settle_team",
                        lambda max_seconds=None: seen.append(("settle", max_seconds)))
    ev = evaluator.time_evaluator(lambda: seen.append("call"), cpu(), number=1, repeat=2)
    ev()
    assert seen == ["call", ("settle", None), "call", "call"]


def test_settle_team_bound_defaults_to_the_option(monkeypatch):
    """With no bound given (how the evaluator and the runner's flush call it), the option
    ``timing_team_settle_ms`` bounds the wait."""
    from workbench import options
    from workbench.runtime import settle
    team = _Team(monkeypatch, [600e-6])
    with options.override(timing_team_settle_ms=10.0):
        assert settle.settle_team() == 17
    assert team.now >= 0.01 and team.now < 0.0107
