"""The nine te/topi workloads of the schedule property tests, with numpy references.

Small shapes with composite extents (so tiles and non-dividing splits both occur); the output is
the last parameter of each PrimFunc.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from workbench import te, topi

# ---- workloads --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    name: str
    build: Callable[[], Any]                 # -> PrimFunc (output is the last parameter)
    inputs: Callable[[np.random.Generator], list[np.ndarray]]
    reference: Callable[..., np.ndarray]
    tol: float = 1e-5


def _rand(*shape):
    return lambda rng: rng.standard_normal(shape).astype("float32")


def _inputs(*makers):
    return lambda rng: [m(rng) for m in makers]


def _matmul():
    a, b = te.placeholder((8, 12), name="A"), te.placeholder((12, 10), name="B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def _batch_matmul():
    a, b = te.placeholder((2, 6, 8), name="A"), te.placeholder((2, 4, 8), name="B")
    return te.create_prim_func([a, b, topi.nn.batch_matmul(a, b)])


def _conv_nhwc():
    x, w = te.placeholder((1, 6, 5, 3), name="X"), te.placeholder((3, 3, 3, 4), name="W")
    return te.create_prim_func([x, w, topi.nn.conv2d_nhwc(x, w, 1, 1, 1)])


def _conv_nchw():
    x, w = te.placeholder((1, 3, 5, 6), name="X"), te.placeholder((4, 3, 3, 3), name="W")
    return te.create_prim_func([x, w, topi.nn.conv2d_nchw(x, w, 1, 1, 1)])


def _depthwise():
    x, w = te.placeholder((1, 4, 6, 5), name="X"), te.placeholder((4, 1, 3, 3), name="W")
    return te.create_prim_func([x, w, topi.nn.depthwise_conv2d_nchw(x, w, 1, 1, 1)])


def _softmax():
    x = te.placeholder((4, 6), name="X")
    return te.create_prim_func([x, topi.nn.softmax(x)])


def _layer_norm():
    x, g, b = (te.placeholder((4, 6), name="X"), te.placeholder((6,), name="g"),
               te.placeholder((6,), name="b"))
    return te.create_prim_func([x, g, b, topi.nn.layer_norm(x, g, b, axis=[1])])


def _row_sum():
    x = te.placeholder((4, 6, 5), name="X")
    return te.create_prim_func([x, topi.sum(x, axis=1)])


def _elementwise():
    x, y, z = (te.placeholder((4, 6), name="X"), te.placeholder((6,), name="Y"),
               te.placeholder((4, 1), name="Z"))
    d = topi.nn.relu(topi.add(topi.multiply(x, 2.0), y))
    return te.create_prim_func([x, y, z, topi.subtract(d, z)])


def _pad(x, axes, p=1):
    width = [(p, p) if d in axes else (0, 0) for d in range(x.ndim)]
    return np.pad(x, width)


def conv2d_nhwc_ref(x, w):
    xp = _pad(x, (1, 2))
    n, h, wd, _ = x.shape
    kh, kw, _, o = w.shape
    out = np.zeros((n, h, wd, o), "float64")
    for ry in range(kh):
        for rx in range(kw):
            out += np.einsum("nhwc,co->nhwo", xp[:, ry:ry + h, rx:rx + wd, :], w[ry, rx])
    return out


def conv2d_nchw_ref(x, w):
    xp = _pad(x, (2, 3))
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    out = np.zeros((n, o, h, wd), "float64")
    for ry in range(kh):
        for rx in range(kw):
            out += np.einsum("nchw,oc->nohw", xp[:, :, ry:ry + h, rx:rx + wd], w[:, :, ry, rx])
    return out


def depthwise_nchw_ref(x, w):
    xp = _pad(x, (2, 3))
    n, c, h, wd = x.shape
    out = np.zeros((n, c, h, wd), "float64")
    for ry in range(w.shape[2]):
        for rx in range(w.shape[3]):
            out += xp[:, :, ry:ry + h, rx:rx + wd] * w[:, 0, ry, rx][None, :, None, None]
    return out


def softmax_ref(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def layer_norm_ref(x, g, b):
    x = x.astype("float64")
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + 1e-5) * g + b


WORKLOADS: dict[str, Workload] = {w.name: w for w in [
    Workload("matmul", _matmul, _inputs(_rand(8, 12), _rand(12, 10)), lambda a, b: a @ b),
    Workload("batch_matmul", _batch_matmul, _inputs(_rand(2, 6, 8), _rand(2, 4, 8)),
             lambda a, b: a @ b.transpose(0, 2, 1)),
    Workload("conv2d_nhwc", _conv_nhwc, _inputs(_rand(1, 6, 5, 3), _rand(3, 3, 3, 4)),
             conv2d_nhwc_ref, 1e-4),
    Workload("conv2d_nchw", _conv_nchw, _inputs(_rand(1, 3, 5, 6), _rand(4, 3, 3, 3)),
             conv2d_nchw_ref, 1e-4),
    Workload("depthwise_nchw", _depthwise, _inputs(_rand(1, 4, 6, 5), _rand(4, 1, 3, 3)),
             depthwise_nchw_ref, 1e-4),
    Workload("softmax", _softmax, _inputs(_rand(4, 6)), softmax_ref),
    Workload("layer_norm", _layer_norm, _inputs(_rand(4, 6), _rand(6), _rand(6)),
             layer_norm_ref, 1e-4),
    Workload("row_sum", _row_sum, _inputs(_rand(4, 6, 5)), lambda x: x.sum(axis=1), 1e-5),
    Workload("elementwise", _elementwise, _inputs(_rand(4, 6), _rand(6), _rand(4, 1)),
             lambda x, y, z: np.maximum(x * 2 + y, 0) - z),
]}
