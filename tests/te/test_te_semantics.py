"""create_prim_func results executed by the reference interpreter, compared with numpy."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import te
from workbench.tir.interpreter import InterpreterError, run

rng = np.random.default_rng(0)


def _rand(*shape, dtype="float32"):
    return rng.standard_normal(shape).astype(dtype)


def test_elementwise_and_math():
    A = te.placeholder((3, 4), name="A")
    B = te.compute((3, 4), lambda i, j: te.exp(A[i, j]) * te.sigmoid(A[i, j]) + te.erf(A[i, j]),
                   name="B")
    a, b = _rand(3, 4), np.zeros((3, 4), "float32")
    run(te.create_prim_func([A, B]), a, b)
    from math import erf
    ref = np.exp(a) / (1 + np.exp(-a)) + np.vectorize(erf)(a)
    np.testing.assert_allclose(b, ref, rtol=1e-5, atol=1e-6)


def test_broadcast():
    A = te.placeholder((4,), name="A")
    B = te.placeholder((3, 4), name="B")
    C = te.compute((3, 4), lambda i, j: A[j] - B[i, j], name="C")
    a, b, c = _rand(4), _rand(3, 4), np.zeros((3, 4), "float32")
    run(te.create_prim_func([A, B, C]), a, b, c)
    np.testing.assert_allclose(c, a[None, :] - b, rtol=1e-6)


def test_matmul():
    A = te.placeholder((5, 7), name="A")
    B = te.placeholder((7, 3), name="B")
    k = te.reduce_axis((0, 7), name="k")
    C = te.compute((5, 3), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    a, b = _rand(5, 7), _rand(7, 3)
    c = np.full((5, 3), 123.0, "float32")  # init must overwrite whatever was there
    run(te.create_prim_func([A, B, C]), a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)


def test_two_stage_pipeline():
    A = te.placeholder((4, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    M = te.compute((4,), lambda i: te.max(A[i, k], axis=k), name="M")
    E = te.compute((4, 6), lambda i, j: te.exp(A[i, j] - M[i]), name="E")
    k2 = te.reduce_axis((0, 6), name="k2")
    S = te.compute((4,), lambda i: te.sum(E[i, k2], axis=k2), name="S")
    Y = te.compute((4, 6), lambda i, j: E[i, j] / S[i], name="softmax")
    f = te.create_prim_func([A, Y])
    assert [b.name for b in f.body.block.alloc_buffers] == ["M", "E", "S"]
    a, y = _rand(4, 6), np.zeros((4, 6), "float32")
    run(f, a, y)
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(y, e / e.sum(1, keepdims=True), rtol=1e-5)


def test_conv2d_with_padding():
    n, c, h, w, f_, kh = 1, 2, 5, 4, 3, 3
    A = te.placeholder((n, c, h, w), name="A")
    W = te.placeholder((f_, c, kh, kh), name="W")
    P = te.compute((n, c, h + 2, w + 2), lambda b, ch, y, x: te.if_then_else(
        te.all(y >= 1, y < h + 1, x >= 1, x < w + 1), A[b, ch, y - 1, x - 1], 0.0), name="pad")
    rc = te.reduce_axis((0, c), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kh), name="rx")
    O = te.compute((n, f_, h, w), lambda b, o, y, x: te.sum(
        P[b, rc, y + ry, x + rx] * W[o, rc, ry, rx], axis=[rc, ry, rx]), name="conv")
    a, wt, out = _rand(n, c, h, w), _rand(f_, c, kh, kh), np.zeros((n, f_, h, w), "float32")
    run(te.create_prim_func([A, W, O]), a, wt, out)
    ap = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros_like(out)
    for y in range(h):
        for x in range(w):
            ref[:, :, y, x] = np.einsum("bcij,ocij->bo", ap[:, :, y:y + kh, x:x + kh], wt)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)


def _argmax():
    def fcombine(x, y):
        take_lhs = x[1] >= y[1]
        return te.select(take_lhs, x[0], y[0]), te.select(take_lhs, x[1], y[1])

    return te.comm_reducer(fcombine, lambda t0, t1: (te.const(-1, t0), te.min_value(t1)),
                           name="argmax")


def test_argmax():
    argmax = _argmax()
    A = te.placeholder((5, 9), name="A")
    k = te.reduce_axis((0, 9), name="k")
    idx, val = te.compute((5,), lambda i: argmax((k.var, A[i, k]), axis=k), name="T")
    a = _rand(5, 9)
    ri, rv = np.zeros(5, "int32"), np.zeros(5, "float32")
    run(te.create_prim_func([A, idx, val]), a, ri, rv)
    np.testing.assert_array_equal(ri, a.argmax(1))
    np.testing.assert_array_equal(rv, a.max(1))


def test_symbolic_shapes_bound_from_arrays():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k] * A[i, k], axis=k), name="B")
    f = te.create_prim_func([A, B])
    for shape in [(3, 5), (2, 1)]:
        a, b = _rand(*shape), np.zeros(shape[0], "float32")
        run(f, a, b)
        np.testing.assert_allclose(b, (a * a).sum(1), rtol=1e-5)
    with pytest.raises(InterpreterError, match="n=3"):
        run(f, _rand(3, 5), np.zeros(4, "float32"))


def test_reduction_with_where_and_nonzero_axis_min():
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k, where=k <= i * 2), name="B")
    k2 = te.reduce_axis((3, 8), name="k2")
    C = te.compute((4,), lambda i: te.max(A[i, k2], axis=k2), name="C")
    a, b, c = _rand(4, 8), np.zeros(4, "float32"), np.zeros(4, "float32")
    run(te.create_prim_func([A, B, C]), a, b, c)
    np.testing.assert_allclose(b, [a[i, :2 * i + 1].sum() for i in range(4)], rtol=1e-5)
    np.testing.assert_array_equal(c, a[:, 3:].max(1))


def test_where_keeps_out_of_bounds_loads_unevaluated():
    # A tiled-style reduction: the guard keeps k*3 + j inside A.
    A = te.placeholder((10,), name="A")
    ko = te.reduce_axis((0, 4), name="ko")
    ki = te.reduce_axis((0, 3), name="ki")
    S = te.compute((), lambda: te.sum(A[ko * 3 + ki], axis=[ko, ki], where=ko * 3 + ki < 10),
                   name="S")
    a, s = _rand(10), np.zeros((), "float32")
    run(te.create_prim_func([A, S]), a, s)
    np.testing.assert_allclose(s, a.sum(), rtol=1e-5)


def test_index_dtype_override_runs_the_same():
    n = te.var("n")
    A = te.placeholder((n, 4), name="A")
    k = te.reduce_axis((0, 4), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, 3 - k] * (k + 1).astype("float32"), axis=k),
                   name="B")
    f = te.create_prim_func([A, B], index_dtype_override="int64")
    a, b = _rand(3, 4), np.zeros(3, "float32")
    run(f, a, b)
    np.testing.assert_allclose(b, (a[:, ::-1] * np.arange(1, 5)).sum(1), rtol=1e-5)


def test_scalar_parameter_and_integer_compute():
    alpha = te.var("alpha", "int32")
    A = te.placeholder((6,), "int32", name="A")
    B = te.compute((6,), lambda i: te.truncdiv(A[i], alpha) + A[i] // alpha, name="B")
    f = te.create_prim_func([A, alpha, B])
    a = np.array([-7, -6, -1, 0, 5, 7], "int32")
    b = np.zeros(6, "int32")
    run(f, a, -2, b)
    np.testing.assert_array_equal(b, np.trunc(a / -2).astype("int32") + a // -2)


def test_multi_output_elementwise():
    A = te.placeholder((4,), name="A")
    X, Y = te.compute((4,), lambda i: (A[i] + 1.0, A[i] * 2.0), name="xy")
    a, x, y = _rand(4), np.zeros(4, "float32"), np.zeros(4, "float32")
    run(te.create_prim_func([A, X, Y]), a, x, y)
    np.testing.assert_allclose(x, a + 1)
    np.testing.assert_allclose(y, a * 2)
