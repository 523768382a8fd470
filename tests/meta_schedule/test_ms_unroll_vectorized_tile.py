"""Regression: the tuner's ``pragma_auto_unroll_max_step`` must unroll the loops around a
vectorized innermost tile. TVM vectorizes before it unrolls, so the vector loop counts as one
step; counting it as ``extent`` steps left every matmul candidate with unroll 16/64 un-unrolled."""
from __future__ import annotations

import numpy as np

import workbench as wb
from workbench import te
from workbench.meta_schedule.postproc.rewrite_parallel_vectorize_unroll import (
    RewriteParallelVectorizeUnroll,
)
from workbench.meta_schedule.postproc.rewrite_reduction_block import RewriteReductionBlock
from workbench.tir.schedule import Schedule
from workbench.tir.stmt import For, ForKind
from workbench.tir.functor import IRVisitor


def _matmul(n: int):
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def _tuner_like_schedule(n: int, unroll: int) -> Schedule:
    """A SSRSRS-tiled matmul as MultiLevelTiling + write cache + ParallelizeVectorizeUnroll
    produce it, then the llvm postprocs."""
    sch = Schedule(_matmul(n))
    b = sch.get_sblock("C")
    root = sch.get_sblock("root")
    i, j, k = sch.get_loops(b)
    I = sch.split(i, [n // 8, 2, 4, 1])
    J = sch.split(j, [n // 32, 2, 1, 16])
    K = sch.split(k, [n // 4, 4])
    sch.reorder(I[0], J[0], I[1], J[1], K[0], I[2], J[2], K[1], I[3], J[3])
    c = sch.cache_write(b, 0, "global")
    sch.reverse_compute_at(c, J[1])
    sch.annotate(root, "meta_schedule.parallel", 32)
    sch.annotate(root, "meta_schedule.vectorize", 64)
    sch.annotate(root, "meta_schedule.unroll_explicit", unroll)
    sch.enter_postproc()
    assert RewriteParallelVectorizeUnroll().apply(sch)
    assert RewriteReductionBlock().apply(sch)
    return sch


class _Loops(IRVisitor):
    def __init__(self) -> None:
        super().__init__()
        self.loops: list[For] = []

    def visit_For(self, loop: For) -> None:
        self.loops.append(loop)
        self.generic_visit(loop)


def _serial_extents(func) -> list[int]:
    v = _Loops()
    v.visit(func.body)
    return [int(lp.extent.value) for lp in v.loops if lp.kind == ForKind.SERIAL]


def test_auto_unroll_counts_vector_loop_as_one_step():
    n = 64
    sch = _tuner_like_schedule(n, unroll=16)
    lowered = wb.lower(sch.mod)["main"]
    # i2 (4) x k1 (4) = 16 steps around the 16-wide vector store: unrolled by max_step 16,
    # so only i1, j1 and k0 remain as serial loops (no vector loop survives lowering).
    extents = _serial_extents(lowered)
    assert 4 not in extents, lowered.script()
    assert extents.count(n // 4) == 1  # k0
    a = np.random.rand(n, n).astype("float32")
    bb = np.random.rand(n, n).astype("float32")
    out = wb.nd.empty((n, n), "float32")
    wb.build(sch.mod, target="llvm -num-cores=2")["main"](wb.nd.array(a), wb.nd.array(bb), out)
    np.testing.assert_allclose(out.numpy(), a @ bb, rtol=1e-4, atol=1e-4)


def test_auto_unroll_still_respects_max_step():
    sch = _tuner_like_schedule(64, unroll=0)
    extents = _serial_extents(wb.lower(sch.mod)["main"])
    assert 4 in extents  # nothing unrolled without a pragma
