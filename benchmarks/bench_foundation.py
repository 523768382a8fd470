"""Foundation speed checks, printed as ratios measured in the same run (never asserted).

1. Elementwise add over 16M float32 with a parallel + vectorized loop, as a fraction of
   numpy's ``np.add(a, b, out=c)`` throughput (target >= 0.7). Serial variants are printed
   too, to tell the vector code from the threading.
2. Median call overhead of a 3-argument PackedFunc on tiny arrays (target <= 5 us): the
   hand-written kernel of bench_runtime_overhead.py and a kernel compiled by workbench.build.
3. Compile time of a small kernel: cold (empty temporary cache dir) and cached, split into
   lowering + LLVM codegen.

Machine load matters (parallel kernels share cores with everything else): run it on a quiet
machine, and compare the serial and parallel rows.
"""
from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_runtime_overhead as overhead  # noqa: E402

import workbench as wb  # noqa: E402
from workbench import options, te, topi  # noqa: E402
from workbench.tir.schedule import Schedule  # noqa: E402

N_ADD = 16 * 1024 * 1024
ROUNDS = 21


def median_seconds(fn, rounds: int = ROUNDS, number: int = 1) -> float:
    """Median over ``rounds`` of the mean time of ``number`` back-to-back calls."""
    fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times)


def add_kernel(n: int, parallel: bool, vector: int | None, outer_chunks: int | None = None):
    """``C = A + B``: split into (outer, inner=vector) and optionally parallel/vectorize."""
    A, B = te.placeholder((n,), name="A"), te.placeholder((n,), name="B")
    C = topi.add(A, B)
    sch = Schedule(te.create_prim_func([A, B, C]))
    (loop,) = sch.get_loops(sch.get_block(C.op.name))
    if vector:
        outer, inner = sch.split(loop, [None, vector])
        sch.vectorize(inner)
        if parallel:
            sch.parallel(outer)
    elif parallel:
        sch.parallel(loop)
    return wb.build(sch.mod["main"])


def bench_add() -> None:
    print(f"1. elementwise add, {N_ADD // (1 << 20)}M float32 "
          f"({options.get('num_threads')} thread(s) for parallel loops)")
    rng = np.random.default_rng(0)
    a, b = rng.random(N_ADD, dtype="float32"), rng.random(N_ADD, dtype="float32")
    c = np.empty_like(a)
    t_np = median_seconds(lambda: np.add(a, b, out=c))
    gbs = lambda t: 3 * 4 * N_ADD / t / 1e9  # noqa: E731 - bytes moved: 2 reads + 1 write
    print(f"   {'numpy np.add(out=)':<34} {t_np * 1e3:8.2f} ms  {gbs(t_np):6.1f} GB/s")
    na, nb, nc = wb.nd.array(a), wb.nd.array(b), wb.nd.empty((N_ADD,), "float32")
    variants = [("parallel + vectorized x16", True, 16), ("parallel + vectorized x64", True, 64),
                ("serial, vectorized x16", False, 16), ("serial, scalar loop", False, None)]
    for label, par, vec in variants:
        f = add_kernel(N_ADD, par, vec)["main"]
        f(na, nb, nc)
        assert np.array_equal(nc.numpy(), a + b), label
        t = median_seconds(lambda f=f: f(na, nb, nc))
        mark = "   <- target >= 0.7" if label.startswith("parallel + vectorized x16") else ""
        print(f"   {label:<34} {t * 1e3:8.2f} ms  {gbs(t):6.1f} GB/s  "
              f"fraction of numpy {t_np / t:5.2f}{mark}")


def bench_overhead() -> None:
    print("\n2. PackedFunc call overhead, 3 arguments, float32[4] arrays (target <= 5 us)")
    mod = overhead.build()
    a = wb.nd.array(np.arange(4, dtype="float32"))
    b = wb.nd.array(np.ones(4, dtype="float32"))
    c = wb.nd.empty((4,), "float32")
    f_hand = mod["add"]
    f_hand(a, b, c)
    t_hand = overhead.per_call_ns(f_hand, a, b, c)
    f_built = add_kernel(4, False, None)["main"]
    f_built(a, b, c)
    assert np.array_equal(c.numpy(), a.numpy() + b.numpy())
    t_built = overhead.per_call_ns(f_built, a, b, c)
    na, nb, nc = a.numpy(copy=False), b.numpy(copy=False), c.numpy(copy=False)
    t_np = overhead.per_call_ns(np.add, na, nb, nc)
    print(f"   hand-written LLVM kernel (shape var n) {t_hand / 1000:7.3f} us")
    print(f"   workbench.build kernel (static shape)   {t_built / 1000:7.3f} us")
    print(f"   numpy np.add(out=)                      {t_np / 1000:7.3f} us")
    print(f"   ratio built / numpy                     {t_built / t_np:7.2f}x")


def small_kernel():
    A = te.placeholder((64, 64), name="A")
    B = te.placeholder((64, 64), name="B")
    return te.create_prim_func([A, B, topi.nn.softmax(topi.add(A, B))])


def bench_compile() -> None:
    print("\n3. compile time of a small kernel (add + softmax, 64x64: 5 stages)")
    from workbench.codegen.build import compile_to_object
    from workbench.tir.transform.pipeline import lower
    with tempfile.TemporaryDirectory() as tmp, options.override(cache_dir=tmp):
        func = small_kernel()
        start = time.perf_counter()
        wb.build(func)
        cold = time.perf_counter() - start
        start = time.perf_counter()
        wb.build(small_kernel())
        cached = time.perf_counter() - start
        lower_t = median_seconds(lambda: lower(small_kernel()), rounds=5)
        nocache = median_seconds(lambda: compile_to_object(small_kernel(), use_cache=False),
                                 rounds=5)
        n_objects = sum(1 for _ in Path(tmp).rglob("*.o"))
    print(f"   cold build (empty cache dir)            {cold * 1e3:8.1f} ms")
    print(f"   cached build (same kernel, rebuilt IR)  {cached * 1e3:8.1f} ms   "
          f"cold / cached {cold / cached:5.1f}x")
    print(f"   of which TIR lowering                   {lower_t * 1e3:8.1f} ms")
    print(f"   lower + LLVM codegen without the cache  {nocache * 1e3:8.1f} ms")
    print(f"   objects in the cache dir: {n_objects}")


def main() -> None:
    print(f"bench_foundation: {os.cpu_count()} CPU(s), load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    bench_add()
    bench_overhead()
    bench_compile()


if __name__ == "__main__":
    main()
