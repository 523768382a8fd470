"""Timing next to other libraries: how a numpy (OpenBLAS) matmul slows our parallel kernels
right after it, and the other way round.

After a BLAS call, OpenBLAS's worker threads spin (busy, sched_yield) for a while before they
sleep (about 0.1 s); libgomp's idle threads spin too after our kernels (GOMP_SPINCOUNT). On a
machine with few cores a spinning pool takes a core from the next library's threads. This
script measures, in turns (so load on a shared machine hits every variant alike) and as
ratios to the same measurement on a quiet process:

A. our parallel matmul kernel right after ``numpy.matmul``: one plain call, the mean of plain
   calls during the first 50 ms, and ``time_evaluator(number=5, repeat=1)`` (a measurement
   of a few ms) with the runtime's ``timing_settle_ms`` on (default) and off (0);
B. ``numpy.matmul`` right after our kernel, with libgomp's default spin and with the runtime's
   ``omp_spin_count`` (each in a fresh interpreter: libgomp reads it once, when loaded);
C. back-to-back calls of a small parallel kernel under both spin settings (what spinning is
   for: the next parallel region starts without waking threads up).

Usage: ``python benchmarks/bench_blas_interference.py [--rounds 15]``
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

PAUSE = 0.35  # longer than OpenBLAS's and libgomp's spinning: every turn starts quiet


def _kernel(n: int, tile: int = 8):
    """Our matmul with a parallel outer loop and a vectorized inner loop, and its inputs."""
    import workbench as wb
    from workbench import te, tir

    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    sch = tir.Schedule(te.create_prim_func([A, B, C]))
    blk = sch.get_sblock("C")
    i, j, kk = sch.get_loops(blk)
    io, ii = sch.split(i, [None, tile])
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(io, jo, kk, ii, ji)
    sch.parallel(io)
    sch.vectorize(ji)
    rt = wb.build(sch.mod, target="llvm")
    rng = np.random.RandomState(0)
    args = [wb.nd.array(rng.rand(n, n).astype("float32")) for _ in range(2)]
    args.append(wb.nd.array(np.zeros((n, n), "float32")))
    return rt, args


def _burst(f, args, secs: float = 0.05) -> float:
    """Mean seconds per call of back-to-back calls for ``secs``."""
    n, t0 = 0, time.perf_counter()
    while True:
        f(*args)
        n += 1
        el = time.perf_counter() - t0
        if el >= secs:
            return el / n


def part_a(rounds: int) -> dict:
    import workbench as wb
    from workbench import options

    rt, args = _kernel(256)
    f = rt["main"]
    x = np.random.rand(512, 512).astype("float32")
    # one short measurement (a few ms), as a quick check in a notebook makes: it falls
    # entirely inside the ~0.1 s that OpenBLAS spins
    ev = rt.time_evaluator("main", wb.cpu(0), number=5, repeat=1)
    for _ in range(10):
        f(*args)
    res: dict = {k: [] for k in ("single_quiet", "single_after", "burst_quiet", "burst_after",
                                 "eval_quiet", "eval_after", "eval_nosettle_quiet",
                                 "eval_nosettle_after")}

    def turn(numpy_first: bool) -> None:
        time.sleep(PAUSE)
        if numpy_first:
            x @ x

    for _ in range(rounds):
        for after in (False, True):
            tag = "after" if after else "quiet"
            turn(after)
            t0 = time.perf_counter()
            f(*args)
            res[f"single_{tag}"].append(time.perf_counter() - t0)
            turn(after)
            res[f"burst_{tag}"].append(_burst(f, args))
            turn(after)
            res[f"eval_{tag}"].append(float(ev(*args).median))
            with options.override(timing_settle_ms=0):
                turn(after)
                res[f"eval_nosettle_{tag}"].append(float(ev(*args).median))
    return {k: float(np.median(v)) for k, v in res.items()}


def part_bc(rounds: int) -> dict:
    """Run in a child whose libgomp spin setting was fixed at load."""
    rt, args = _kernel(256)
    f = rt["main"]
    small, sargs = _kernel(64, tile=4)
    g = small["main"]
    x = np.random.rand(512, 512).astype("float32")
    for _ in range(10):
        f(*args)
        g(*sargs)
    np_quiet, np_after, back_to_back = [], [], []
    for _ in range(rounds):
        time.sleep(PAUSE)
        t0 = time.perf_counter()
        x @ x
        np_quiet.append(time.perf_counter() - t0)
        time.sleep(PAUSE)
        f(*args)
        t0 = time.perf_counter()
        x @ x
        np_after.append(time.perf_counter() - t0)
        time.sleep(PAUSE)
        back_to_back.append(_burst(g, sargs))
    return {"np_quiet": float(np.median(np_quiet)), "np_after": float(np.median(np_after)),
            "small_burst": float(np.median(back_to_back))}


def _child(spin: str, rounds: int) -> dict:
    env = dict(os.environ)
    env.pop("GOMP_SPINCOUNT", None)
    env.pop("OMP_WAIT_POLICY", None)
    env["WORKBENCH_OMP_SPIN_COUNT"] = spin
    out = subprocess.run([sys.executable, __file__, "--child", "--rounds", str(rounds)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--child", action="store_true")
    args = ap.parse_args()
    if args.child:
        print(json.dumps(part_bc(args.rounds)))
        return
    from workbench import options
    print(f"cores: {os.cpu_count()}; load: {os.getloadavg()[0]:.2f}; rounds: {args.rounds}; "
          f"timing_settle_ms default {options.get('timing_settle_ms')}, omp_spin_count "
          f"default {options.get('omp_spin_count')}")
    a = part_a(args.rounds)
    print("\nA. our parallel 256x256 matmul right after numpy's 512x512 matmul "
          "(ratio to the same measurement after a quiet pause; 1.00 = no effect):")
    print(f"  one plain call                      {a['single_after'] / a['single_quiet']:.2f}x")
    print(f"  plain calls, first 50 ms (mean)     {a['burst_after'] / a['burst_quiet']:.2f}x")
    print(f"  time_evaluator, settle off          "
          f"{a['eval_nosettle_after'] / a['eval_nosettle_quiet']:.2f}x")
    print(f"  time_evaluator, settle on (default) {a['eval_after'] / a['eval_quiet']:.2f}x")
    print(f"  (quiet: one call {a['single_quiet'] * 1e6:.0f} us, burst "
          f"{a['burst_quiet'] * 1e6:.0f} us/call, time_evaluator {a['eval_quiet'] * 1e6:.0f} us)")
    default = _child("-1", args.rounds)
    ours = _child(str(options.get("omp_spin_count")), args.rounds)
    print("\nB. numpy's matmul right after our kernel (ratio to numpy after a quiet pause):")
    print(f"  libgomp default spin                {default['np_after'] / default['np_quiet']:.2f}x")
    print(f"  omp_spin_count={options.get('omp_spin_count'):<6}              "
          f"{ours['np_after'] / ours['np_quiet']:.2f}x")
    print("\nC. back-to-back calls of a small parallel kernel (64x64 matmul), omp_spin_count "
          f"vs libgomp's default: {ours['small_burst'] / default['small_burst']:.2f}x time per "
          f"call ({default['small_burst'] * 1e6:.1f} us default)")
    print(f"\nload at the end: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
