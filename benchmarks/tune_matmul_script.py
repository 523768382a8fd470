"""A plain tuning script, as a user writes it (issue 27: done within 60 s end to end).

No main guard: tune a 128^3 float32 matmul for 16 trials with ``ms.tune_tir``, build the best
schedule, check it against numpy and print the wall times. Measure the whole process with
``time python benchmarks/tune_matmul_script.py`` (imports included).
"""
import time

T_START = time.perf_counter()

import os  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import workbench as wb  # noqa: E402
from workbench import meta_schedule as ms  # noqa: E402
from workbench import te  # noqa: E402

N = 128
TARGET = "llvm -num-cores=2"

A = te.placeholder((N, N), "float32", name="A")
B = te.placeholder((N, N), "float32", name="B")
k = te.reduce_axis((0, N), name="k")
C = te.compute((N, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
func = te.create_prim_func([A, B, C])
t_imported = time.perf_counter()

t0 = time.perf_counter()
database = ms.tune_tir(func, TARGET, tempfile.mkdtemp(prefix="tune_matmul_"),
                       max_trials_global=16)
t_tuned = time.perf_counter()

sch = ms.compile_tir(database, func, TARGET)
lib = wb.build(sch.mod, target=TARGET)
a = np.random.uniform(-1, 1, (N, N)).astype("float32")
b = np.random.uniform(-1, 1, (N, N)).astype("float32")
c = wb.nd.array(np.zeros((N, N), "float32"))
lib["main"](wb.nd.array(a), wb.nd.array(b), c)
np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)
t_end = time.perf_counter()

print(f"imports + workload: {t_imported - T_START:.1f} s, tune_tir (16 trials): "
      f"{t_tuned - t0:.1f} s, build + check: {t_end - t_tuned:.1f} s, "
      f"total: {t_end - T_START:.1f} s; matches numpy")
