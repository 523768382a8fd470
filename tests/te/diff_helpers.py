"""Helpers for the differential tests: compile te/topi computations and compare with numpy."""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

import workbench as wb
from workbench import te

RNG = np.random.default_rng(1234)

# float32 kernels use LLVM intrinsics / libm in single precision; numpy may compute in a
# different order (pairwise sums), so compare with tolerances a few ulps wide.
TOL = {"float32": dict(rtol=2e-5, atol=2e-6), "float64": dict(rtol=1e-12, atol=1e-13)}


def rand(shape: Sequence[int], dtype: str = "float32", low: float = -2.0,
         high: float = 2.0) -> np.ndarray:
    """Random data: uniform floats in [low, high), or integers in [low, high]."""
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(int(low), int(high) + 1, size=shape).astype(dtype)
    return RNG.uniform(low, high, size=shape).astype(dtype)


def build(inputs: Sequence[te.Tensor], outputs: Sequence[te.Tensor]):
    """Compile ``inputs + outputs`` as one PrimFunc; returns the runtime function."""
    return wb.build(te.create_prim_func(list(inputs) + list(outputs)), target="llvm")["main"]


def run(inputs: Sequence[te.Tensor], outputs: Sequence[te.Tensor],
        arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Compile, call with ``arrays`` and freshly filled outputs, return the outputs as numpy.

    Outputs start filled with garbage so a kernel that skips an element is caught.
    """
    f = build(inputs, outputs)
    out_nd = []
    for t in outputs:
        shape = tuple(int(s.value) for s in t.shape)
        garbage = np.full(shape, 77, dtype=t.dtype) if t.dtype != "bool" else np.ones(shape, bool)
        out_nd.append(wb.nd.array(garbage))
    f(*[wb.nd.array(np.ascontiguousarray(a)) for a in arrays], *out_nd)
    return [o.numpy() for o in out_nd]


def check(inputs, outputs, arrays, expected, dtype: str | None = None, **tol) -> None:
    """``run`` and compare each output with ``expected`` (exactly for integers and bools)."""
    outs = run(inputs, outputs if isinstance(outputs, (list, tuple)) else [outputs], arrays)
    exp_list = expected if isinstance(expected, (list, tuple)) else [expected]
    for got, want in zip(outs, exp_list):
        want = np.asarray(want)
        assert got.shape == want.shape, (got.shape, want.shape)
        if got.dtype.kind in "iub":
            np.testing.assert_array_equal(got, want.astype(got.dtype))
        else:
            kw = dict(TOL.get(dtype or str(got.dtype), TOL["float32"]))
            kw.update(tol)
            np.testing.assert_allclose(got, want, **kw)


erf = np.vectorize(math.erf, otypes=[np.float64])
