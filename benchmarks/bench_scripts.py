"""Scripts without a main guard tune as fast as guarded ones (issue 15, "Scripts").

1. Worker start-up: the first job of a ``workbench.workers.WorkerPool`` of 2 (fresh
   interpreters running our boot code) against the first job of a
   ``ProcessPoolExecutor(2)`` with multiprocessing's ``spawn`` (what the tuner used before),
   each timed from creation to both workers answering, in turns.
2. The tutorial script (TVM's style: a 128x128 matmul, ``tune_tir(mod, "llvm -num-cores=2",
   tempfile.mkdtemp(), max_trials_global=16)``) run as a fresh interpreter, with and without
   ``if __name__ == "__main__":``, in turns; wall time of the whole process.

Prints medians and the ratios (unguarded / guarded, ours / spawn). Nothing is asserted: run
it on a quiet machine and read the ratios. Usage:
``python benchmarks/bench_scripts.py [--rounds 2] [--trials 16] [--skip-scripts]``
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from workbench.workers import WorkerPool  # noqa: E402

BODY = """
import tempfile
import workbench.meta_schedule as ms
from workbench import te
from workbench.ir.module import IRModule

def tune():
    A = te.placeholder((128, 128), "float32", name="A")
    B = te.placeholder((128, 128), "float32", name="B")
    k = te.reduce_axis((0, 128), name="k")
    C = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    mod = IRModule({{"main": te.create_prim_func([A, B, C])}})
    ms.tune_tir(mod, "llvm -num-cores=2", tempfile.mkdtemp(), max_trials_global={trials})
"""


def start_ours() -> float:
    t0 = time.perf_counter()
    pool = WorkerPool(2)
    pool.run(abs, [(-1,), (-2,)], 120)
    while any(w.state == "starting" for w in pool._workers):  # both up, as spawn's below
        pool.run(abs, [(-1,)], 120)
    elapsed = time.perf_counter() - t0
    pool.shutdown()
    return elapsed


def start_spawn() -> float:
    t0 = time.perf_counter()
    with cf.ProcessPoolExecutor(2, mp_context=mp.get_context("spawn")) as ex:
        futures = [ex.submit(os.getpid) for _ in range(8)]
        while len({f.result() for f in futures}) < 2:
            futures = [ex.submit(os.getpid) for _ in range(8)]
        return time.perf_counter() - t0


def run_script(guarded: bool, trials: int) -> float:
    source = f"import sys\nsys.path.insert(0, {ROOT!r})\n" + BODY.format(trials=trials)
    source += "\nif __name__ == '__main__':\n    tune()\n" if guarded else "\ntune()\n"
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tutorial.py")
        with open(path, "w") as f:
            f.write(source)
        t0 = time.perf_counter()
        subprocess.run([sys.executable, path], check=True, capture_output=True, cwd=tmp)
        return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--trials", type=int, default=16)
    parser.add_argument("--skip-scripts", action="store_true")
    args = parser.parse_args()

    ours, spawn = [], []
    for _ in range(max(3, args.rounds)):
        ours.append(start_ours())
        spawn.append(start_spawn())
    o, s = statistics.median(ours), statistics.median(spawn)
    print(f"worker start-up, 2 workers: WorkerPool {o:.2f} s, spawn pool {s:.2f} s "
          f"(ratio {o / s:.2f})")
    if args.skip_scripts:
        return
    guarded, unguarded = [], []
    for _ in range(args.rounds):
        guarded.append(run_script(True, args.trials))
        unguarded.append(run_script(False, args.trials))
    g, u = statistics.median(guarded), statistics.median(unguarded)
    print(f"tutorial script, {args.trials} trials: guarded {g:.1f} s, no main guard {u:.1f} s "
          f"(ratio {u / g:.2f}); load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
