import threading

import numpy as np
import pytest

import rt_kernels as K
import workbench.nd as nd
from workbench import options
from workbench.runtime import loader


@pytest.fixture(scope="module")
def padd():
    if loader.ensure_gomp(required=False) is None:
        pytest.skip("libgomp is not installed")
    return K.build(K.PARALLEL_ADD)["padd"]


def _run(padd, n):
    rng = np.random.default_rng(n)
    a = nd.array(rng.standard_normal(n).astype("float32"))
    b = nd.array(rng.standard_normal(n).astype("float32"))
    c = nd.empty(n)
    t = nd.array(np.zeros(1, dtype="int32"))
    padd(a, b, c, t)
    return a.numpy() + b.numpy(), c.numpy(), int(t.numpy()[0])


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_gomp_parallel_matches_serial(padd, threads):
    with options.override(num_threads=threads):
        for n in (0, 1, 5, 1000, 100_003):
            want, got, team = _run(padd, n)
            np.testing.assert_array_equal(got, want)
            assert team == threads


def test_thread_count_applies_in_other_python_threads(padd):
    seen = []
    with options.override(num_threads=3):
        th = threading.Thread(target=lambda: seen.append(_run(padd, 64)[2]))
        th.start()
        th.join()
    assert seen == [3]


def test_default_thread_count_follows_env(padd, monkeypatch):
    monkeypatch.setenv("WORKBENCH_NUM_THREADS", "2")
    with options.override():          # bump the generation so the change is picked up
        assert _run(padd, 10)[2] == 2


def test_gomp_symbols_detected():
    obj, _ = K.compile_kernels(K.PARALLEL_ADD)
    assert loader.uses_gomp(obj)
    assert not loader.uses_gomp(K.compile_kernels(K.ADD)[0])


def test_missing_gomp_error_only_when_needed(monkeypatch):
    monkeypatch.setattr(loader, "_gomp", None)
    monkeypatch.setattr(loader, "_gomp_error", "pretend it is missing")
    assert loader.ensure_gomp(required=False) is None
    K.build(K.ADD)                                   # no GOMP symbols: loads fine
    with pytest.raises(RuntimeError, match="uses parallel loops.*libgomp could not be loaded"):
        K.build(K.PARALLEL_ADD)
