"""exp and sigmoid on float32 vectors compute exp inline (no libmvec call) and stay accurate,
over exp's whole float32 range (denormal results, overflow, infinities, NaN)."""
import numpy as np
import pytest

import workbench as wb
from workbench import te


def _sigmoid_module(n: int, lanes: int, dtype: str = "float32", f=te.sigmoid):
    A = te.placeholder((n,), dtype, name="A")
    B = te.compute((n,), lambda i: f(A[i]), name="B")
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


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("lanes", [16, 8])
def test_exp_within_one_ulp_over_its_whole_range(target, lanes):
    n = 8192
    rt = wb.build(_sigmoid_module(n, lanes, f=te.exp), target=target)
    rng = np.random.default_rng(1)
    a = np.concatenate([np.linspace(-110, 95, n // 2), rng.standard_normal(n // 2) * 20])
    a = a.astype("float32")
    got = _run(rt, a).astype("float64")
    exact = np.exp(a.astype("float64"))
    with np.errstate(over="ignore"):
        want = exact.astype("float32")
    normal = np.isfinite(want) & (want >= np.finfo("float32").tiny)
    ulp = np.abs(got[normal] - exact[normal]) / np.spacing(want[normal])
    assert ulp.max() <= 1.5, (ulp.max(), a[normal][np.argmax(ulp)])
    # denormal results: within one step of the smallest denormal; overflow is inf
    tiny = (want < np.finfo("float32").tiny)
    step = np.finfo("float32").smallest_subnormal
    assert np.abs(got[tiny] - want[tiny]).max() <= step
    assert np.isinf(got[np.isinf(want)]).all() and tiny.any() and np.isinf(want).any()


def test_exp_special_values_and_no_vector_math_call():
    rt = wb.build(_sigmoid_module(64, 16, f=te.exp))
    a = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, 88.72, -103.0] * 8, "float32")
    got = _run(rt, a)
    assert got[0] == np.inf and got[1] == 0.0 and np.isnan(got[2])
    assert got[3] == got[4] == 1.0 and got[5] == np.float32(np.e)
    np.testing.assert_allclose(got[6], np.exp(np.float64(a[6])), rtol=2e-7)
    assert 0 < got[7] < np.finfo("float32").tiny               # a denormal, not flushed
    ll = rt.get_source("ll")
    assert "_ZGV" not in ll and "llvm.exp" not in ll
