"""Vectorized math calls go through libmvec when the target supports it, and stay accurate."""
import math
import subprocess
import sys

import numpy as np
import pytest

import workbench as wb
from workbench import te
from workbench.codegen.vector_math import _libmvec

FUNCS = {
    "exp": np.exp, "log": np.log, "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
    "log1p": np.log1p, "erf": np.vectorize(math.erf), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}


def _vectorized(fn: str, n: int = 200, lanes: int = 40, dtype: str = "float32"):
    A = te.placeholder((n,), dtype, name="A")
    B = te.compute((n,), lambda i: getattr(te, fn)(A[i]), name="B")
    sch = wb.tir.Schedule(te.create_prim_func([A, B]))
    (i,) = sch.get_loops(sch.get_block("B"))
    _, inner = sch.split(i, [None, lanes])
    sch.vectorize(inner)
    return sch.mod


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("fn", sorted(FUNCS))
def test_vectorized_math_matches_numpy(fn, dtype):
    rt = wb.build(_vectorized(fn, dtype=dtype))
    a = (np.random.rand(200) * 3 + 0.05).astype(dtype)
    b = wb.nd.empty((200,), dtype)
    rt["main"](wb.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), FUNCS[fn](a.astype("float64")),
                               rtol=2e-6 if dtype == "float32" else 1e-13)


@pytest.mark.skipif(_libmvec() is None, reason="glibc's libmvec is not installed")
def test_log_uses_libmvec_and_survives_export(tmp_path):
    # (float32 exp is computed inline, workbench.codegen.inline_exp; log still calls libmvec)
    rt = wb.build(_vectorized("log", n=256, lanes=32))
    assert "_ZGV" in rt.get_source("ll")
    path = str(tmp_path / "log.so")
    rt.export_library(path)
    code = (
        "import numpy as np, workbench as wb\n"
        f"m = wb.runtime.load_module({path!r})\n"
        "a = np.linspace(0.5, 2, 256).astype('float32'); b = wb.nd.empty((256,), 'float32')\n"
        "m['main'](wb.nd.array(a), b)\n"
        "assert np.allclose(b.numpy(), np.log(a), rtol=2e-6, atol=1e-7)\n"
        "print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr
