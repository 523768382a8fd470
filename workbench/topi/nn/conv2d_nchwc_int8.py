"""The uint8 x int8 -> int32 convolution on channel-blocked data, in the shape of the VNNI dot
product (TVM's ``conv2d_NCHWc_int8``; onnxruntime's QLinearConv on NCHWc in effect).

Data is ``NCHW16c`` uint8, the kernel int8 in ``OIHW4i16o4i`` (``[O/16][C/16][KH][KW][4][16][4]``:
for one input-channel block, four groups of four consecutive input channels, each a 16 x 4
tile of output channels x input channels, 64 contiguous bytes), the output ``NCHW16c`` int32::

    out[n, o, y, x, ob] = sum over (ic, ky, kx, f, s) of
        int32(pad[n, ic, y*sh + ky*dh, x*sw + kx*dw, 4f + s]) * int32(w[o, ic, ky, kx, f, ob, s])

The innermost two loops (``ob`` 16 wide, ``s`` 4 deep) are exactly one ``vpdpbusd``
(:data:`~workbench.tir.tensor_intrin.x86.VNNI_DOT_16x4_INTRIN`): four bytes of one pixel
broadcast to the 16 lanes, times the 64-byte weight tile. Padding writes ``pad_value`` (the
input's zero point, so a padded position stands for a real 0 like in the float model);
:func:`int8_weight_sums` gives the per-output-channel sums that take the zero point out again.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.nn.conv2d import _out_extent, get_pad_tuple
from workbench.topi.nn.pad import pad
from workbench.topi.utils import as_tuple, get_const_int, index_const, index_dtype, shape_str

__all__ = ["conv2d_nchwc_int8", "pack_int8_weight", "int8_weight_sums", "conv2d_nchwc_int8_numpy",
           "INT8_BLOCK", "INT8_K"]

#: Output channels of one dot product (int32 lanes of a zmm) and input channels per lane.
INT8_BLOCK, INT8_K = 16, 4


def pack_int8_weight(w: np.ndarray) -> np.ndarray:
    """An ``OIHW`` int8 weight in ``OIHW4i16o4i``, both channel counts zero-padded to multiples
    of 16."""
    if w.ndim != 4 or w.dtype != np.int8:
        raise ValueError(f"pack_int8_weight: expects a 4-d int8 OIHW weight, got {w.dtype} "
                         f"{w.shape}")
    B, K = INT8_BLOCK, INT8_K
    o, c, kh, kw = w.shape
    op_, cp = -(-o // B) * B, -(-c // B) * B
    wp = np.zeros((op_, cp, kh, kw), np.int8)
    wp[:o, :c] = w
    # [O/B, B_o, C/B, B/K, K, KH, KW] -> [O/B, C/B, KH, KW, B/K, B_o, K]
    t = wp.reshape(op_ // B, B, cp // B, B // K, K, kh, kw)
    return np.ascontiguousarray(t.transpose(0, 2, 5, 6, 3, 1, 4))


def int8_weight_sums(w: np.ndarray) -> np.ndarray:
    """``sum over (c, kh, kw) of w[o, c, kh, kw]`` per output channel, int64 (the zero-point
    correction of an input whose padding holds the zero point)."""
    return w.astype(np.int64).sum(axis=(1, 2, 3))


def conv2d_nchwc_int8(data: Tensor, kernel: Tensor, strides: Any, padding: Any,
                      dilation: Any, pad_value: int = 0) -> Tensor:
    """The convolution of the module docstring. ``padding`` is TVM's (int, 2 or 4 values)."""
    what = "conv2d_NCHWc_int8"
    B, K = INT8_BLOCK, INT8_K
    if data.dtype != "uint8" or kernel.dtype != "int8":
        raise ValueError(f"{what}: expects uint8 data and an int8 kernel, got {data.dtype} and "
                         f"{kernel.dtype}")
    if len(data.shape) != 5 or len(kernel.shape) != 7:
        raise ValueError(f"{what}: expects NCHW16c data and an OIHW4i16o4i kernel, got "
                         f"{shape_str(data.shape)} and {shape_str(kernel.shape)}")
    d = [get_const_int(v) for v in data.shape]
    k = [get_const_int(v) for v in kernel.shape]
    if d[4] != B or k[1] != d[1] or tuple(k[4:]) != (B // K, B, K):
        raise ValueError(f"{what}: data {shape_str(data.shape)} and kernel "
                         f"{shape_str(kernel.shape)} are not NCHW16c / OIHW4i16o4i of the same "
                         f"input channels")
    if not 0 <= int(pad_value) <= 255:
        raise ValueError(f"{what}: pad_value must be a uint8 value, got {pad_value}")
    sh, sw = as_tuple(strides, 2, f"{what}: strides")
    dh, dw = as_tuple(dilation, 2, f"{what}: dilation")
    n, cb, h, w = d[:4]
    kh, kw = k[2], k[3]
    pt, pl, pb, pr = get_pad_tuple(padding, ((kh - 1) * dh + 1, (kw - 1) * dw + 1))
    oh = _out_extent(h, pt, pb, kh, sh, dh, what)
    ow = _out_extent(w, pl, pr, kw, sw, dw, what)
    padded = pad(data, (0, 0, pt, pl, 0), (0, 0, pb, pr, 0),
                 pad_value=op.const(int(pad_value), "uint8"), name="pad_temp")
    it = index_dtype(data, kernel)
    ic_ = lambda v: index_const(v, it)  # noqa: E731
    rc = te.reduce_axis((0, ic_(cb)), name="rc")
    ry = te.reduce_axis((0, ic_(kh)), name="ry")
    rx = te.reduce_axis((0, ic_(kw)), name="rx")
    rf = te.reduce_axis((0, ic_(B // K)), name="rf")
    rs = te.reduce_axis((0, ic_(K)), name="rs")

    def body(nn: PrimExpr, oc: PrimExpr, yy: PrimExpr, xx: PrimExpr, ob: PrimExpr
             ) -> PrimExpr:
        x = padded[nn, rc, yy * sh + ry * dh, xx * sw + rx * dw, rf * ic_(K) + rs]
        wv = kernel[oc, rc, ry, rx, rf, ob, rs]
        return te.sum(op.cast("int32", x) * op.cast("int32", wv), axis=[rc, ry, rx, rf, rs])

    shape = (ic_(n), ic_(k[0]), ic_(oh), ic_(ow), ic_(B))
    return te.compute(shape, body, name="conv2d_NCHWc_int8", tag="conv2d_NCHWc_int8",
                      attrs={"layout_free_placeholders": [kernel]})


def conv2d_nchwc_int8_numpy(x: np.ndarray, w: np.ndarray, strides: Any, padding: Any,
                            dilation: Any, pad_value: int = 0) -> np.ndarray:
    """The reference: unpack both operands and sum in int64 (``padding`` as 4 values)."""
    B = INT8_BLOCK
    n, cb, h, wd, _ = x.shape
    ob, _, kh, kw = w.shape[:4]
    plain_x = x.transpose(0, 1, 4, 2, 3).reshape(n, cb * B, h, wd).astype(np.int64)
    # [O/B, C/B, KH, KW, B/K, B_o, K] -> [O, C, KH, KW]
    plain_w = w.transpose(0, 5, 1, 4, 6, 2, 3).reshape(ob * B, cb * B, kh, kw).astype(np.int64)
    sh, sw = strides
    dh, dw = dilation
    pt, pl, pb, pr = padding
    xp = np.pad(plain_x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=pad_value)
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((n, ob * B, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            win = xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh,
                     j * dw: j * dw + sw * (ow - 1) + 1: sw]
            out += np.einsum("nchw,oc->nohw", win, plain_w[:, :, i, j])
    return out.reshape(n, ob, B, oh, ow).transpose(0, 1, 3, 4, 2).astype(np.int32)
