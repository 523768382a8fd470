"""Differential tests: te/topi computations compiled with workbench.build versus numpy.

Elementwise math (every intrinsic of workbench.tir.op.INTRINSICS), integer arithmetic, casts,
broadcasting, reductions and layout operators, over float32/float64/int32/int8 where they
apply. The nn operators (matmul, conv2d, pooling, softmax, ...) and hand schedules are in
test_differential_nn.py.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import workbench as wb
from workbench import te, topi
from workbench.tir import op
from workbench.tir.op import INTRINSICS

from diff_helpers import build, check, erf, rand

FLOATS = ["float32", "float64"]


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


# name -> (numpy reference, input range). Ranges keep results finite and well conditioned.
FLOAT_UNARY = {
    "exp": (np.exp, (-5, 5)), "exp2": (np.exp2, (-5, 5)), "exp10": (lambda x: 10.0 ** x, (-3, 3)),
    "log": (np.log, (0.1, 10)), "log2": (np.log2, (0.1, 10)), "log10": (np.log10, (0.1, 10)),
    "log1p": (np.log1p, (-0.5, 5)), "sqrt": (np.sqrt, (0, 10)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.1, 10)), "tanh": (np.tanh, (-4, 4)),
    "sigmoid": (_sigmoid, (-8, 8)), "erf": (erf, (-3, 3)), "sin": (np.sin, (-4, 4)),
    "cos": (np.cos, (-4, 4)), "tan": (np.tan, (-1.2, 1.2)), "atan": (np.arctan, (-5, 5)),
    "floor": (np.floor, (-5, 5)), "ceil": (np.ceil, (-5, 5)), "round": (np.round, (-5, 5)),
    "trunc": (np.trunc, (-5, 5)), "nearbyint": (np.rint, (-5, 5)),
    "fabs": (np.abs, (-5, 5)), "abs": (np.abs, (-5, 5)),
}
FLOAT_BINARY = {
    "pow": (np.power, (0.1, 3), (-2, 2)), "fmod": (np.fmod, (-6, 6), (0.5, 2)),
    "atan2": (np.arctan2, (-3, 3), (-3, 3)),
}
PREDICATES = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite}
INT_OPS = {
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "shift_left": np.left_shift, "shift_right": np.right_shift,
}
INT_UNARY = {"bitwise_not": np.invert, "popcount": None}


def test_every_intrinsic_is_covered():
    covered = set(FLOAT_UNARY) | set(FLOAT_BINARY) | set(PREDICATES) | set(INT_OPS) | set(INT_UNARY)
    assert set(INTRINSICS) <= covered, sorted(set(INTRINSICS) - covered)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(FLOAT_UNARY))
def test_float_unary_intrinsic(name, dtype):
    ref, (lo, hi) = FLOAT_UNARY[name]
    shape = (4, 33)  # 33: not a multiple of any vector width
    a = rand(shape, dtype, lo, hi)
    if name in ("round", "nearbyint"):
        a[0, :8] = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -3.5], dtype)  # ties to even
    A = te.placeholder(shape, dtype, "A")
    B = te.compute(shape, lambda i, j: op.call(name, A[i, j]), name="B")
    check([A], [B], [a], ref(a.astype("float64")), dtype=dtype, rtol=2e-6 if dtype == "float32"
          else 1e-12, atol=1e-6 if dtype == "float32" else 1e-13)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(FLOAT_BINARY))
def test_float_binary_intrinsic(name, dtype):
    ref, ra, rb = FLOAT_BINARY[name]
    a, b = rand((50,), dtype, *ra), rand((50,), dtype, *rb)
    A, B = te.placeholder((50,), dtype, "A"), te.placeholder((50,), dtype, "B")
    C = te.compute((50,), lambda i: op.call(name, A[i], B[i]), name="C")
    check([A, B], [C], [a, b], ref(a, b), dtype=dtype, rtol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_predicates(dtype):
    a = np.array([0.0, -1.5, np.nan, np.inf, -np.inf, 3.0, np.nan, 1e30], dtype)
    A = te.placeholder((8,), dtype, "A")
    def predicate(name):
        return te.compute((8,), lambda i: op.call(name, A[i]), name=f"O_{name}")
    outs = [predicate(n) for n in PREDICATES]
    check([A], outs, [a], [f(a) for f in PREDICATES.values()])


def _popcount(x: np.ndarray) -> np.ndarray:
    unsigned = x.view(np.dtype(f"uint{x.dtype.itemsize * 8}"))
    return np.bitwise_count(unsigned).astype(x.dtype)


@pytest.mark.parametrize("dtype", ["int32", "int8", "uint8"])
@pytest.mark.parametrize("name", sorted(INT_OPS) + sorted(INT_UNARY))
def test_integer_bit_ops(name, dtype):
    info = np.iinfo(dtype)
    a = rand((40,), dtype, max(info.min, -1000), min(info.max, 1000))
    bits = np.dtype(dtype).itemsize * 8
    # Shift amounts stay below the bit width (larger shifts are undefined in C and LLVM).
    b = rand((40,), dtype, 0, bits - 1) if "shift" in name else rand((40,), dtype, info.min
                                                                         if info.min > -1000
                                                                         else -1000, 1000
                                                                         if info.max > 1000
                                                                         else info.max)
    A, B = te.placeholder((40,), dtype, "A"), te.placeholder((40,), dtype, "B")
    if name in INT_UNARY:
        C = te.compute((40,), lambda i: op.call(name, A[i]), name="C")
        want = _popcount(a) if name == "popcount" else np.invert(a)
    else:
        C = te.compute((40,), lambda i: op.call(name, A[i], B[i]), name="C")
        with np.errstate(over="ignore"):
            want = INT_OPS[name](a, b).astype(dtype)
    check([A, B], [C], [a, b], want)


@pytest.mark.parametrize("dtype", ["int32", "int8"])
def test_integer_abs_and_python_operators(dtype):
    a, b = rand((30,), dtype, -100, 100), rand((30,), dtype, -100, 100)
    A, B = te.placeholder((30,), dtype, "A"), te.placeholder((30,), dtype, "B")
    C = te.compute((30,), lambda i: op.abs(A[i]) + (A[i] & B[i]) - (A[i] | B[i]) + (A[i] ^ B[i]),
                   name="C")
    with np.errstate(over="ignore"):
        want = (np.abs(a) + (a & b) - (a | b) + (a ^ b)).astype(dtype)
    check([A, B], [C], [a, b], want)


@pytest.mark.parametrize("dtype", ["int32", "int8"])
def test_integer_division_on_negative_values(dtype):
    a = rand((64,), dtype, -100, 100)
    b = rand((64,), dtype, -9, 9)
    b[b == 0] = 3
    a[:4], b[:4] = [-7, 7, -7, 7], [2, -2, -2, 2]
    A, B = te.placeholder((64,), dtype, "A"), te.placeholder((64,), dtype, "B")
    outs = [te.compute((64,), lambda i: op.floordiv(A[i], B[i]), name="fdiv"),
            te.compute((64,), lambda i: op.floormod(A[i], B[i]), name="fmod"),
            te.compute((64,), lambda i: op.truncdiv(A[i], B[i]), name="tdiv"),
            te.compute((64,), lambda i: op.truncmod(A[i], B[i]), name="tmod"),
            te.compute((64,), lambda i: A[i] // 4 + A[i] % 4, name="const_divisor")]
    want = [a // b, a % b, np.trunc(a / b).astype(dtype), np.fmod(a, b), a // 4 + a % 4]
    check([A, B], outs, [a, b], want)


CASTS = [("float32", "int32"), ("float64", "float32"), ("float32", "float64"),
         ("int32", "int8"), ("int8", "float32"), ("int8", "int32"), ("int32", "float64"),
         ("uint8", "int32"), ("float32", "uint8"), ("int32", "bool"), ("bool", "int32"),
         ("float64", "int8")]


@pytest.mark.parametrize("src,dst", CASTS)
def test_cast(src, dst):
    if src == "bool":
        a = rand((40,), "int32", 0, 1).astype(bool)
    elif dst in ("uint8", "int8") and np.dtype(src).kind == "f":
        a = rand((40,), src, -100 if dst == "int8" else 0, 100)  # in range: C leaves others undefined
    else:
        a = rand((40,), src, -300, 300)
    A = te.placeholder((40,), src, "A")
    want = a.astype(dst) if dst != "bool" else a != 0
    check([A], [topi.cast(A, dst)], [a], want, dtype=dst)


BROADCAST_SHAPES = [((4, 1, 3), (5, 1)), ((3,), (2, 3)), ((2, 1), (1, 6)), ((1,), (4, 4))]
BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply,
          "divide": np.divide, "maximum": np.maximum, "minimum": np.minimum}


@pytest.mark.parametrize("sa,sb", BROADCAST_SHAPES)
@pytest.mark.parametrize("name", sorted(BINARY))
def test_broadcast_binary(name, sa, sb):
    a, b = rand(sa), rand(sb, low=0.5, high=2.0)
    A, B = te.placeholder(sa, name="A"), te.placeholder(sb, name="B")
    check([A, B], [getattr(topi, name)(A, B)], [a, b], BINARY[name](a, b))


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_broadcast_with_scalars_and_power(dtype):
    a, b = rand((3, 4), dtype, 1, 5), rand((4,), dtype, 1, 3)
    A, B = te.placeholder((3, 4), dtype, "A"), te.placeholder((4,), dtype, "B")
    outs = [topi.add(A, 2), topi.multiply(3, B), topi.power(A, B), topi.subtract(B, A)]
    want = [a + 2, 3 * b, np.power(a.astype("float64"), b), b - a]
    check([A, B], outs, [a, b], want, dtype="float32" if dtype == "int32" else dtype)


def test_integer_divide_mod_floor_variants():
    a, b = rand((5, 6), "int32", -50, 50), rand((6,), "int32", 1, 7) * np.array([1, -1] * 3,
                                                                                "int32")
    A, B = te.placeholder((5, 6), "int32", "A"), te.placeholder((6,), "int32", "B")
    outs = [topi.divide(A, B), topi.mod(A, B), topi.floor_divide(A, B), topi.floor_mod(A, B)]
    want = [np.trunc(a / b).astype("int32"), np.fmod(a, b), a // b, a % b]
    check([A, B], outs, [a, b], want)


def test_where_and_comparisons():
    c, x, y = rand((4, 5)), rand((4, 5)), rand((5,))
    C, X, Y = te.placeholder((4, 5), name="C"), te.placeholder((4, 5), name="X"), \
        te.placeholder((5,), name="Y")
    gt = topi.greater(C, 0.0)
    outs = [gt, topi.where(gt, X, Y), topi.less_equal(X, Y), topi.where(gt, X, 0.0)]
    want = [c > 0, np.where(c > 0, x, y), x <= y, np.where(c > 0, x, 0.0)]
    check([C, X, Y], outs, [c, x, y], want)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
@pytest.mark.parametrize("axis,keepdims", [(None, False), (None, True), (1, False),
                                           ((0, 2), True), (-1, True)])
def test_reductions(dtype, axis, keepdims):
    shape = (3, 5, 7)
    a = rand(shape, dtype, -10, 10)
    A = te.placeholder(shape, dtype, "A")
    outs = [topi.sum(A, axis, keepdims), topi.max(A, axis, keepdims), topi.min(A, axis, keepdims),
            topi.prod(topi.cast(topi.clip(A, 1, 2), dtype), axis, keepdims)]
    want = [a.sum(axis=axis, keepdims=keepdims), a.max(axis=axis, keepdims=keepdims),
            a.min(axis=axis, keepdims=keepdims),
            np.clip(a, 1, 2).prod(axis=axis, keepdims=keepdims)]
    if dtype != "int32":
        outs.append(topi.mean(A, axis, keepdims))
        want.append(a.mean(axis=axis, keepdims=keepdims))
    check([A], outs, [a], want, dtype=dtype, rtol=1e-5 if dtype == "float32" else 1e-12,
          atol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_argmax_argmin(dtype, axis):
    a = rand((4, 6, 5), dtype, -3, 3)  # small range: ties, where the first index must win
    A = te.placeholder((4, 6, 5), dtype, "A")
    outs = [topi.argmax(A, axis), topi.argmin(A, axis)]
    want = [np.argmax(a, axis=axis), np.argmin(a, axis=axis)]
    check([A], outs, [a], want)


def test_argmax_keepdims():
    a = rand((3, 8))
    A = te.placeholder((3, 8), name="A")
    check([A], [topi.argmax(A, 1, keepdims=True)], [a], np.argmax(a, 1, keepdims=True))


def test_transpose_reshape_expand_squeeze():
    a = rand((2, 3, 4), "int32", -50, 50)
    A = te.placeholder((2, 3, 4), "int32", "A")
    outs = [topi.transpose(A, (2, 0, 1)), topi.transpose(A), topi.reshape(A, (4, -1)),
            topi.reshape(topi.transpose(A, (1, 0, 2)), (3, 8)),
            topi.squeeze(topi.expand_dims(A, 1)), topi.expand_dims(A, -1, 2)]
    want = [a.transpose(2, 0, 1), a.T, a.reshape(4, -1), a.transpose(1, 0, 2).reshape(3, 8), a,
            a[..., None, None]]
    check([A], outs, [a], want)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenate_and_stack(axis):
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    shapes = [tuple(s if d != axis % 3 else s + k for d, s in enumerate(sh))
              for k, sh in enumerate(shapes)]
    arrays = [rand(s, "float64") for s in shapes]
    tensors = [te.placeholder(s, "float64", f"A{k}") for k, s in enumerate(shapes)]
    check(tensors, [topi.concatenate(tensors, axis)], arrays, np.concatenate(arrays, axis),
          dtype="float64")
    same = [te.placeholder((2, 3), "float64", f"S{k}") for k in range(3)]
    vals = [rand((2, 3), "float64") for _ in range(3)]
    check(same, [topi.stack(same, axis=0)], vals, np.stack(vals, 0), dtype="float64")


SLICES = [((1, 0), (3, 5), (1, 2)), ((-1, 0), (-4, 6), (-1, 1)), ((0, 1), (100, -1), (2, 3)),
          ((3, -2), (0, -7), (-2, -1))]


@pytest.mark.parametrize("begin,end,strides", SLICES)
def test_strided_slice(begin, end, strides):
    a = rand((5, 6), "int8", -100, 100)
    A = te.placeholder((5, 6), "int8", "A")
    want = a[slice(begin[0], end[0], strides[0]), slice(begin[1], end[1], strides[1])]
    check([A], [topi.strided_slice(A, begin, end, strides)], [a], want)


def test_strided_slice_axes_and_size_mode():
    a = rand((4, 5, 6))
    A = te.placeholder((4, 5, 6), name="A")
    outs = [topi.strided_slice(A, [1], [4], axes=[2]),
            topi.strided_slice(A, [1, 2], [2, -1], slice_mode="size")]
    check([A], outs, [a], [a[:, :, 1:4], a[1:3, 2:]])


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_take(mode):
    a = rand((5, 4))
    idx = np.array([[0, 4, -1], [7, 2, -6]], "int32")
    A, I = te.placeholder((5, 4), name="A"), te.placeholder((2, 3), "int32", "I")
    outs = [topi.take(A, I, axis=0, mode=mode), topi.take(A, I, axis=1, mode=mode),
            topi.take(A, I, mode=mode), topi.take(A, 2, axis=1)]
    want = [np.take(a, idx, 0, mode=mode), np.take(a, idx, 1, mode=mode),
            np.take(a, idx, mode=mode), a[:, 2]]
    check([A, I], outs, [a, idx], want)


def test_activations_and_unary_wrappers():
    a = rand((6, 7), low=-4, high=4)
    A = te.placeholder((6, 7), name="A")
    outs = [topi.nn.relu(A), topi.nn.gelu(A), topi.nn.gelu(A, "tanh"), topi.sigmoid(A),
            topi.tanh(A), topi.nn.leaky_relu(A, 0.1), topi.clip(A, -1, 1), topi.sign(A),
            topi.negative(A), topi.exp(A), topi.erf(A), topi.nn.silu(A)]
    tanh_gelu = 0.5 * a * (1 + np.tanh(math.sqrt(2 / math.pi) * (a + 0.044715 * a ** 3)))
    want = [np.maximum(a, 0), 0.5 * a * (1 + erf(a / math.sqrt(2))), tanh_gelu, _sigmoid(a),
            np.tanh(a), np.where(a > 0, a, 0.1 * a), np.clip(a, -1, 1), np.sign(a), -a,
            np.exp(a), erf(a), a * _sigmoid(a)]
    check([A], outs, [a], want, rtol=1e-5, atol=1e-6)


def test_pad_with_value():
    a = rand((3, 4), "int32", -9, 9)
    A = te.placeholder((3, 4), "int32", "A")
    outs = [topi.nn.pad(A, (1, 2), (2, 0), pad_value=-5), topi.nn.pad(A, (0, 3))]
    want = [np.pad(a, ((1, 2), (2, 0)), constant_values=-5), np.pad(a, ((0, 0), (3, 3)))]
    check([A], outs, [a], want)


def test_symbolic_leading_dimension():
    """One kernel, several batch sizes: broadcast, reductions, argmax and softmax over (n, 6)."""
    n = te.var("n")
    A, B = te.placeholder((n, 6), name="A"), te.placeholder((6,), name="B")
    S = topi.sum(topi.add(A, B), axis=1)
    outs = [topi.exp(topi.multiply(S, 0.1)), topi.argmax(A, axis=0), topi.nn.softmax(A),
            topi.transpose(A)]
    f = build([A, B], outs)
    for rows in (1, 5, 17):
        a, b = rand((rows, 6)), rand((6,))
        res = [wb.nd.empty((rows,), "float32"), wb.nd.empty((6,), "int32"),
               wb.nd.empty((rows, 6), "float32"), wb.nd.empty((6, rows), "float32")]
        f(wb.nd.array(a), wb.nd.array(b), *res)
        np.testing.assert_allclose(res[0].numpy(), np.exp((a + b).sum(1) * 0.1), rtol=1e-5)
        np.testing.assert_array_equal(res[1].numpy(), a.argmax(0))
        e = np.exp(a - a.max(1, keepdims=True))
        np.testing.assert_allclose(res[2].numpy(), e / e.sum(1, keepdims=True), rtol=1e-5)
        np.testing.assert_array_equal(res[3].numpy(), a.T)
