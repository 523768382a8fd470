"""Parallel loops hand out chunks (option ``parallel_chunks``, codegen/parallel.py): every
iteration runs exactly once whatever the extent, thread count and chunk count, with the
thread count fixed at compile time (``-num-cores``) or chosen at run time (``num_threads``).
"""
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
