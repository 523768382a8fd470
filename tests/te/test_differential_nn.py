"""Differential tests of the nn operators (topi.nn) and of hand schedules, against numpy."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import te, topi
from workbench.tir.functor import IRVisitor
from workbench.tir.schedule import Schedule

import nn_reference as ref
from diff_helpers import check, rand


@pytest.mark.parametrize("ta,tb", [(False, False), (False, True), (True, False), (True, True)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_transpose_flags(ta, tb, dtype):
    m, k, n = 7, 13, 9
    a, b = rand((k, m) if ta else (m, k), dtype), rand((n, k) if tb else (k, n), dtype)
    A, B = te.placeholder(a.shape, dtype, "A"), te.placeholder(b.shape, dtype, "B")
    C = topi.nn.matmul(A, B, transpose_a=ta, transpose_b=tb)
    assert C.op.name == "T_matmul_" + ("T" if ta else "N") + ("T" if tb else "N")
    check([A, B], [C], [a, b], (a.T if ta else a) @ (b.T if tb else b), dtype=dtype,
          rtol=1e-5 if dtype == "float32" else 1e-12)


def test_matmul_int8_accumulates_in_int32():
    a, b = rand((6, 40), "int8", -128, 127), rand((40, 5), "int8", -128, 127)
    A, B = te.placeholder(a.shape, "int8", "A"), te.placeholder(b.shape, "int8", "B")
    C = topi.nn.matmul(A, B, out_dtype="int32")
    check([A, B], [C], [a, b], a.astype("int32") @ b.astype("int32"))


def test_dense_with_bias():
    x, w, bias = rand((4, 10)), rand((6, 10)), rand((6,))
    X, W, Bb = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W"), \
        te.placeholder(bias.shape, name="bias")
    check([X, W, Bb], [topi.nn.dense(X, W, Bb)], [x, w, bias], x @ w.T + bias, rtol=1e-5)


@pytest.mark.parametrize("ta,tb", [(False, True), (False, False), (True, False)])
@pytest.mark.parametrize("batches", [(3, 3), (1, 3), (3, 1)])
def test_batch_matmul(ta, tb, batches):
    m, k, n = 5, 8, 6
    ba, bb = batches
    a = rand((ba, k, m) if ta else (ba, m, k))
    b = rand((bb, n, k) if tb else (bb, k, n))
    A, B = te.placeholder(a.shape, name="A"), te.placeholder(b.shape, name="B")
    C = topi.nn.batch_matmul(A, B, transpose_a=ta, transpose_b=tb)
    want = np.matmul(a.transpose(0, 2, 1) if ta else a, b.transpose(0, 2, 1) if tb else b)
    check([A, B], [C], [a, b], want, rtol=1e-5)


CONV_CASES = [  # (stride, padding, dilation) and the equivalent (top, left, bottom, right)
    ((1, 1), 0, (1, 1), (0, 0, 0, 0)),
    ((1, 1), 1, (1, 1), (1, 1, 1, 1)),
    ((2, 2), (1, 2), (1, 1), (1, 2, 1, 2)),
    ((1, 2), (0, 1, 2, 1), (2, 1), (0, 1, 2, 1)),
    ((2, 1), "SAME", (1, 1), (1, 1, 1, 1)),
]


@pytest.mark.parametrize("stride,padding,dilation,pad4", CONV_CASES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_conv2d_nchw(stride, padding, dilation, pad4, dtype):
    x, w = rand((2, 3, 9, 8), dtype), rand((4, 3, 3, 3), dtype)
    X, W = te.placeholder(x.shape, dtype, "X"), te.placeholder(w.shape, dtype, "W")
    Y = topi.nn.conv2d_nchw(X, W, stride, padding, dilation)
    assert [t.op.name for t in Y.op.input_tensors] == ["pad_temp", "W"]
    check([X, W], [Y], [x, w], ref.conv2d_nchw(x, w, stride, pad4, dilation), dtype=dtype,
          rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("stride,padding,dilation,pad4", CONV_CASES)
def test_conv2d_nhwc(stride, padding, dilation, pad4):
    x, w = rand((1, 9, 8, 3)), rand((3, 3, 3, 5))
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    Y = topi.nn.conv2d_nhwc(X, W, stride, padding, dilation)
    check([X, W], [Y], [x, w], ref.conv2d_nhwc(x, w, stride, pad4, dilation), rtol=1e-5,
          atol=1e-5)


def test_conv2d_int8_and_groups():
    x, w = rand((1, 4, 7, 7), "int8", -20, 20), rand((6, 2, 3, 3), "int8", -20, 20)
    X, W = te.placeholder(x.shape, "int8", "X"), te.placeholder(w.shape, "int8", "W")
    Y = topi.nn.group_conv2d_nchw(X, W, 1, 1, 1, groups=2, out_dtype="int32")
    want = ref.conv2d_nchw(x, w, (1, 1), (1, 1, 1, 1), (1, 1), groups=2)
    check([X, W], [Y], [x, w], want.astype("int32"))
    xh, wh = rand((1, 6, 6, 4)), rand((3, 3, 2, 4))
    Xh, Wh = te.placeholder(xh.shape, name="Xh"), te.placeholder(wh.shape, name="Wh")
    Yh = topi.nn.conv2d(Xh, Wh, 1, 1, 1, data_layout="NHWC", groups=2)
    check([Xh, Wh], [Yh], [xh, wh], ref.conv2d_nhwc(xh, wh, (1, 1), (1, 1, 1, 1), (1, 1), 2),
          rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("multiplier", [1, 2])
@pytest.mark.parametrize("stride,padding,dilation,pad4", CONV_CASES[1:4])
def test_depthwise_conv2d(multiplier, stride, padding, dilation, pad4):
    x, w = rand((1, 3, 8, 9)), rand((3, multiplier, 3, 3))
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    Y = topi.nn.depthwise_conv2d_nchw(X, W, stride, padding, dilation)
    check([X, W], [Y], [x, w], ref.depthwise_nchw(x, w, stride, pad4, dilation), rtol=1e-5,
          atol=1e-5)
    xh, wh = x.transpose(0, 2, 3, 1).copy(), w.transpose(2, 3, 0, 1).copy()
    Xh, Wh = te.placeholder(xh.shape, name="Xh"), te.placeholder(wh.shape, name="Wh")
    Yh = topi.nn.depthwise_conv2d_nhwc(Xh, Wh, stride, padding, dilation)
    check([Xh, Wh], [Yh], [xh, wh], ref.depthwise_nhwc(xh, wh, stride, pad4, dilation),
          rtol=1e-5, atol=1e-5)


POOL_CASES = [  # kernel, stride, dilation, padding, ceil_mode, count_include_pad
    ((2, 2), (2, 2), (1, 1), (0, 0, 0, 0), False, True),
    ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), False, True),
    ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), False, False),
    ((3, 2), (2, 2), (1, 1), (1, 0, 0, 1), True, True),
    ((3, 3), (2, 2), (1, 1), (0, 1, 1, 0), True, False),
    ((2, 2), (1, 1), (2, 2), (1, 1, 1, 1), False, True),
]


@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("kernel,stride,dilation,padding,ceil_mode,cip", POOL_CASES)
def test_pool2d(pool_type, kernel, stride, dilation, padding, ceil_mode, cip):
    x = rand((2, 3, 9, 8))
    X = te.placeholder(x.shape, name="X")
    Y = topi.nn.pool2d(X, kernel, stride, dilation, padding, pool_type, ceil_mode,
                       count_include_pad=cip)
    want = ref.pool2d_nchw(x, kernel, stride, dilation, padding, pool_type, ceil_mode, cip)
    check([X], [Y], [x], want, rtol=1e-5, atol=1e-6)


def test_pool2d_nhwc_and_int():
    x = rand((1, 7, 6, 4), "int32", -50, 50)
    X = te.placeholder(x.shape, "int32", "X")
    Y = topi.nn.pool2d(X, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max", layout="NHWC")
    want = ref.pool2d_nchw(x.transpose(0, 3, 1, 2), (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max")
    check([X], [Y], [x], want.transpose(0, 2, 3, 1).astype("int32"))


@pytest.mark.parametrize("out_size", [(1, 1), (3, 2), (4, 5), (7, 7)])
def test_adaptive_pool(out_size):
    x = rand((2, 3, 7, 9))
    X = te.placeholder(x.shape, name="X")
    outs = [topi.nn.adaptive_avg_pool2d(X, out_size), topi.nn.adaptive_pool(X, out_size, "max")]
    want = [ref.adaptive_pool_nchw(x, out_size, "avg"), ref.adaptive_pool_nchw(x, out_size, "max")]
    check([X], outs, [x], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_softmax_and_log_softmax(axis, dtype):
    x = rand((4, 6, 5), dtype, -10, 10)
    X = te.placeholder(x.shape, dtype, "X")
    Y = topi.nn.softmax(X, axis)
    stages = [Y.op.input_tensors[0].op.name, Y.op.input_tensors[1].op.name]
    assert Y.op.name == "T_softmax_norm" and stages == ["T_softmax_exp", "T_softmax_expsum"]
    check([X], [Y, topi.nn.log_softmax(X, axis)], [x],
          [ref.softmax(x, axis), ref.log_softmax(x, axis)], dtype=dtype,
          rtol=1e-5 if dtype == "float32" else 1e-12, atol=1e-6 if dtype == "float32" else 1e-14)


def test_softmax_large_values_do_not_overflow():
    x = rand((3, 50), low=80, high=100)  # exp(100) overflows float32 without the max shift
    X = te.placeholder(x.shape, name="X")
    check([X], [topi.nn.softmax(X)], [x], ref.softmax(x.astype("float64"), -1), rtol=1e-5)


@pytest.mark.parametrize("axes", [(-1,), (1, 2)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(axes, affine):
    x = rand((3, 4, 16), low=-3, high=3)
    norm_shape = tuple(x.shape[a] for a in axes)
    g, b = rand(norm_shape), rand(norm_shape)
    X = te.placeholder(x.shape, name="X")
    G = te.placeholder(norm_shape, name="gamma") if affine else None
    B = te.placeholder(norm_shape, name="beta") if affine else None
    Y = topi.nn.layer_norm(X, G, B, list(axes), epsilon=1e-5)
    ins = [X] + ([G, B] if affine else [])
    arrays = [x] + ([g, b] if affine else [])
    # E[x^2] - mean^2 in float32 (TVM's one-pass form) loses a few bits: looser tolerance.
    check(ins, [Y], arrays, ref.layer_norm(x, g if affine else None, b if affine else None,
                                           axes, 1e-5), rtol=1e-4, atol=1e-4)


def test_small_network_pipeline():
    """conv -> relu -> pool -> flatten -> dense -> softmax, as one PrimFunc."""
    x, w, fw = rand((1, 2, 8, 8)), rand((4, 2, 3, 3)), rand((10, 4 * 4 * 4))
    X, W, FW = (te.placeholder(a.shape, name=n) for a, n in ((x, "X"), (w, "W"), (fw, "FW")))
    h = topi.nn.relu(topi.nn.conv2d_nchw(X, W, 1, 1, 1))
    h = topi.nn.pool2d(h, (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), "max")
    y = topi.nn.softmax(topi.nn.dense(topi.nn.flatten(h), FW))
    hr = np.maximum(ref.conv2d_nchw(x, w, (1, 1), (1, 1, 1, 1), (1, 1)), 0)
    hr = ref.pool2d_nchw(hr, (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), "max")
    want = ref.softmax(hr.reshape(1, -1) @ fw.T, -1)
    check([X, W, FW], [y], [x, w, fw], want, rtol=1e-4, atol=1e-6)


# ---- hand schedules: parallel + vectorized code gives the serial results ----------------------

def _run_func(func, arrays, out_shapes_dtypes):
    f = wb.build(func)["main"]
    outs = [wb.nd.array(np.full(s, 7, d)) for s, d in out_shapes_dtypes]
    f(*[wb.nd.array(a) for a in arrays], *outs)
    return [o.numpy() for o in outs]


def _kinds(func) -> set[str]:
    kinds = set()

    class V(IRVisitor):
        def visit_For(self, loop):
            kinds.add(str(loop.kind))
            self.generic_visit(loop)
    V().visit(func.body)
    return kinds


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_scheduled_matmul_matches_serial(dtype):
    m, k, n = 24, 20, 40
    A, B = te.placeholder((m, k), dtype, "A"), te.placeholder((k, n), dtype, "B")
    C = topi.nn.matmul(A, B)
    func = te.create_prim_func([A, B, C])
    sch = Schedule(func)
    blk = sch.get_block(C.op.name)
    i, j, kk = sch.get_loops(blk)
    jo, ji = sch.split(j, [None, 8])
    io, ii = sch.split(i, [None, 4])
    sch.reorder(io, jo, ii, kk, ji)
    sch.parallel(io)
    sch.vectorize(ji)
    scheduled = sch.mod["main"]
    assert {"parallel", "vectorized"} <= {s.lower().split(".")[-1] for s in _kinds(scheduled)}
    a, b = rand((m, k), dtype, -5, 5), rand((k, n), dtype, -5, 5)
    serial = _run_func(func, [a, b], [((m, n), dtype)])[0]
    fast = _run_func(scheduled, [a, b], [((m, n), dtype)])[0]
    np.testing.assert_allclose(fast, serial, rtol=1e-6)
    np.testing.assert_allclose(fast, a.astype("float64") @ b, rtol=1e-5, atol=1e-5)


def test_scheduled_elementwise_with_tail_matches_serial():
    n = 1000  # not a multiple of the split factors: predicated tail iterations
    A = te.placeholder((n,), name="A")
    B = topi.sigmoid(topi.multiply(topi.exp(A), 0.5))
    func = te.create_prim_func([A, B])
    sch = Schedule(func)
    for name in ("T_exp", "T_multiply", "T_sigmoid"):
        (loop,) = sch.get_loops(sch.get_block(name))
        outer, inner = sch.split(loop, [None, 16])
        sch.parallel(outer)
        if name != "T_multiply":
            sch.vectorize(inner)
    a = rand((n,))
    serial = _run_func(func, [a], [((n,), "float32")])[0]
    fast = _run_func(sch.mod["main"], [a], [((n,), "float32")])[0]
    np.testing.assert_allclose(fast, serial, rtol=1e-6)


def test_scheduled_softmax_rows_in_parallel():
    rows, cols = 37, 64
    X = te.placeholder((rows, cols), name="X")
    Y = topi.nn.softmax(X)
    func = te.create_prim_func([X, Y])
    sch = Schedule(func)
    for name in ("T_softmax_maxelem", "T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"):
        loops = sch.get_loops(sch.get_block(name))
        sch.parallel(loops[0])
        if name in ("T_softmax_exp", "T_softmax_norm"):
            sch.vectorize(loops[1])
    x = rand((rows, cols), low=-5, high=5)
    serial = _run_func(func, [x], [((rows, cols), "float32")])[0]
    fast = _run_func(sch.mod["main"], [x], [((rows, cols), "float32")])[0]
    np.testing.assert_allclose(fast, serial, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(fast, ref.softmax(x.astype("float64"), -1), rtol=1e-5)


def test_hand_written_tir_parallel_vectorized_conv_rows():
    """A conv2d whose output rows run in parallel and output columns in SIMD lanes."""
    x, w = rand((1, 4, 10, 16)), rand((8, 4, 3, 3))
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    Y = topi.nn.conv2d_nchw(X, W, 1, 1, 1)
    func = te.create_prim_func([X, W, Y])
    sch = Schedule(func)
    nn_, ff, yy, xx, rc, ry, rx = sch.get_loops(sch.get_block("conv2d_nchw"))
    sch.reorder(nn_, ff, yy, rc, ry, rx, xx)
    sch.parallel(ff)
    sch.vectorize(xx)
    (pn, pc, ph, pw) = sch.get_loops(sch.get_block("pad_temp"))
    sch.parallel(pc)
    got = _run_func(sch.mod["main"], [x, w], [((1, 8, 10, 16), "float32")])[0]
    want = ref.conv2d_nchw(x, w, (1, 1), (1, 1, 1, 1), (1, 1))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
