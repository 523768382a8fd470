"""Workloads and checks shared by the cache / storage / layout schedule tests."""
from __future__ import annotations

import textwrap
from typing import Callable

import numpy as np
import pytest

from workbench import te
from workbench.ir.structural import assert_structural_equal
from workbench.tir.interpreter import run
from workbench.tir.schedule import Schedule, ScheduleError
from workbench.tir.schedule.testing import verify_trace_roundtrip

RNG = np.random.default_rng(0)


def elementwise_chain(n: int = 8):
    """B = A * 2; C = B + 1."""
    A = te.placeholder((n, n), name="A")
    B = te.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, n), lambda i, j: B[i, j] + 1.0, name="C")
    return te.create_prim_func([A, C])


def ref_elementwise_chain(a):
    return a * 2 + 1


def two_consumers(n: int = 8):
    """B = A * 2; C = B + 1; D = B * 3 + C (B has two consumers, A one)."""
    A = te.placeholder((n, n), name="A")
    B = te.compute((n, n), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, n), lambda i, j: B[i, j] + 1.0, name="C")
    D = te.compute((n, n), lambda i, j: B[i, j] * 3.0 + C[i, j], name="D")
    return te.create_prim_func([A, D])


def ref_two_consumers(a):
    b = a * 2
    return b * 3 + (b + 1)


def matmul(n: int = 8):
    """C = A @ B (a reduction); D = C + 1."""
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((n, n), lambda i, j: C[i, j] + 1.0, name="D")
    return te.create_prim_func([A, B, D])


def ref_matmul(a, b):
    return a @ b + 1


def conv2d(n=1, c=2, hw=6, f=2, r=3):
    """A valid (unpadded) NCHW convolution."""
    out = hw - r + 1
    data = te.placeholder((n, c, hw, hw), name="data")
    weight = te.placeholder((f, c, r, r), name="weight")
    rc = te.reduce_axis((0, c), name="rc")
    ry = te.reduce_axis((0, r), name="ry")
    rx = te.reduce_axis((0, r), name="rx")
    conv = te.compute(
        (n, f, out, out),
        lambda b, k, y, x: te.sum(data[b, rc, y + ry, x + rx] * weight[k, rc, ry, rx],
                                  axis=[rc, ry, rx]), name="conv")
    return te.create_prim_func([data, weight, conv])


def ref_conv2d(data, weight):
    n, c, hw, _ = data.shape
    f, _, r, _ = weight.shape
    out = hw - r + 1
    res = np.zeros((n, f, out, out), np.float64)
    for ry in range(r):
        for rx in range(r):
            patch = data[:, :, ry:ry + out, rx:rx + out]
            res += np.einsum("ncyx,fc->nfyx", patch, weight[:, :, ry, rx])
    return res.astype(np.float32)


def rand(*shape):
    return RNG.random(shape, dtype=np.float32)


def assert_script(sch: Schedule, expected: str) -> None:
    got = sch.mod["main"].script().strip()
    want = textwrap.dedent(expected).strip()
    assert got == want, f"IR differs; got:\n{got}"


def check_numerics(func, reference: Callable, *inputs: np.ndarray, out_shape=None,
                   rtol: float = 1e-5) -> None:
    """Run ``func`` in the interpreter (last parameter is the output) against numpy."""
    want = reference(*inputs)
    out = np.zeros(out_shape or want.shape, np.float32)
    run(func, *inputs, out)
    np.testing.assert_allclose(out.reshape(want.shape), want, rtol=rtol, atol=1e-5)


def check_schedule(sch: Schedule, mod, reference: Callable, *inputs: np.ndarray) -> None:
    """Numerics against numpy plus the JSON / Python trace round trip."""
    check_numerics(sch.mod["main"], reference, *inputs)
    verify_trace_roundtrip(sch, mod)


def assert_refused(sch: Schedule, call: Callable[[], object], match: str) -> None:
    """``call`` raises ScheduleError mentioning ``match`` and leaves the schedule unchanged."""
    before = sch.mod
    n = len(sch.trace)
    with pytest.raises(ScheduleError, match=match):
        call()
    assert_structural_equal(sch.mod, before)
    assert len(sch.trace) == n
