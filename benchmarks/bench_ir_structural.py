"""Speed of structural_hash / structural_equal / save_json / script on a tuner-sized PrimFunc.

The function is te's 3-stage ``C = A @ B; D = C + bias; E = max(D, 0)`` at 128x128 in block form,
the size of what the tuner hashes thousands of times. Prints the median time per call, and for
scale the time of ``pickle.dumps`` on the same function (a C-speed walk of the same objects).
"""
from __future__ import annotations

import pickle
import statistics
import time

from workbench import te, tir
from workbench.ir import load_json, save_json, structural_equal, structural_hash

ROUNDS, BATCH = 7, 200


def build() -> tir.PrimFunc:
    n = 128
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    bias = te.placeholder((n,), name="bias")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((n, n), lambda i, j: C[i, j] + bias[j], name="D")
    E = te.compute((n, n), lambda i, j: tir.max(D[i, j], tir.const(0.0)), name="E")
    return te.create_prim_func([A, B, bias, E])


def median_us(fn) -> float:
    times = []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        for _ in range(BATCH):
            fn()
        times.append((time.perf_counter() - t) / BATCH * 1e6)
    return statistics.median(times)


def main() -> None:
    f, g = build(), build()
    assert structural_equal(f, g) and structural_hash(f) == structural_hash(g)
    text = save_json(f)
    rows = {
        "structural_hash": median_us(lambda: structural_hash(f)),
        "structural_equal": median_us(lambda: structural_equal(f, g)),
        "save_json": median_us(lambda: save_json(f)),
        "load_json": median_us(lambda: load_json(text)),
        "script": median_us(lambda: f.script()),
        "pickle.dumps": median_us(lambda: pickle.dumps(f)),
    }
    ref = rows["pickle.dumps"]
    for name, us in rows.items():
        print(f"{name:18s} {us:9.1f} us   {us / ref:6.1f}x pickle")


if __name__ == "__main__":
    main()
