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
