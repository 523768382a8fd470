"""Convolutions on channel-blocked layouts (TVM's ``conv2d_NCHWc``, onnxruntime's NCHWc
convolutions): the output is ``NCHW{B}c``, ``[N][O/B][OH][OW][B]``, so the ``B`` output
channels of one pixel are one vector, and each kernel reads its weight already reordered so
that those ``B`` channels are contiguous too.

Three forms, told apart by the layouts:

================  ==================  ===================  ===================================
form              data                kernel               when
================  ==================  ===================  ===================================
blocked           ``NCHW{b}c``        ``OIHW{b}i{B}o``     input channels per group a multiple
                                                           of ``b``, output channels per group
                                                           a multiple of ``B``
plain input       ``NCHW``            ``OIHW{B}o``         any input channels, groups = 1
                                                           (the 3-channel stem)
depthwise         ``NCHW{B}c``        ``OIHW{B}o``, I = 1  groups = channels, multiplier 1
================  ==================  ===================  ===================================

The loop nest is a direct convolution: ``sum over (input-channel block, kh, kw, lane of the
input block)`` of a broadcast input value times a vector of ``B`` weights, which is the order
in which the default schedule (``workbench.dlight``) tiles it: a register tile of output
pixels x output-channel vectors. Padding is its own ``pad_temp`` stage over H and W.
"""
from __future__ import annotations

from typing import Any

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.nn.conv2d import _out_extent, get_pad_tuple
from workbench.topi.nn.layout import layout_block, parse_layout, primal_layout
from workbench.topi.nn.pad import pad
from workbench.topi.utils import (
    as_tuple, get_const_int, index_const, index_dtype, is_const_int, shape_str,
)

__all__ = ["conv2d_nchwc"]


def _const_dims(t: Tensor, what: str, symbolic: tuple[int, ...] = ()) -> list[Any]:
    dims = []
    for k, d in enumerate(t.shape):
        if is_const_int(d):
            dims.append(get_const_int(d))
        elif k in symbolic:
            dims.append(d)
        else:
            raise ValueError(f"{what}: dimension {k} of {shape_str(t.shape)} must be constant")
    return dims


def conv2d_nchwc(data: Tensor, kernel: Tensor, strides: Any, padding: Any, dilation: Any,
                 groups: int = 1, data_layout: str = "NCHW16c",
                 kernel_layout: str = "OIHW16i16o", out_layout: str = "NCHW16c",
                 out_dtype: str | None = None) -> Tensor:
    """The blocked convolution ``out_layout`` = conv(``data``, ``kernel``) for the three forms
    of the module docstring. ``padding`` is TVM's (an int, 2 or 4 values, SAME / VALID)."""
    what = f"conv2d_NCHWc({data_layout}, {kernel_layout} -> {out_layout})"
    if primal_layout(data_layout) != "NCHW" or primal_layout(kernel_layout) != "OIHW" or \
            primal_layout(out_layout) != "NCHW":
        raise ValueError(f"{what}: expects NCHW-based data / output and an OIHW-based kernel")
    ob = layout_block(out_layout, "C")
    ib = layout_block(data_layout, "C")
    kib, kob = layout_block(kernel_layout, "I"), layout_block(kernel_layout, "O")
    if ob is None or kob != ob or len(parse_layout(out_layout)) != 5:
        raise ValueError(f"{what}: the output must be NCHW{{B}}c and the kernel's O block B")
    if kib is not None and kib != ib:
        raise ValueError(f"{what}: the kernel's I block must be the data's C block")
    sh, sw = as_tuple(strides, 2, f"{what}: strides")
    dh, dw = as_tuple(dilation, 2, f"{what}: dilation")
    out_dtype = out_dtype or data.dtype
    d = _const_dims(data, f"{what}: data", symbolic=(0,))
    k = _const_dims(kernel, f"{what}: kernel")
    if len(d) != len(parse_layout(data_layout)) or len(k) != len(parse_layout(kernel_layout)):
        raise ValueError(f"{what}: data {shape_str(data.shape)} or kernel "
                         f"{shape_str(kernel.shape)} does not match its layout")
    n, h, w = d[0], d[2], d[3]
    c = d[1] * (ib or 1)
    oc = k[0] * ob
    icg = k[1] * (kib or 1)
    kh, kw = k[2], k[3]
    depthwise = ib is not None and kib is None
    if depthwise:
        if icg != 1 or groups != c or oc != c or ob != ib:
            raise ValueError(f"{what}: a depthwise kernel needs I = 1, groups = channels = "
                             f"output channels and equal blocks; got I={icg}, groups={groups}, "
                             f"{c} -> {oc} channels")
    elif kib is None:
        if ib is not None or groups != 1 or icg != c:
            raise ValueError(f"{what}: a plain-input kernel needs NCHW data, groups = 1 and "
                             f"I = the data's {c} channels; got I={icg}, groups={groups}")
    elif icg * groups != c or oc % groups or (oc // groups) % ob or icg % ib:
        raise ValueError(f"{what}: {c} input channels, {oc} output channels and kernel input "
                         f"channels {icg} do not fit groups={groups} with blocks {ib} / {ob}")
    pt, pl, pb, pr = get_pad_tuple(padding, ((kh - 1) * dh + 1, (kw - 1) * dw + 1))
    oh = _out_extent(h, pt, pb, kh, sh, dh, what)
    ow = _out_extent(w, pl, pr, kw, sw, dw, what)
    zeros = (0,) * (len(d) - 4)
    padded = pad(data, (0, 0, pt, pl) + zeros, (0, 0, pb, pr) + zeros, name="pad_temp")
    it = index_dtype(data, kernel)
    ic_ = lambda v: index_const(v, it)  # noqa: E731
    ry = te.reduce_axis((0, ic_(kh)), name="ry")
    rx = te.reduce_axis((0, ic_(kw)), name="rx")

    def mul(x: PrimExpr, wv: PrimExpr) -> PrimExpr:
        return op.cast(out_dtype, x) * op.cast(out_dtype, wv)

    if depthwise:
        def body(nn: PrimExpr, cc: PrimExpr, yy: PrimExpr, xx: PrimExpr, cb: PrimExpr
                 ) -> PrimExpr:
            x = padded[nn, cc, yy * sh + ry * dh, xx * sw + rx * dw, cb]
            return te.sum(mul(x, kernel[cc, 0, ry, rx, cb]), axis=[ry, rx])
        name = "depthwise_conv2d_NCHWc"
    elif kib is None:
        rc = te.reduce_axis((0, ic_(icg)), name="rc")

        def body(nn: PrimExpr, cc: PrimExpr, yy: PrimExpr, xx: PrimExpr, cb: PrimExpr
                 ) -> PrimExpr:
            x = padded[nn, rc, yy * sh + ry * dh, xx * sw + rx * dw]
            return te.sum(mul(x, kernel[cc, rc, ry, rx, cb]), axis=[rc, ry, rx])
        name = "conv2d_NCHWc"
    else:
        rc = te.reduce_axis((0, ic_(icg // ib)), name="rc")
        ri = te.reduce_axis((0, ic_(ib)), name="ri")
        ocg_blocks = oc // groups // ob
        icg_blocks = icg // ib

        def body(nn: PrimExpr, cc: PrimExpr, yy: PrimExpr, xx: PrimExpr, cb: PrimExpr
                 ) -> PrimExpr:
            chunk = rc if groups == 1 else cc // ic_(ocg_blocks) * ic_(icg_blocks) + rc
            x = padded[nn, chunk, yy * sh + ry * dh, xx * sw + rx * dw, ri]
            return te.sum(mul(x, kernel[cc, rc, ry, rx, ri, cb]), axis=[rc, ry, rx, ri])
        name = "conv2d_NCHWc" if groups == 1 else "group_conv2d_NCHWc"
    shape = (ic_(n), ic_(oc // ob), ic_(oh), ic_(ow), ic_(ob))
    return te.compute(shape, body, name=name, tag=name,
                      attrs={"layout_free_placeholders": [kernel]})
