"""topi's convolutions, pools, batch norm and flatten with a symbolic batch dimension: one
compiled kernel runs at several batch sizes and matches numpy; a symbolic spatial or channel
dimension is refused with an error naming it."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import te, tir, topi
from workbench.topi.nn.relax_extras import batch_norm_inference

import nn_reference as ref
from diff_helpers import rand

BATCHES = (1, 3)


def _run_batches(inputs, output, make_arrays, reference, rtol=1e-5, atol=1e-5):
    """Compile ``inputs -> output`` once; for each batch size run it and compare."""
    f = wb.build(te.create_prim_func(list(inputs) + [output]), target="llvm")["main"]
    for n in BATCHES:
        arrays = make_arrays(n)
        want = reference(*arrays)
        out = wb.nd.array(np.full(want.shape, 77, dtype=output.dtype))
        f(*[wb.nd.array(np.ascontiguousarray(a)) for a in arrays], out)
        np.testing.assert_allclose(out.numpy(), want, rtol=rtol, atol=atol)


def _n():
    return tir.SizeVar("n", "int64")


@pytest.mark.parametrize("groups", [1, 2])
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv2d_symbolic_batch(layout, groups):
    n = _n()
    c, o, h, w = 4, 6, 7, 6
    stride, pad, dil = (2, 1), (1, 0, 2, 1), (1, 1)
    if layout == "NCHW":
        X = te.placeholder((n, c, h, w), name="X")
        W = te.placeholder((o, c // groups, 3, 3), name="W")
        wshape = (o, c // groups, 3, 3)
    else:
        X = te.placeholder((n, h, w, c), name="X")
        W = te.placeholder((3, 3, c // groups, o), name="W")
        wshape = (3, 3, c // groups, o)
    Y = topi.nn.conv2d(X, W, stride, pad, dil, data_layout=layout, groups=groups)
    assert Y.shape[0] is n
    refn = ref.conv2d_nchw if layout == "NCHW" else ref.conv2d_nhwc
    xshape = (c, h, w) if layout == "NCHW" else (h, w, c)
    weight = rand(wshape)
    _run_batches([X, W], Y, lambda b: (rand((b, *xshape)), weight),
                 lambda x, wt: refn(x, wt, stride, pad, dil, groups))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_depthwise_conv2d_symbolic_batch(layout):
    n = _n()
    c, m, h, w = 3, 2, 6, 5
    if layout == "NCHW":
        X, W = te.placeholder((n, c, h, w), name="X"), te.placeholder((c, m, 3, 3), name="W")
        Y = topi.nn.depthwise_conv2d_nchw(X, W, 1, 1, 1)
        xshape, weight, refn = (c, h, w), rand((c, m, 3, 3)), ref.depthwise_nchw
    else:
        X, W = te.placeholder((n, h, w, c), name="X"), te.placeholder((3, 3, c, m), name="W")
        Y = topi.nn.depthwise_conv2d_nhwc(X, W, 1, 1, 1)
        xshape, weight, refn = (h, w, c), rand((3, 3, c, m)), ref.depthwise_nhwc
    _run_batches([X, W], Y, lambda b: (rand((b, *xshape)), weight),
                 lambda x, wt: refn(x, wt, (1, 1), (1, 1, 1, 1), (1, 1)))


@pytest.mark.parametrize("pool_type", ["max", "avg"])
def test_pool2d_symbolic_batch(pool_type):
    n = _n()
    X = te.placeholder((n, 3, 7, 6), name="X")
    Y = topi.nn.pool2d(X, (3, 2), (2, 2), (1, 1), (1, 0, 1, 1), pool_type,
                       count_include_pad=False)
    _run_batches([X], Y, lambda b: (rand((b, 3, 7, 6)),),
                 lambda x: ref.pool2d_nchw(x, (3, 2), (2, 2), (1, 1), (1, 0, 1, 1), pool_type,
                                           count_include_pad=False))


def test_pool2d_nhwc_symbolic_batch():
    n = _n()
    X = te.placeholder((n, 6, 6, 2), name="X")
    Y = topi.nn.pool2d(X, (2, 2), (2, 2), (1, 1), 0, "max", layout="NHWC")
    _run_batches([X], Y, lambda b: (rand((b, 6, 6, 2)),),
                 lambda x: ref.pool2d_nchw(x.transpose(0, 3, 1, 2), (2, 2), (2, 2), (1, 1),
                                           (0, 0, 0, 0), "max").transpose(0, 2, 3, 1))


def test_adaptive_avg_pool2d_symbolic_batch():
    n = _n()
    X = te.placeholder((n, 2, 7, 5), name="X")
    Y = topi.nn.adaptive_avg_pool2d(X, (3, 2))
    _run_batches([X], Y, lambda b: (rand((b, 2, 7, 5)),),
                 lambda x: ref.adaptive_pool_nchw(x, (3, 2), "avg"))


def test_batch_norm_and_flatten_symbolic_batch():
    n = _n()
    X = te.placeholder((n, 3, 2, 2), name="X")
    stats = [te.placeholder((3,), name=s) for s in ("g", "b", "mean", "var")]
    Y = topi.nn.flatten(batch_norm_inference(X, *stats, axis=1, epsilon=1e-5))
    g, b, mean = rand((3,)), rand((3,)), rand((3,))
    var = np.abs(rand((3,))) + 0.5

    def reference(x, g, b, mean, var):
        s = (slice(None), None, None)
        y = (x - mean[s]) / np.sqrt(var[s] + 1e-5) * g[s] + b[s]
        return y.reshape(x.shape[0], -1)
    _run_batches([X, *stats], Y, lambda k: (rand((k, 3, 2, 2)), g, b, mean, var), reference)


def test_symbolic_spatial_or_channel_dims_are_refused():
    n, h = _n(), tir.SizeVar("h", "int64")
    W = te.placeholder((4, 3, 3, 3), name="W")
    with pytest.raises(ValueError, match=r"conv2d_nchw: data: dimension 'H' of the NCHW shape "
                                         r"\(n, 3, h, 8\) is symbolic \(h\); only 'N' may be"):
        topi.nn.conv2d(te.placeholder((n, 3, h, 8), name="X"), W, 1, 1, 1)
    with pytest.raises(ValueError, match=r"dimension 'C' .* is symbolic"):
        topi.nn.conv2d(te.placeholder((n, h, 8, 8), name="X"), W, 1, 1, 1)
    with pytest.raises(ValueError, match=r"depthwise_conv2d_nhwc: data: dimension 'W'"):
        topi.nn.depthwise_conv2d_nhwc(te.placeholder((n, 8, h, 3), name="X"),
                                      te.placeholder((3, 3, 3, 1), name="W"), 1, 1, 1)
    with pytest.raises(ValueError, match=r"pool2d\(max\): data: dimension 'W'"):
        topi.nn.pool2d(te.placeholder((n, 3, 8, h), name="X"), 2, 2, 1, 0, "max")
    with pytest.raises(ValueError, match=r"adaptive_pool\(avg\): data: dimension 'H'"):
        topi.nn.adaptive_avg_pool2d(te.placeholder((n, 3, h, 8), name="X"), 1)
    # Pools never look at the channels: a symbolic channel count is fine there.
    c = tir.SizeVar("c", "int64")
    assert topi.nn.pool2d(te.placeholder((n, c, 8, 8), name="X"), 2, 2, 1, 0, "max").shape[1] is c
