"""sigmoid on float32 vectors computes exp inline (no libmvec call) and stays accurate."""
import numpy as np
import pytest

import workbench as wb
from workbench import te


def _sigmoid_module(n: int, lanes: int, dtype: str = "float32"):
    A = te.placeholder((n,), dtype, name="A")
    B = te.compute((n,), lambda i: te.sigmoid(A[i]), name="B")
    sch = wb.tir.Schedule(te.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    _, inner = sch.split(i, [None, lanes])
    sch.vectorize(inner)
    return sch.mod


def _run(rt, a: np.ndarray) -> np.ndarray:
    b = wb.nd.empty(a.shape, str(a.dtype))
    rt["main"](wb.nd.array(a), b)
    return b.numpy()


# the host (AVX-512), AVX2 + FMA, and plain x86-64 (SSE2: no FMA, llvm.fmuladd splits)
TARGETS = ["llvm", "llvm -mcpu=haswell", "llvm -mcpu=x86-64"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("lanes", [16, 8, 4, 12])
def test_sigmoid_within_few_ulp_of_float64(target, lanes):
    n = 4096
    rt = wb.build(_sigmoid_module(n, lanes), target=target)
    rng = np.random.default_rng(0)
    a = np.concatenate([np.linspace(-80, 80, n // 2), rng.standard_normal(n // 2) * 6])
    a = a.astype("float32")
    got = _run(rt, a)
    want = 1.0 / (1.0 + np.exp(-a.astype("float64")))
    ulp = np.abs(got - want) / np.spacing(want.astype("float32"))
    assert ulp.max() <= 4, (ulp.max(), a[np.argmax(ulp)])


def test_sigmoid_saturates_and_keeps_nan():
    rt = wb.build(_sigmoid_module(64, 16))
    a = np.array([np.inf, -np.inf, np.nan, 100.0, -100.0, 89.0, -88.0, 0.0] * 8, "float32")
    got = _run(rt, a)
    want = 1.0 / (1.0 + np.exp(-a.astype("float64")))
    finite = ~np.isnan(a)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-6, atol=1e-37)
    assert np.isnan(got[~finite]).all()


def test_sigmoid_float32_vectors_call_no_vector_math_library():
    rt = wb.build(_sigmoid_module(256, 16))
    ll = rt.get_source("ll")
    assert "_ZGV" not in ll and "llvm.exp" not in ll
    assert "llvm.fmuladd.v16f32" in ll


def test_float64_sigmoid_keeps_accurate_exp():
    # the inline polynomial is float32-only: float64 keeps exp's full precision
    rt = wb.build(_sigmoid_module(256, 8, "float64"))
    a = np.linspace(-30, 30, 256)
    np.testing.assert_allclose(_run(rt, a), 1 / (1 + np.exp(-a)), rtol=1e-13)
