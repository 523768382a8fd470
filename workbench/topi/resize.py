"""Resizing one axis at a time (the ONNX ``Resize`` rules; TVM's ``topi.image.resize*``):
nearest, linear and cubic interpolation, every coordinate transformation mode.

An output index ``x`` maps to a source coordinate by the ``coordinate_transformation_mode``
(with ``scale`` = the output/input ratio the caller asked for, which need not be the ratio of
the integer sizes):

- ``half_pixel``: ``(x + 0.5) / scale - 0.5``; ``pytorch_half_pixel`` the same, but 0 for an
  output of one element; ``half_pixel_symmetric`` centred on the input's middle;
- ``align_corners``: ``x * (in - 1) / (out - 1)``; ``asymmetric``: ``x / scale``;
- ``tf_crop_and_resize``: ``start * (in - 1) + x * (end - start) * (in - 1) / (out - 1)`` from
  the region of interest; outside ``[0, in - 1]`` the result is ``extrapolation_value``.

Nearest rounds the coordinate (``round_prefer_floor``, ``round_prefer_ceil``, ``floor``,
``ceil``); linear weighs the two neighbours, cubic the four with the kernel of parameter ``a``
(neighbours past the edges repeat the edge, or with ``exclude_outside`` get weight 0 and the
others are renormalised). Interpolating axis after axis is exact for these separable kernels.
"""
from __future__ import annotations

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.utils import get_const_int

METHODS = ("nearest", "linear", "cubic")
COORDINATE_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel",
                    "align_corners", "asymmetric", "tf_crop_and_resize")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source(x: PrimExpr, n_in: int, n_out: int, scale: float, mode: str,
            roi: tuple[float, float]) -> PrimExpr:
    xf = op.cast("float32", x)
    f = lambda v: op.const(float(v), "float32")  # noqa: E731
    if mode == "half_pixel":
        return (xf + f(0.5)) / f(scale) - f(0.5)
    if mode == "pytorch_half_pixel":
        return (xf + f(0.5)) / f(scale) - f(0.5) if n_out > 1 else f(0.0)
    if mode == "half_pixel_symmetric":
        adjustment = n_out / (scale * n_in)
        offset = n_in / 2 * (1 - adjustment)
        return f(offset) + (xf + f(0.5)) / f(scale) - f(0.5)
    if mode == "align_corners":
        return xf * f((n_in - 1) / (n_out - 1)) if n_out > 1 else f(0.0)
    if mode == "asymmetric":
        return xf / f(scale)
    start, end = roi
    if n_out > 1:
        return f(start * (n_in - 1)) + xf * f((end - start) * (n_in - 1) / (n_out - 1))
    return f(0.5 * (start + end) * (n_in - 1))


def _nearest_index(c: PrimExpr, mode: str) -> PrimExpr:
    half = op.const(0.5, "float32")
    if mode == "round_prefer_floor":
        r = te.ceil(c - half)
    elif mode == "round_prefer_ceil":
        r = te.floor(c + half)
    elif mode == "floor":
        r = te.floor(c)
    else:
        r = te.ceil(c)
    return op.cast("int64", r)


def _cubic_weights(t: PrimExpr, a: float) -> list[PrimExpr]:
    """The cubic convolution kernel's weights of the neighbours at -1, 0, 1, 2 for a
    fractional position ``t``."""
    A = op.const(a, "float32")  # noqa: N806 - the kernel's conventional name
    one, two = op.const(1.0, "float32"), op.const(2.0, "float32")

    def far(d: PrimExpr) -> PrimExpr:   # 1 <= |d| < 2
        return ((A * d - op.const(5.0, "float32") * A) * d + op.const(8.0, "float32") * A) * d \
            - op.const(4.0, "float32") * A

    def near(d: PrimExpr) -> PrimExpr:  # |d| < 1
        return ((A + two) * d - (A + op.const(3.0, "float32"))) * d * d + one
    return [far(t + one), near(t), near(one - t), far(two - t)]


def resize_axis(data: Tensor, axis: int, size: int, method: str = "linear",
                coordinate_mode: str = "half_pixel", nearest_mode: str = "round_prefer_floor",
                cubic_a: float = -0.75, exclude_outside: bool = False,
                extrapolation_value: float = 0.0, scale: float | None = None,
                roi: tuple[float, float] = (0.0, 1.0)) -> Tensor:
    """``data`` resized along ``axis`` to ``size`` elements (see the module docstring);
    ``scale`` defaults to ``size / extent``."""
    if method not in METHODS:
        raise ValueError(f"resize: method must be one of {METHODS}, got {method!r}")
    if coordinate_mode not in COORDINATE_MODES:
        raise ValueError(f"resize: coordinate mode must be one of {COORDINATE_MODES}, got "
                         f"{coordinate_mode!r}")
    if nearest_mode not in NEAREST_MODES:
        raise ValueError(f"resize: nearest mode must be one of {NEAREST_MODES}, got "
                         f"{nearest_mode!r}")
    n_in = get_const_int(data.shape[axis])
    scale = size / n_in if scale is None else scale
    out_shape = list(data.shape)
    out_shape[axis] = op.const(size, data.shape[axis].dtype)
    idx_dtype = data.shape[axis].dtype
    last = op.const(n_in - 1, "int64")
    # Weights and coordinates in float32 (as onnxruntime); values in the data's float type.
    acc = data.dtype if data.dtype.startswith(("float", "bfloat")) else "float32"

    def read(i: tuple, k: PrimExpr) -> PrimExpr:
        k = op.max(op.min(k, last), op.const(0, "int64"))
        src = tuple(i[:axis]) + (op.cast(idx_dtype, k),) + tuple(i[axis + 1:])
        return op.cast(acc, data[src])

    def f(*i: PrimExpr) -> PrimExpr:
        c = _source(i[axis], n_in, size, scale, coordinate_mode, roi)
        if method == "nearest":
            value = read(i, _nearest_index(c, nearest_mode))
        else:
            base = op.cast("int64", te.floor(c))
            t = c - te.floor(c)
            if method == "linear":
                ws, offsets = [op.const(1.0, "float32") - t, t], [0, 1]
            else:
                ws, offsets = _cubic_weights(t, cubic_a), [-1, 0, 1, 2]
            if exclude_outside:
                zero = op.const(0.0, "float32")
                ws = [op.if_then_else(op.logical_and(base + o >= 0, base + o <= last), w, zero)
                      for w, o in zip(ws, offsets)]
                total = ws[0]
                for w in ws[1:]:
                    total = total + w
                ws = [w / total for w in ws]
            ws = [op.cast(acc, w) for w in ws]
            value = ws[0] * read(i, base + offsets[0])
            for w, o in zip(ws[1:], offsets[1:]):
                value = value + w * read(i, base + o)
        if coordinate_mode == "tf_crop_and_resize":
            inside = op.logical_and(c >= op.const(0.0, "float32"),
                                    c <= op.const(float(n_in - 1), "float32"))
            value = op.if_then_else(inside, value, op.const(float(extrapolation_value), acc))
        if data.dtype.startswith(("int", "uint")) and method != "nearest":
            value = te.round(value)
        return op.cast(data.dtype, value)
    return te.compute(tuple(out_shape), f, name=f"T_resize_axis{axis}", tag="injective")


def resize2d(data: Tensor, size: tuple[int, int], method: str = "linear",
             coordinate_mode: str = "half_pixel", nearest_mode: str = "round_prefer_floor",
             cubic_a: float = -0.75, exclude_outside: bool = False,
             extrapolation_value: float = 0.0, scales: tuple[float, float] | None = None,
             roi: tuple[float, float, float, float] = (0.0, 0.0, 1.0, 1.0)) -> Tensor:
    """NCHW ``data`` resized to ``size = (OH, OW)``: W first, then H (see
    :func:`resize_axis`); ``roi`` is ``(start_h, start_w, end_h, end_w)``."""
    scales = scales or (None, None)
    common = dict(method=method, coordinate_mode=coordinate_mode, nearest_mode=nearest_mode,
                  cubic_a=cubic_a, exclude_outside=exclude_outside,
                  extrapolation_value=extrapolation_value)
    out = data
    for axis, k in ((3, 1), (2, 0)):
        if size[k] == get_const_int(data.shape[axis]) and scales[k] in (None, 1.0) and \
                coordinate_mode != "tf_crop_and_resize":
            continue  # an identity along this axis
        out = resize_axis(out, axis, size[k], scale=scales[k], roi=(roi[k], roi[k + 2]),
                          **common)
    if out is data:
        out = te.compute(data.shape, lambda *i: data[i], name="T_resize_copy", tag="injective")
    return out


__all__ = ["resize_axis", "resize2d", "METHODS", "COORDINATE_MODES", "NEAREST_MODES"]
