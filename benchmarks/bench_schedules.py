"""Hand-written schedules against numpy, measured in the same run (printed, never asserted).

1. matmul 512x512x512 float32 (target >= 0.6 of numpy's ``np.dot``):
   - "tiled": i split [None, 4, 8], j split [None, 2, 32], k split [None, 4], order
     i0 j0 i1 j1 k0 k1 i2 j2; cache_write "local" reverse_compute_at j1 (its inner loop
     vectorized, the next unrolled); fuse(i0, j0) parallel; vectorize j2; unroll i2;
     decompose_reduction at k0. The micro-kernel is 8 rows x 32 columns: 16 AVX-512
     accumulators, one broadcast of A and two loads of B per k.
   - "tiled + packed B": the same, with B copied by cache_read into a panel layout
     ``B_p[j // 64, k, j % 64]`` (transform_layout), so a tile reads B contiguously.
2. conv2d NHWC 1x56x56x64 -> 64, 3x3, stride 1, pad 1, with relu (target: >= the im2col
   reference): y split [None, 1], x split [None, 8], f split [None, 32], order
   n y0 x0 f0 ry rx rc y1 x1 f1; relu reverse_compute_at f0 (the conv tile is compacted into a
   register tile), fuse(n, y0) parallel, vectorize f1, unroll x1, decompose_reduction at ry;
   the padding stage stays a separate parallel, vectorized pass. The reference pads, builds the
   im2col matrix (3136 x 576) and calls numpy's matmul, then relu; the matmul alone is printed
   too (a bound no im2col implementation beats).

Each section runs twice: with the default threads (workbench's ``num_threads``, OpenBLAS's
default), then in a subprocess with one thread for both (``WORKBENCH_NUM_THREADS=1``,
``OPENBLAS_NUM_THREADS=1``), which is less sensitive to a busy machine. Times are the best of
several interleaved rounds (ours, then numpy's), so background load hurts both alike.

Usage: ``python benchmarks/bench_schedules.py [--single]`` (``--single``: only the current
process's threading).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np

import workbench as wb
from workbench import options, te, topi
from workbench.tir.schedule import Schedule

N = 512
H = W = 56
C = K = 64


def best_seconds(fn, rounds: int = 5, number: int = 3) -> float:
    """Best over ``rounds`` of the mean time of ``number`` back-to-back calls."""
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return min(times)


def interleaved(*fns, rounds: int = 5) -> list[float]:
    """Best time of each function, measured in alternation (so load hurts all alike)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(rounds):
        for fn, ts in zip(fns, times):
            ts.append(best_seconds(fn))
    return [min(ts) for ts in times]


# ---- matmul -------------------------------------------------------------------------------


def matmul_func():
    a = te.placeholder((N, N), name="A")
    b = te.placeholder((N, N), name="B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def schedule_matmul(pack_b: bool = False, ti=(4, 8), tj=(2, 32), tk: int = 4) -> Schedule:
    sch = Schedule(matmul_func())
    c = sch.get_block("T_matmul_NN")
    if pack_b:
        panel = tj[0] * tj[1]
        bp = sch.cache_read(c, 1, "global")
        sch.transform_layout(bp, ("write", 0), lambda k, j: (j // panel, k, j % panel))
    i, j, k = sch.get_loops(c)
    i0, i1, i2 = sch.split(i, [None, *ti])
    j0, j1, j2 = sch.split(j, [None, *tj])
    k0, k1 = sch.split(k, [None, tk])
    sch.reorder(i0, j0, i1, j1, k0, k1, i2, j2)
    cw = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(cw, j1)
    sch.parallel(sch.fuse(i0, j0))
    sch.vectorize(j2)
    sch.unroll(i2)
    *_, cw_i, cw_j = sch.get_loops(cw)
    sch.vectorize(cw_j)
    sch.unroll(cw_i)
    sch.decompose_reduction(c, k0)
    if pack_b:
        outer, lanes = sch.split(sch.fuse(*sch.get_loops(bp)), [None, 16])
        sch.parallel(outer)
        sch.vectorize(lanes)
    return sch


def bench_matmul() -> None:
    print(f"1. matmul {N}x{N}x{N} float32   (target >= 0.6 of numpy)")
    rng = np.random.default_rng(0)
    a = rng.random((N, N), dtype="float32")
    b = rng.random((N, N), dtype="float32")
    expected = a @ b
    flops = 2 * N ** 3
    na, nb, nc = wb.nd.array(a), wb.nd.array(b), wb.nd.empty((N, N), "float32")
    for label, sch in [("tiled", schedule_matmul()),
                       ("tiled + packed B", schedule_matmul(pack_b=True))]:
        f = wb.build(sch.mod)["main"]
        f(na, nb, nc)
        np.testing.assert_allclose(nc.numpy(), expected, rtol=1e-4)
        t, t_np = interleaved(lambda f=f: f(na, nb, nc), lambda: np.dot(a, b))
        print(f"   {label:<22} {flops / t / 1e9:7.1f} GFLOPS   numpy np.dot "
              f"{flops / t_np / 1e9:7.1f} GFLOPS   ratio to numpy {t_np / t:5.2f}")


# ---- conv2d ---------------------------------------------------------------------------------


def conv2d_func():
    x = te.placeholder((1, H, W, C), name="X")
    w = te.placeholder((3, 3, C, K), name="W")
    return te.create_prim_func([x, w, topi.nn.relu(topi.nn.conv2d_nhwc(x, w, 1, 1, 1))])


def schedule_conv2d(xt: int = 8, ft: int = 32) -> Schedule:
    sch = Schedule(conv2d_func())
    conv = sch.get_block("conv2d_nhwc")
    relu = sch.get_consumers(conv)[0]
    n, y, x, f, ry, rx, rc = sch.get_loops(conv)
    y0, y1 = sch.split(y, [None, 1])
    x0, x1 = sch.split(x, [None, xt])
    f0, f1 = sch.split(f, [None, ft])
    sch.reorder(n, y0, x0, f0, ry, rx, rc, y1, x1, f1)
    sch.reverse_compute_at(relu, f0)
    sch.vectorize(sch.get_loops(relu)[-1])
    sch.parallel(sch.fuse(n, y0))
    sch.vectorize(f1)
    sch.unroll(x1)
    sch.decompose_reduction(conv, ry)
    pad = sch.get_block("pad_temp")
    p = sch.get_loops(pad)
    sch.parallel(sch.fuse(p[0], p[1]))
    sch.vectorize(p[-1])
    return sch


def im2col_conv2d_relu(x: np.ndarray, w_mat: np.ndarray) -> np.ndarray:
    xp = np.pad(x[0], ((1, 1), (1, 1), (0, 0)))
    cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(0, 1))  # y, x, c, ry, rx
    cols = cols.transpose(0, 1, 3, 4, 2).reshape(H * W, 9 * C)
    out = cols @ w_mat
    return np.maximum(out, 0, out=out)


def bench_conv2d() -> None:
    print(f"2. conv2d NHWC 1x{H}x{W}x{C} -> {K}, 3x3, pad 1, + relu")
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, H, W, C), dtype="float32")
    w = rng.standard_normal((3, 3, C, K), dtype="float32")
    w_mat = w.reshape(9 * C, K)
    expected = im2col_conv2d_relu(x, w_mat).reshape(1, H, W, K)
    flops = 2 * H * W * C * K * 9
    nx, nw, ny = wb.nd.array(x), wb.nd.array(w), wb.nd.empty((1, H, W, K), "float32")
    f = wb.build(schedule_conv2d().mod)["main"]
    f(nx, nw, ny)
    np.testing.assert_allclose(ny.numpy(), expected, rtol=1e-3, atol=1e-3)
    cols = np.ascontiguousarray(
        np.lib.stride_tricks.sliding_window_view(np.pad(x[0], ((1, 1), (1, 1), (0, 0))),
                                                 (3, 3), axis=(0, 1))
        .transpose(0, 1, 3, 4, 2).reshape(H * W, 9 * C))
    a = rng.random((N, N), dtype="float32")
    t, t_ref, t_mm, t_dot = interleaved(lambda: f(nx, nw, ny),
                                        lambda: im2col_conv2d_relu(x, w_mat),
                                        lambda: cols @ w_mat, lambda: np.dot(a, a))
    print(f"   {'scheduled':<22} {flops / t / 1e9:7.1f} GFLOPS")
    print(f"   {'im2col + numpy matmul':<22} {flops / t_ref / 1e9:7.1f} GFLOPS   "
          f"ratio to it {t_ref / t:5.2f}")
    print(f"   {'numpy matmul alone':<22} {flops / t_mm / 1e9:7.1f} GFLOPS   "
          f"ratio to it {t_mm / t:5.2f}   (the 3136x576 @ 576x64 product, im2col excluded)")
    print(f"   {'numpy np.dot 512^3':<22} {2 * N ** 3 / t_dot / 1e9:7.1f} GFLOPS   "
          f"ratio of GFLOPS {(flops / t) / (2 * N ** 3 / t_dot):5.2f}")


def main() -> None:
    threads = options.get("num_threads")
    blas = os.environ.get("OPENBLAS_NUM_THREADS", "default")
    print(f"bench_schedules: {os.cpu_count()} CPU(s), workbench num_threads={threads}, "
          f"OPENBLAS_NUM_THREADS={blas}, load average "
          f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}")
    bench_matmul()
    bench_conv2d()
    if "--single" not in sys.argv:
        print("\n--- again with one thread for both (subprocess) ---", flush=True)
        env = dict(os.environ, WORKBENCH_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                   OMP_NUM_THREADS="1")
        subprocess.run([sys.executable, __file__, "--single"], env=env, check=True)


if __name__ == "__main__":
    main()
