"""Cluster benchmark (issue 13): tuning on a Dask cluster against tuning locally, and the cost
of one remote call.

1. Tuning wall time of the same workload (``tune_tir`` on a matmul, 64 trials by default,
   same seed and search settings) with

   - the local builder and runner (``LocalBuilder`` / ``LocalRunner``), and
   - a 2-worker Dask cluster on this machine (``LocalCluster(processes=True)``, each worker
     ``--nthreads 1`` with one unit of the key): ``builder="dask"``, ``runner="rpc"``;

   run in turns (local, cluster, local, cluster, ...) so a burst of load hits both; the
   cluster's start-up is reported apart. Also the best GFLOPS each run found: the cluster
   must find kernels as good as the local run's (on one machine its workers share the cores,
   so measurements are noisier).
2. Per-call overhead: a 16-element kernel called locally vs. in a remote session
   (``lib["main"](a, b)`` on remote arrays), and a small MLP on the local VM vs. the VM over
   RPC (a direct ``vm["main"](...)`` on remote arrays, and TVM's ``set_input`` +
   ``invoke_stateful`` + ``get_outputs``), timed in turns.

The machine's load average is printed with the results: on a shared machine, read the ratios,
not the absolute numbers.

Usage: ``python benchmarks/bench_cluster.py [--trials 64] [--n 256] [--rounds 1]
[--skip-tuning]``
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import workbench as wb  # noqa: E402
from workbench import meta_schedule as ms  # noqa: E402
from workbench import relax, rpc, te  # noqa: E402
from workbench.meta_schedule.runner import EvaluatorConfig, RPCConfig  # noqa: E402
from workbench.relax.frontend import nn  # noqa: E402

KEY = "workbench-bench"
EVALUATOR = EvaluatorConfig(number=3, repeat=1, min_repeat_ms=20)


def matmul_mod(n: int) -> wb.IRModule:
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return wb.IRModule({"main": te.create_prim_func([A, B, C])})


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


# ---- 1. tuning ---------------------------------------------------------------------------------

def tune_once(mod, n: int, target, trials: int, per_iter: int,
              cluster_config: RPCConfig | None):
    work_dir = tempfile.mkdtemp(prefix="bench_cluster_")
    kwargs = {}
    if cluster_config is None:
        kwargs["runner"] = ms.runner.LocalRunner(evaluator_config=EVALUATOR)
    else:
        kwargs.update(builder="dask", rpc_config=cluster_config,
                      runner=ms.runner.RPCRunner(cluster_config, evaluator_config=EVALUATOR))
    start = time.perf_counter()
    db = ms.tune_tir(mod, target, work_dir, max_trials_global=trials,
                     num_trials_per_iter=per_iter, seed=0, **kwargs)
    secs = time.perf_counter() - start
    best = min((r.run_secs for r in db.get_all_tuning_records() if r.run_secs[0] < 1e9),
               key=lambda s: float(np.median(s)), default=None)
    gflops = 2 * n ** 3 / float(np.median(best)) / 1e9 if best else float("nan")
    return secs, gflops


def bench_tuning(trials: int, n: int, per_iter: int, rounds: int) -> None:
    from distributed import LocalCluster

    mod = matmul_mod(n)
    target = wb.Target(f"llvm -num-cores={os.cpu_count() or 1}")
    start = time.perf_counter()
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                           resources={KEY: 1}, dashboard_address=None)
    config = RPCConfig(cluster.scheduler_address, tracker_key=KEY, session_timeout_sec=120)
    config.cluster().wait_for_workers(KEY, 60)
    startup = time.perf_counter() - start
    results: dict[str, list] = {"local": [], "cluster": []}
    try:
        for _ in range(rounds):
            results["local"].append(tune_once(mod, n, target, trials, per_iter, None))
            results["cluster"].append(tune_once(mod, n, target, trials, per_iter, config))
    finally:
        rpc.shutdown()
        cluster.close()
    print(f"\n== Tuning matmul {n}^3, {trials} trials ({per_iter} per batch), target {target}")
    print(f"   cluster start-up (scheduler + 2 worker processes): {startup:.1f} s")
    for name, runs in results.items():
        secs = [s for s, _ in runs]
        gflops = [g for _, g in runs]
        print(f"   {name:<8} wall time {min(secs):7.1f} s (runs: "
              f"{', '.join(f'{s:.1f}' for s in secs)})  best found {max(gflops):7.2f} GFLOPS")
    local = min(s for s, _ in results["local"])
    remote = min(s for s, _ in results["cluster"])
    print(f"   cluster / local wall time: {remote / local:.2f}x")
    print(f"   {load()}")


# ---- 2. per-call overhead ------------------------------------------------------------------------

class MLP(nn.Module):
    def __init__(self):
        self.fc1 = nn.Linear(16, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(nn.relu(self.fc1(x)))


def per_call(fn, calls: int) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def bench_calls(calls: int, rounds: int) -> None:
    from distributed import LocalCluster

    cluster = LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                           resources={KEY: 1}, dashboard_address=None)
    try:
        session = rpc.connect(cluster.scheduler_address, KEY, timeout=60)
        rdev, ldev = session.cpu(), wb.cpu()
        A = te.placeholder((16,), name="A")
        B = te.compute((16,), lambda i: A[i] + 1.0, name="B")
        lib = wb.build(te.create_prim_func([A, B]), "llvm")
        session.upload(lib, "add.o")
        rlib = session.load_module("add.o")
        la, lb = wb.nd.array(np.ones(16, "float32")), wb.nd.empty((16,), "float32")
        ra, rb = wb.nd.array(np.ones(16, "float32"), rdev), wb.nd.empty((16,), "float32", rdev)

        model = MLP()
        mod, _ = model.export_tvm({"forward": {"x": nn.spec.Tensor((4, 16), "float32")}})
        exe = wb.compile(mod, "llvm")
        params = [np.random.default_rng(0).standard_normal(p.shape).astype(p.dtype)
                  for _, p in model.named_parameters()]
        x = np.random.default_rng(1).standard_normal((4, 16)).astype("float32")
        lvm = relax.VirtualMachine(exe, ldev)
        session.upload(exe, "mlp.vmexe")
        rvm = relax.VirtualMachine(session.load_module("mlp.vmexe"), rdev)
        largs = [wb.nd.array(v) for v in [x, *params]]
        rargs = [wb.nd.array(v, rdev) for v in [x, *params]]

        def stateful():
            rvm.set_input("forward", *rargs)
            rvm.invoke_stateful("forward")
            rvm.get_outputs("forward")

        cases = {
            "kernel, local": lambda: lib["main"](la, lb),
            "kernel, remote": lambda: rlib["main"](ra, rb),
            "VM call, local": lambda: lvm["forward"](*largs),
            "VM call, remote": lambda: rvm["forward"](*rargs),
            "VM set_input+invoke_stateful+get_outputs, remote": stateful,
        }
        best = {name: float("inf") for name in cases}
        for _ in range(rounds):  # in turns: load bursts hit every case alike
            for name, fn in cases.items():
                n = calls * (50 if "local" in name else 1)
                best[name] = min(best[name], per_call(fn, n))
        session.close()
    finally:
        rpc.shutdown()
        cluster.close()
    print("\n== Per-call cost (best of the rounds; remote = a dask worker process on this "
          "machine)")
    for name, secs in best.items():
        print(f"   {name:<52} {secs * 1e6:10.1f} us")
    print(f"   remote kernel call overhead: {(best['kernel, remote'] - best['kernel, local']) * 1e3:.2f} ms;"
          f" remote VM call: {(best['VM call, remote'] - best['VM call, local']) * 1e3:.2f} ms")
    print(f"   {load()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=64)
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--per-iter", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--skip-tuning", action="store_true")
    args = parser.parse_args()
    logging.getLogger("workbench.meta_schedule").setLevel(logging.WARNING)
    print(f"bench_cluster: {load()}")
    bench_calls(args.calls, max(3, args.rounds))
    if not args.skip_tuning:
        bench_tuning(args.trials, args.n, args.per_iter, args.rounds)


if __name__ == "__main__":
    main()
