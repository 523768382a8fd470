"""te workloads, numpy references and checks shared by the compute-location schedule tests."""
from __future__ import annotations

import textwrap
from typing import Callable

import numpy as np
import pytest

from workbench import te
from workbench.ir.structural import structural_equal
from workbench.tir import interpreter
from workbench.tir.schedule import Schedule, ScheduleError


def chain(n: int = 16, m: int = 16):
    """B = A * 2, C = B + 1 (two elementwise stages)."""
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((n, m), lambda i, j: B[i, j] + 1.0, name="C")
    return te.create_prim_func([A, C])


def chain_ref(a: np.ndarray) -> np.ndarray:
    return a * 2 + 1


def chain_1d(n: int = 10, m: int | None = None):
    """B = A * 2 over n points, C = B + 1 over the first m (default all)."""
    m = n if m is None else m
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((m,), lambda i: B[i] + 1.0, name="C")
    return te.create_prim_func([A, C])


def matmul_relu(m: int = 8, n: int = 8, k: int = 8):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    D = te.compute((m, n), lambda i, j: te.max(C[i, j], 0.0), name="D")
    return te.create_prim_func([A, B, D])


def matmul_relu_ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.maximum(a @ b, 0)


def conv_pad(h: int = 6, w: int = 6):
    """A 3x3 convolution of one channel with a zero-padding stage."""
    A = te.placeholder((h, w), name="A")
    W = te.placeholder((3, 3), name="W")
    P = te.compute((h + 2, w + 2), lambda i, j: te.if_then_else(
        te.all(i >= 1, i < h + 1, j >= 1, j < w + 1), A[i - 1, j - 1], 0.0), name="pad")
    ry = te.reduce_axis((0, 3), name="ry")
    rx = te.reduce_axis((0, 3), name="rx")
    C = te.compute((h, w), lambda i, j: te.sum(P[i + ry, j + rx] * W[ry, rx], axis=[ry, rx]),
                   name="conv")
    return te.create_prim_func([A, W, C])


def conv_pad_ref(a: np.ndarray, w: np.ndarray) -> np.ndarray:
    p = np.pad(a, 1)
    h, wd = a.shape
    return np.array([[(p[i:i + 3, j:j + 3] * w).sum() for j in range(wd)] for i in range(h)],
                    dtype=a.dtype)


def broadcast(n: int = 8, m: int = 4):
    """B = A * 2 over n, C[i, j] = B[i] + 1 over (n, m)."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n, m), lambda i, j: B[i] + 1.0, name="C")
    return te.create_prim_func([A, C])


def broadcast_ref(a: np.ndarray, m: int = 4) -> np.ndarray:
    return np.repeat((a * 2 + 1)[:, None], m, axis=1)


def two_consumers(n: int = 8):
    """B = A * 2 read by C = B + 1 and D = B * 3 (two outputs)."""
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
    C = te.compute((n,), lambda i: B[i] + 1.0, name="C")
    D = te.compute((n,), lambda i: B[i] * 3.0, name="D")
    return te.create_prim_func([A, C, D])


def four_stage(n: int = 8):
    """E = A * 2, U = A * 3, B = E + 1, C = B + U: a loop body with several statements."""
    A = te.placeholder((n,), name="A")
    E = te.compute((n,), lambda i: A[i] * 2.0, name="E")
    U = te.compute((n,), lambda i: A[i] * 3.0, name="U")
    B = te.compute((n,), lambda i: E[i] + 1.0, name="B")
    C = te.compute((n,), lambda i: B[i] + U[i], name="C")
    return te.create_prim_func([A, C])


def four_stage_ref(a: np.ndarray) -> np.ndarray:
    return a * 2 + 1 + a * 3


def two_inputs(n: int = 8):
    """B1 = A * 2, B2 = A + 1, C = B1 + B2: a consumer of two produced buffers."""
    A = te.placeholder((n,), name="A")
    B1 = te.compute((n,), lambda i: A[i] * 2.0, name="B1")
    B2 = te.compute((n,), lambda i: A[i] + 1.0, name="B2")
    C = te.compute((n,), lambda i: B1[i] + B2[i], name="C")
    return te.create_prim_func([A, C])


def transpose_epilogue(n: int = 4, m: int = 6):
    """B = A * 2, C[j, i] = B[i, j] + 1."""
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((m, n), lambda j, i: B[i, j] + 1.0, name="C")
    return te.create_prim_func([A, C])


# ---- checks --------------------------------------------------------------------------------

def assert_script(sch: Schedule, expected: str) -> None:
    """The scheduled function prints as ``expected`` (indentation of the literal removed)."""
    got = sch.mod["main"].script().strip()
    want = textwrap.dedent(expected).strip()
    assert got == want, f"got:\n{got}\n\nexpected:\n{want}"


def check_numeric(sch: Schedule, reference: Callable, *inputs: np.ndarray,
                  out_shape: tuple[int, ...] | None = None) -> None:
    """Run the scheduled function in the interpreter and compare its output with numpy."""
    want = reference(*inputs)
    out = np.zeros(out_shape or want.shape, dtype="float32")
    interpreter.run(sch.mod["main"], *inputs, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def check_refused(sch: Schedule, call: Callable[[], object], primitive: str, *words: str) -> None:
    """``call`` raises ScheduleError naming ``primitive`` and ``words``; nothing changed."""
    before = sch.mod
    n_insts = len(sch.trace)
    with pytest.raises(ScheduleError) as info:
        call()
    err = info.value
    assert err.primitive == primitive
    text = str(err)
    for w in words:
        assert w in text, f"{w!r} not in {text!r}"
    assert structural_equal(sch.mod, before)
    assert len(sch.trace) == n_insts
