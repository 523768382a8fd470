"""LocalBuilder's build cache: structurally equal modules are built once, and every result
still gets its own artifact that computes the right thing."""
import os

import numpy as np
import pytest

import workbench as wb
from workbench.meta_schedule.builder import BuilderInput, LocalBuilder
from workbench.meta_schedule.builder.build_cache import BuildCache

import ms_workloads
from ms_workloads import matmul, scheduled


class CountingBuilder(LocalBuilder):
    """Counts the jobs that reach the worker pool and keeps its results for clean-up."""

    def __init__(self, **kwargs):
        super().__init__(max_workers=2, timeout_sec=60, **kwargs)
        self.jobs = 0
        self.made = []
        run = self._pool.run

        def counting_run(fn, jobs, timeout):
            self.jobs += len(jobs)
            return run(fn, jobs, timeout)
        self._pool.run = counting_run

    def build(self, build_inputs):
        results = super().build(build_inputs)
        self.made.extend(results)
        return results


@pytest.fixture
def builder():
    b = CountingBuilder()
    yield b
    b.shutdown()
    ms_workloads.remove_artifacts(b.made)


def _run_matmul(path, n):
    rt = wb.runtime.load_module(path)
    rng = np.random.RandomState(n)
    a, b = rng.rand(n, n).astype("float32"), rng.rand(n, n).astype("float32")
    c = wb.nd.empty((n, n), "float32")
    rt["main"](wb.nd.array(a), wb.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5)
    return c.numpy()


def _read(path):
    with open(path, "rb") as f:
        return f.read()


def test_equal_candidates_in_one_batch_are_built_once(builder):
    # two separately traced schedules with the same decisions: equal, not identical, modules
    one, two = scheduled(matmul(24), 4).mod, scheduled(matmul(24), 4).mod
    other = scheduled(matmul(24), 8).mod
    assert one is not two
    results = builder.build([BuilderInput(m, "llvm") for m in (one, two, other)])
    assert [r.error_msg for r in results] == [None] * 3
    assert builder.jobs == 2
    paths = [r.artifact_path for r in results]
    assert len({os.path.dirname(p) for p in paths}) == 3  # each removable on its own
    assert _read(paths[0]) == _read(paths[1]) != _read(paths[2])
    outs = [_run_matmul(p, 24) for p in paths]
    np.testing.assert_array_equal(outs[0], outs[1])


def test_a_module_built_before_is_not_built_again(builder):
    first = builder.build([BuilderInput(scheduled(matmul(16), 4).mod, "llvm")])[0]
    ms_workloads.remove_artifacts([first])  # the run deleted it: the cache keeps the code
    again = builder.build([BuilderInput(scheduled(matmul(16), 4).mod, "llvm"),
                           BuilderInput(matmul(16), "llvm")])
    assert builder.jobs == 2  # the first module once, the unscheduled one once
    assert builder.build_cache.hits == 1
    assert again[0].error_msg is None and again[0].artifact_path != first.artifact_path
    _run_matmul(again[0].artifact_path, 16)
    # another target is another build
    builder.build([BuilderInput(scheduled(matmul(16), 4).mod, "llvm -num-cores=1")])
    assert builder.jobs == 3


def test_an_input_with_params_is_built_in_the_batch_and_never_shared(builder):
    mod = scheduled(matmul(16), 4).mod
    results = builder.build([BuilderInput(mod, "llvm"),
                             BuilderInput(mod, "llvm", params={"w": wb.nd.array(np.ones(2))})])
    assert builder.jobs == 2                  # both built: the second is no copy of the first
    assert results[0].error_msg is None
    assert "params" in results[1].error_msg   # the default build refuses params, by name
    assert builder.build_cache.hits == 0 and len(builder.build_cache) == 1


def test_failures_and_custom_build_functions_are_not_cached():
    b = CountingBuilder(f_build=ms_workloads.build_raises)
    try:
        for _ in range(2):
            res = b.build([BuilderInput(matmul(8), "llvm")])[0]
            assert res.error_msg is not None
        assert b.jobs == 2
    finally:
        b.shutdown()
    off = CountingBuilder(cache=False)
    try:
        off.build([BuilderInput(matmul(8), "llvm"), BuilderInput(matmul(8), "llvm")])
        assert off.jobs == 2 and off.build_cache is None
    finally:
        off.shutdown()
        ms_workloads.remove_artifacts(off.made)


def test_build_cache_evicts_least_recently_used():
    cache = BuildCache(max_entries=2)
    mods = [matmul(n) for n in (4, 8, 12)]
    keys = [cache.key(m, "llvm") for m in mods]
    cache.put(keys[0], mods[0], b"a")
    cache.put(keys[1], mods[1], b"b")
    assert cache.get(keys[0], matmul(4)) == b"a"  # now the most recent
    cache.put(keys[2], mods[2], b"c")
    assert len(cache) == 2
    assert cache.get(keys[1], mods[1]) is None
    assert cache.get(keys[0], mods[0]) == b"a" and cache.get(keys[2], mods[2]) == b"c"
    # a key that collides with an unequal module is a miss, not the other's code
    assert cache.get(keys[0], mods[2]) is None
    with pytest.raises(ValueError, match="max_entries"):
        BuildCache(0)
