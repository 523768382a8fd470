"""Small te workloads shared by the schedule tests."""
import numpy as np

import workbench as wb
from workbench import te


def matmul(m=16, n=24, k=8, dtype="float32"):
    A = te.placeholder((m, k), dtype, name="A")
    B = te.placeholder((k, n), dtype, name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return te.create_prim_func([A, B, C])


def matmul_relu(m=16, n=24, k=8):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    D = te.compute((m, n), lambda i, j: te.max(C[i, j], 0.0), name="D")
    return te.create_prim_func([A, B, D])


def run_and_compare(mod, reference, *arrays, rtol=1e-5):
    """Compile ``mod`` and check its last argument against ``reference(*inputs)``."""
    rt = wb.build(mod)
    nds = [wb.nd.array(a) for a in arrays]
    rt["main"](*nds)
    np.testing.assert_allclose(nds[-1].numpy(), reference(*arrays[:-1]), rtol=rtol, atol=1e-5)
