"""TVM's MetaSchedule on bench_tuning's workloads, run by bench_tuning.py in the same run.

Runs under a Python with Apache TVM 0.27 installed (not the project's venv: TVM is not a
dependency), e.g.::

    python3 -m venv tvmenv
    tvmenv/bin/pip install apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post0 \
        psutil xgboost cloudpickle tornado

Usage: ``tvmenv/bin/python benchmarks/tvm_anchor.py {matmul N | conv2d} TRIALS PER_ITER MCPU
CORES``. Tunes with ``tune_tir`` (TVM's defaults: evolutionary search, XGB, LocalBuilder /
LocalRunner) and prints one JSON line: ``tune_s`` (the call, end to end: the way a user
waits), ``kernel_s`` (the best schedule rebuilt, median of 5 x 20 calls), ``trials``.
The builder's time limit is ``TVM_BUILD_TIMEOUT`` (default 300 s: TVM's own 30 s timed every
build out on the project's 2-core machines).
"""
import json
import os
import sys
import tempfile
import time

import numpy as np
import tvm
from tvm import te, topi
from tvm.s_tir import meta_schedule as ms


def matmul(n: int):
    a = te.placeholder((n, n), "float32", name="A")
    b = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), "k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return te.create_prim_func([a, b, c]), [(n, n), (n, n), (n, n)]


def conv2d_relu():
    data = te.placeholder((1, 56, 56, 64), "float32", name="data")
    weight = te.placeholder((3, 3, 64, 64), "float32", name="weight")
    out = topi.nn.relu(topi.nn.conv2d_nhwc(data, weight, 1, 1, 1))
    return te.create_prim_func([data, weight, out]), [(1, 56, 56, 64), (3, 3, 64, 64),
                                                      (1, 56, 56, 64)]


def main() -> None:
    workload, rest = sys.argv[1], sys.argv[2:]
    if workload == "matmul":
        func, shapes = matmul(int(rest.pop(0)))
    elif workload == "conv2d":
        func, shapes = conv2d_relu()
    else:
        raise SystemExit(f"tvm_anchor: unknown workload {workload!r} (matmul N | conv2d)")
    trials, per_iter, mcpu, cores = int(rest[0]), int(rest[1]), rest[2], int(rest[3])
    mod = tvm.IRModule({"main": func})
    target = tvm.target.Target({"kind": "llvm", "mtriple": "x86_64-linux-gnu", "mcpu": mcpu,
                                "num-cores": cores})
    timeout = float(os.environ.get("TVM_BUILD_TIMEOUT", "300"))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as work_dir:
        db = ms.tune_tir(mod, target, work_dir, max_trials_global=trials,
                         num_trials_per_iter=per_iter,
                         builder=ms.builder.LocalBuilder(timeout_sec=timeout))
        sch = ms.tir_integration.compile_tir(db, mod, target)
        records = len(db.get_all_tuning_records())
    tune_s = time.perf_counter() - t0
    lib = tvm.compile(sch.mod, target=target)
    lib = lib.jit() if hasattr(lib, "jit") else lib   # 0.27: an Executable to load first
    dev = tvm.cpu()
    args = [tvm.runtime.tensor(np.random.rand(*s).astype("float32"), dev) for s in shapes]
    lib["main"](*args)
    kernel_s = lib.time_evaluator("main", dev, number=20, repeat=5)(*args).median
    print(json.dumps({"tune_s": tune_s, "kernel_s": kernel_s, "trials": records}))


main()
