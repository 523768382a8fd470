"""Parallel loops hand out chunks (option ``parallel_chunks``, codegen/parallel.py): every
iteration runs exactly once whatever the extent, thread count and chunk count, with the
thread count fixed at compile time (``-num-cores``) or chosen at run time (``num_threads``).
"""
import os

import numpy as np
import pytest

import workbench as wb
from workbench import options, tir
from workbench.tir import stmt as S


def _count_visits(n: int) -> tir.PrimFunc:
    """``hits[i] += 1`` for i in a parallel ``range(n)``: a missed iteration leaves a 0, one
    run twice a 2."""
    hits = tir.decl_buffer((n,), "int32", "hits")
    i = tir.Var("i")
    body = S.BufferStore(hits, hits[i] + 1, (i,))
    return tir.prim_func([hits], S.For(i, tir.const(0), tir.const(n), "parallel", body))


@pytest.mark.parametrize("chunks", [0, 1, 4])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 64, 1001])
@pytest.mark.parametrize("target", ["llvm -num-cores=2", "llvm -num-cores=3", "llvm"])
def test_every_iteration_runs_once(chunks, n, target):
    with options.override(parallel_chunks=chunks, num_threads=3):
        f = wb.build(_count_visits(n), target)
        hits = wb.nd.array(np.zeros(n, np.int32))
        for _ in range(3):   # the counters start again at 0 on every call
            f["main"](hits)
    np.testing.assert_array_equal(hits.numpy(), np.full(n, 3, np.int32))


def test_chunks_are_claimed_atomically_only_when_asked_for():
    with options.override(parallel_chunks=4):
        ll = wb.build(_count_visits(64), "llvm -num-cores=2").get_source("ll")
    assert "atomicrmw add" in ll
    with options.override(parallel_chunks=0):
        ll = wb.build(_count_visits(64), "llvm -num-cores=2").get_source("ll")
    assert "atomicrmw" not in ll
    with pytest.raises(ValueError):
        options.set("parallel_chunks", -1)


def test_finish_spin_is_emitted_only_when_asked_for():
    with options.override(parallel_chunks=4, parallel_finish_spin=1000):
        ll = wb.build(_count_visits(64), "llvm -num-cores=2").get_source("ll")
    assert "llvm.x86.sse2.pause" in ll and "load atomic" in ll
    # the budget is the module's, starts at the option's value and is adapted in place
    assert "@\"__workbench_finish_spin_budget\" = internal global i32 1000" in ll
    budget = [line for line in ll.splitlines() if "__workbench_finish_spin_budget" in line]
    assert any("load atomic" in line for line in budget)
    assert any("store atomic" in line for line in budget)
    with options.override(parallel_chunks=4, parallel_finish_spin=0):
        ll = wb.build(_count_visits(64), "llvm -num-cores=2").get_source("ll")
    assert "llvm.x86.sse2.pause" not in ll
    with pytest.raises(ValueError):
        options.set("parallel_finish_spin", -1)


def _voluntary_switches() -> dict[str, int]:
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/status") as f:
                out[tid] = next(int(line.split()[1]) for line in f
                                if line.startswith("voluntary_ctxt_switches"))
        except (OSError, StopIteration):
            pass
    return out


@pytest.mark.skipif(not os.path.exists("/proc/self/task") or (os.cpu_count() or 1) < 2,
                    reason="needs Linux's per-thread counters and 2 cores")
def test_early_thread_waits_awake_for_the_last_one():
    """A loop of two iterations, one ~4 ms heavier: the thread with the light one used to
    wait in libgomp's closing barrier, which sleeps after GOMP_SPINCOUNT spins (one futex
    sleep, a voluntary context switch, per call), and the next kernel then waited for that
    core to wake up. With the finish spin it waits awake (bounded), so no thread sleeps."""
    n = 4_000_000
    a = tir.decl_buffer((2, n), "float32", "a")
    out = tir.decl_buffer((2, n), "float32", "out")
    i, j = tir.Var("i"), tir.Var("j")
    x = a[i, j]
    heavy = x * tir.const(1.5, "float32") + tir.const(0.5, "float32")
    for _ in range(4):     # a dependent chain: ~4 ms more than the copy on the other thread
        heavy = tir.sqrt(heavy + tir.const(1.0, "float32"))
    body = S.For(j, tir.const(0), tir.const(n), "serial", S.BufferStore(
        out, tir.if_then_else(i == 0, heavy, x), (i, j)))
    func = tir.prim_func([a, out], S.For(i, tir.const(0), tir.const(2), "parallel", body))
    xs = wb.nd.array(np.random.default_rng(0).random((2, n), dtype=np.float32))
    ys = wb.nd.empty((2, n), "float32")
    slept = {}
    for spin in (0, 50_000_000):
        with options.override(parallel_chunks=1, parallel_finish_spin=spin, num_threads=2):
            f = wb.build(func, "llvm -num-cores=2")["main"]
            for _ in range(3):
                f(xs, ys)
            before = _voluntary_switches()
            for _ in range(20):
                f(xs, ys)
            after = _voluntary_switches()
        slept[spin] = max(after[t] - before.get(t, 0) for t in after)
    want = xs.numpy()[0] * np.float32(1.5) + np.float32(0.5)
    for _ in range(4):
        want = np.sqrt(want + np.float32(1.0))
    np.testing.assert_allclose(ys.numpy()[0], want, rtol=1e-6)
    np.testing.assert_array_equal(ys.numpy()[1], xs.numpy()[1])
    assert slept[0] >= 10, slept           # the mechanism: a sleep at (nearly) every call
    assert slept[50_000_000] <= 3, slept
