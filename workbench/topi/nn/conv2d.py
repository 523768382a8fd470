"""2-d convolutions: ``conv2d_nchw`` / ``conv2d_nhwc`` (with groups) and depthwise variants.

Signatures and stage names follow TVM: the input is padded by a separate ``pad_temp`` stage
(always present, as in TVM, so tuned workloads have the same blocks), then one reduction stage
named after the layout (``conv2d_nchw``) sums over input channels and the kernel window.
``padding`` is an int, ``(pad_h, pad_w)``, ``(top, left, bottom, right)``, or "SAME"/"VALID".
"""
from __future__ import annotations

from typing import Any

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.nn.pad import pad
from workbench.topi.utils import (
    as_tuple, get_const_int, index_const, index_dtype, layout_dims, shape_str,
)


def get_pad_tuple(padding: Any, kernel: tuple[int, int]) -> tuple[int, int, int, int]:
    """``(top, left, bottom, right)`` for a padding spec and a (dilated) kernel size."""
    if isinstance(padding, str):
        if padding.upper() == "VALID":
            return (0, 0, 0, 0)
        if padding.upper() == "SAME":
            ph, pw = kernel[0] - 1, kernel[1] - 1
            return ((ph + 1) // 2, (pw + 1) // 2, ph // 2, pw // 2)
        raise ValueError(f"padding must be 'SAME' or 'VALID', got {padding!r}")
    if isinstance(padding, int):
        return (padding,) * 4
    p = [get_const_int(x) for x in padding]
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    if len(p) == 4:
        return (p[0], p[1], p[2], p[3])
    raise ValueError(f"padding must have 1, 2 or 4 entries, got {list(padding)}")


def _out_extent(size: int, pad_lo: int, pad_hi: int, kernel: int, stride: int,
                dilation: int, what: str) -> int:
    out = (size + pad_lo + pad_hi - ((kernel - 1) * dilation + 1)) // stride + 1
    if out <= 0:
        raise ValueError(f"{what}: the kernel window ({kernel}, dilation {dilation}) does not "
                         f"fit the padded input extent {size + pad_lo + pad_hi}")
    return out


def _conv2d(data: Tensor, kernel: Tensor, stride: Any, padding: Any, dilation: Any,
            groups: int, layout: str, out_dtype: str | None) -> Tensor:
    what = f"conv2d_{layout.lower()}"
    if data.ndim != 4 or kernel.ndim != 4:
        raise ValueError(f"{what}: expects 4-d data and kernel, got {shape_str(data.shape)} "
                         f"and {shape_str(kernel.shape)}")
    sh, sw = as_tuple(stride, 2, f"{what}: stride")
    dh, dw = as_tuple(dilation, 2, f"{what}: dilation")
    out_dtype = out_dtype or data.dtype
    # The batch may be symbolic; channels, spatial extents and the kernel must be constants.
    dims = layout_dims(data.shape, layout, f"{what}: data")
    n, c, h, w = dims["N"], dims["C"], dims["H"], dims["W"]
    kdims = layout_dims(kernel.shape, "OIHW" if layout == "NCHW" else "HWIO",
                        f"{what}: kernel", symbolic="")
    oc, icg, kh, kw = kdims["O"], kdims["I"], kdims["H"], kdims["W"]
    if c % groups or oc % groups or icg * groups != c:
        raise ValueError(f"{what}: {c} input channels, {oc} output channels and kernel input "
                         f"channels {icg} do not fit groups={groups}")
    pt, pl, pb, pr = get_pad_tuple(padding, ((kh - 1) * dh + 1, (kw - 1) * dw + 1))
    oh = _out_extent(h, pt, pb, kh, sh, dh, what)
    ow = _out_extent(w, pl, pr, kw, sw, dw, what)
    if layout == "NCHW":
        padded = pad(data, (0, 0, pt, pl), (0, 0, pb, pr), name="pad_temp")
    else:
        padded = pad(data, (0, pt, pl, 0), (0, pb, pr, 0), name="pad_temp")
    it = index_dtype(data, kernel)
    rc = te.reduce_axis((0, index_const(icg, it)), name="rc")
    ry = te.reduce_axis((0, index_const(kh, it)), name="ry")
    rx = te.reduce_axis((0, index_const(kw, it)), name="rx")
    ocg = oc // groups

    def in_channel(f: PrimExpr) -> PrimExpr:
        return rc.var if groups == 1 else f // ocg * icg + rc

    def nchw(nn: PrimExpr, ff: PrimExpr, yy: PrimExpr, xx: PrimExpr) -> PrimExpr:
        x = padded[nn, in_channel(ff), yy * sh + ry * dh, xx * sw + rx * dw]
        return te.sum(op.cast(out_dtype, x) * op.cast(out_dtype, kernel[ff, rc, ry, rx]),
                      axis=[rc, ry, rx])

    def nhwc(nn: PrimExpr, yy: PrimExpr, xx: PrimExpr, ff: PrimExpr) -> PrimExpr:
        x = padded[nn, yy * sh + ry * dh, xx * sw + rx * dw, in_channel(ff)]
        return te.sum(op.cast(out_dtype, x) * op.cast(out_dtype, kernel[ry, rx, rc, ff]),
                      axis=[ry, rx, rc])
    name = ("group_" if groups > 1 else "") + what
    shape = (n, oc, oh, ow) if layout == "NCHW" else (n, oh, ow, oc)
    shape = tuple(index_const(d, it) for d in shape)
    return te.compute(shape, nchw if layout == "NCHW" else nhwc, name=name, tag=name,
                      attrs={"layout_free_placeholders": [kernel]})


def conv2d_nchw(Input: Tensor, Filter: Tensor, stride: Any, padding: Any, dilation: Any,
                out_dtype: str | None = None) -> Tensor:
    """NCHW data, OIHW filter -> NCHW output."""
    return _conv2d(Input, Filter, stride, padding, dilation, 1, "NCHW", out_dtype)


def conv2d_nhwc(Input: Tensor, Filter: Tensor, stride: Any, padding: Any, dilation: Any,
                out_dtype: str | None = None) -> Tensor:
    """NHWC data, HWIO filter -> NHWC output."""
    return _conv2d(Input, Filter, stride, padding, dilation, 1, "NHWC", out_dtype)


def group_conv2d_nchw(Input: Tensor, Filter: Tensor, stride: Any, padding: Any, dilation: Any,
                      groups: int, out_dtype: str | None = None) -> Tensor:
    """Grouped NCHW convolution; the filter is (out_channels, in_channels / groups, KH, KW)."""
    return _conv2d(Input, Filter, stride, padding, dilation, groups, "NCHW", out_dtype)


def group_conv2d_nhwc(Input: Tensor, Filter: Tensor, stride: Any, padding: Any, dilation: Any,
                      groups: int, out_dtype: str | None = None) -> Tensor:
    """Grouped NHWC convolution; the filter is (KH, KW, in_channels / groups, out_channels)."""
    return _conv2d(Input, Filter, stride, padding, dilation, groups, "NHWC", out_dtype)


def conv2d(input: Tensor, filter: Tensor, strides: Any, padding: Any, dilation: Any,  # noqa: A002
           data_layout: str = "NCHW", kernel_layout: str = "", out_dtype: str | None = None,
           groups: int = 1) -> Tensor:
    """Dispatch on ``data_layout`` ("NCHW" with an OIHW filter, "NHWC" with HWIO)."""
    if data_layout not in ("NCHW", "NHWC"):
        raise ValueError(f"conv2d: data_layout must be 'NCHW' or 'NHWC', got {data_layout!r}")
    expected = {"NCHW": "OIHW", "NHWC": "HWIO"}[data_layout]
    if kernel_layout and kernel_layout != expected:
        raise ValueError(f"conv2d: data_layout {data_layout} needs kernel_layout {expected}, "
                         f"got {kernel_layout}")
    return _conv2d(input, filter, strides, padding, dilation, groups, data_layout, out_dtype)


def _depthwise(data: Tensor, kernel: Tensor, stride: Any, padding: Any, dilation: Any,
               layout: str, out_dtype: str | None) -> Tensor:
    what = f"depthwise_conv2d_{layout.lower()}"
    sh, sw = as_tuple(stride, 2, f"{what}: stride")
    dh, dw = as_tuple(dilation, 2, f"{what}: dilation")
    out_dtype = out_dtype or data.dtype
    if data.ndim != 4 or kernel.ndim != 4:
        raise ValueError(f"{what}: expects 4-d data and kernel, got {shape_str(data.shape)} "
                         f"and {shape_str(kernel.shape)}")
    dims = layout_dims(data.shape, layout, f"{what}: data")   # the batch may be symbolic
    n, c, h, w = dims["N"], dims["C"], dims["H"], dims["W"]
    # The filter is (C, multiplier, KH, KW) for NCHW and (KH, KW, C, multiplier) for NHWC.
    kdims = layout_dims(kernel.shape, "CMHW" if layout == "NCHW" else "HWCM",
                        f"{what}: kernel", symbolic="")
    kc, mult, kh, kw = kdims["C"], kdims["M"], kdims["H"], kdims["W"]
    if kc != c:
        raise ValueError(f"{what}: the filter has {kc} channels but the data has {c}")
    pt, pl, pb, pr = get_pad_tuple(padding, ((kh - 1) * dh + 1, (kw - 1) * dw + 1))
    oh = _out_extent(h, pt, pb, kh, sh, dh, what)
    ow = _out_extent(w, pl, pr, kw, sw, dw, what)
    if layout == "NCHW":
        padded = pad(data, (0, 0, pt, pl), (0, 0, pb, pr), name="PaddedInput")
    else:
        padded = pad(data, (0, pt, pl, 0), (0, pb, pr, 0), name="PaddedInput")
    it = index_dtype(data, kernel)
    di = te.reduce_axis((0, index_const(kh, it)), name="di")
    dj = te.reduce_axis((0, index_const(kw, it)), name="dj")

    def nchw(b: PrimExpr, c_: PrimExpr, i: PrimExpr, j: PrimExpr) -> PrimExpr:
        ic = c_ // mult if mult > 1 else c_
        x = padded[b, ic, i * sh + di * dh, j * sw + dj * dw]
        wv = kernel[ic, c_ % mult if mult > 1 else 0, di, dj]
        return te.sum(op.cast(out_dtype, x) * op.cast(out_dtype, wv), axis=[di, dj])

    def nhwc(b: PrimExpr, i: PrimExpr, j: PrimExpr, c_: PrimExpr) -> PrimExpr:
        ic = c_ // mult if mult > 1 else c_
        x = padded[b, i * sh + di * dh, j * sw + dj * dw, ic]
        wv = kernel[di, dj, ic, c_ % mult if mult > 1 else 0]
        return te.sum(op.cast(out_dtype, x) * op.cast(out_dtype, wv), axis=[di, dj])
    shape = (n, c * mult, oh, ow) if layout == "NCHW" else (n, oh, ow, c * mult)
    shape = tuple(index_const(d, it) for d in shape)
    return te.compute(shape, nchw if layout == "NCHW" else nhwc, name="DepthwiseConv2d",
                      tag=what, attrs={"layout_free_placeholders": [kernel]})


def depthwise_conv2d_nchw(Input: Tensor, Filter: Tensor, stride: Any, padding: Any,
                          dilation: Any, out_dtype: str | None = None) -> Tensor:
    """Depthwise NCHW convolution; the filter is (channels, multiplier, KH, KW)."""
    return _depthwise(Input, Filter, stride, padding, dilation, "NCHW", out_dtype)


def depthwise_conv2d_nhwc(Input: Tensor, Filter: Tensor, stride: Any, padding: Any,
                          dilation: Any, kernel_layout: str = "HWOI",
                          out_dtype: str | None = None) -> Tensor:
    """Depthwise NHWC convolution; the filter is (KH, KW, channels, multiplier)."""
    if kernel_layout != "HWOI":
        raise ValueError(f"depthwise_conv2d_nhwc: only kernel_layout='HWOI' is supported, got "
                         f"{kernel_layout!r}")
    return _depthwise(Input, Filter, stride, padding, dilation, "NHWC", out_dtype)
