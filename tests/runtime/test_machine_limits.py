"""Machine limits (issue 27): the fp32 FMA peak and the memory bandwidth are measured once per
machine, cached as JSON under the cache directory, read back without measuring, measured again
with ``refresh=True``; a broken cache file is replaced, and the numbers are plausible."""
from __future__ import annotations

import json

import pytest

from workbench import options
from workbench.runtime import machine_limits as ml
from workbench.target import Target


@pytest.fixture
def cache_dir(tmp_path):
    with options.override(cache_dir=str(tmp_path)):
        yield tmp_path


@pytest.fixture
def counted(monkeypatch):
    """Count the measurements (the real ones run: about 1.5 s each)."""
    calls = []
    real = ml._measure

    def measure(*args):
        calls.append(args)
        return real(*args)
    monkeypatch.setattr(ml, "_measure", measure)
    return calls


def test_measured_once_then_read_from_the_cache(cache_dir, counted):
    assert ml.cached_machine_limits() is None
    first = ml.machine_limits()
    assert len(counted) == 1
    path = cache_dir / ml.CACHE_FILE
    assert ml.limits_cache_path() == path and path.exists()
    entry = json.loads(path.read_text())["machines"][first.key]
    assert entry["peak_gflops"] == first.peak_gflops

    again = ml.machine_limits()
    assert len(counted) == 1 and again == first         # read back, not measured
    assert ml.cached_machine_limits() == first

    fresh = ml.machine_limits(refresh=True)
    assert len(counted) == 2 and fresh.key == first.key
    assert ml.machine_limits() == fresh                 # the new measurement replaced it


def test_limits_are_plausible(cache_dir):
    limits = ml.machine_limits()
    assert limits.peak_gflops > 1.0 and limits.per_core_gflops > 1.0
    assert limits.bandwidth_gbs > 0.5
    assert limits.cores == options.get("num_threads")
    assert limits.kind in ("fp32", "fp32-avx2", "fp32-neon") and limits.cpu
    ridge = limits.ridge_intensity
    assert limits.bound_gflops(ridge / 4) == pytest.approx(limits.peak_gflops / 4)
    assert limits.bound_gflops(ridge * 4) == pytest.approx(limits.peak_gflops)
    assert f"{limits.bandwidth_gbs:.1f} GB/s" in str(limits)


def test_each_core_count_has_its_own_entry(cache_dir, counted):
    one = ml.machine_limits(Target("llvm -num-cores=1"))
    assert one.cores == 1 and one.peak_gflops == one.per_core_gflops
    assert ml.cached_machine_limits(Target("llvm -num-cores=2")) is None
    two = ml.machine_limits(Target("llvm -num-cores=2"))
    assert two.cores == 2 and two.key != one.key
    # the peak of two cores is at least twice one core's (a loaded machine's all-core loop
    # under-reads; the kernels reach past it)
    assert two.peak_gflops >= 2 * two.per_core_gflops * 0.999
    machines = json.loads((cache_dir / ml.CACHE_FILE).read_text())["machines"]
    assert set(machines) == {one.key, two.key}
    assert ml.machine_limits(Target("llvm -num-cores=1")) == one and len(counted) == 2


def test_a_broken_cache_is_measured_again_and_replaced(cache_dir, counted, caplog):
    (cache_dir / ml.CACHE_FILE).write_text("{not json")
    limits = ml.machine_limits()
    assert len(counted) == 1 and "unreadable cache" in caplog.text
    assert json.loads((cache_dir / ml.CACHE_FILE).read_text())["machines"][limits.key]
    # An entry with a bad number is not trusted either.
    data = json.loads((cache_dir / ml.CACHE_FILE).read_text())
    data["machines"][limits.key]["bandwidth_gbs"] = -1
    (cache_dir / ml.CACHE_FILE).write_text(json.dumps(data))
    assert ml.cached_machine_limits() is None and "bandwidth_gbs must be a positive" in \
        caplog.text


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match="refresh must be a bool"):
        ml.machine_limits(refresh="yes")
    with pytest.raises(TypeError, match="target must be a workbench Target"):
        ml.machine_limits("llvm")
    with pytest.raises(ValueError, match=r"missing fields \['per_core_gflops'"):
        ml.MachineLimits.from_dict({"peak_gflops": 1.0})


def test_the_last_level_cache_is_measured_and_sized(cache_dir):
    limits = ml.machine_limits()
    llc = ml._last_level_cache_bytes()
    assert limits.cache_bytes == llc
    if llc:   # sysfs knows the caches (Linux): the cache roof is at least memory's
        assert limits.cache_bandwidth_gbs >= limits.bandwidth_gbs
        assert "last-level cache" in str(limits)


LIMITS = ml.MachineLimits(peak_gflops=100.0, per_core_gflops=50.0, bandwidth_gbs=10.0, cores=2,
                          cpu="test CPU", kind="fp32", measured_at="2026-01-01T00:00:00Z",
                          key="test", cache_bandwidth_gbs=40.0, cache_bytes=1 << 20)


def _blend(n: float) -> float:
    """GB/s of LIMITS for n bytes above its 1 MiB cache: 1 MiB at 40 GB/s, the rest at 10."""
    return n / ((1 << 20) / 40.0 + (n - (1 << 20)) / 10.0)


def test_the_bytes_of_a_call_pick_the_bandwidth_roof():
    # a call that fits in the cache meets the cache's roof; a bigger one reads what the cache
    # holds at its bandwidth and the rest at memory's: no cliff at the cache's size, and
    # memory's roof approached far above it
    assert LIMITS.bandwidth_for(1 << 20) == 40.0
    assert 39.99 < LIMITS.bandwidth_for((1 << 20) + 1) < 40.0
    assert LIMITS.bandwidth_for(1e7) == pytest.approx(_blend(1e7))
    assert 10.0 < LIMITS.bandwidth_for(1e10) < 10.01
    assert LIMITS.bandwidth_for([1e3, 1e7]) == pytest.approx([40.0, _blend(1e7)])
    assert LIMITS.bandwidth_for(None) == 10.0 and LIMITS.bandwidth_for(float("nan")) == 10.0
    assert LIMITS.bound_gflops(1.0, 1e3) == pytest.approx(40.0)
    assert LIMITS.bound_gflops(1.0, 1e7) == pytest.approx(_blend(1e7))
    assert LIMITS.bound_gflops(1.0) == pytest.approx(10.0)
    # time: max(flop / peak, bytes / bandwidth); the level by the bytes of *one* call
    assert LIMITS.bound_seconds(0.0, 4e5) == pytest.approx(4e5 / 40e9)
    assert LIMITS.bound_seconds(0.0, 4e6, calls=2) == pytest.approx(4e6 / (_blend(2e6) * 1e9))
    assert LIMITS.bound_seconds(1e9, 4e5) == pytest.approx(1e9 / 100e9)
    # unknown cache: memory's roof everywhere
    plain = ml.MachineLimits.from_dict({k: v for k, v in LIMITS.to_dict().items()
                                        if not k.startswith("cache")})
    assert plain.cache_bytes == 0 and plain.bandwidth_for(1e3) == 10.0
    with pytest.raises(ValueError, match="cache_bytes must be a number >= 0"):
        ml.MachineLimits.from_dict(dict(LIMITS.to_dict(), cache_bytes=-1))
