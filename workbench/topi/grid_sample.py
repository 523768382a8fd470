"""``grid_sample`` (TVM's ``topi.image.grid_sample``; the ONNX ``GridSample`` / PyTorch
``grid_sampler_2d`` rules) on NCHW data with an ``(N, OH, OW, 2)`` grid of ``(x, y)`` in
``[-1, 1]``.

A grid point maps to pixel coordinates (``align_corners``: -1 and 1 are the corner pixels'
centres, else the image's outer edges); for nearest and bilinear sampling a coordinate outside
the borders is clamped ("border") or reflected back ("reflection"); then the point is the
nearest pixel (rounding half to even), or the bilinear (2x2) or bicubic (4x4, a = -0.75)
blend of its neighbours, where a neighbour outside the image is 0 ("zeros"), the nearest edge
pixel ("border"), or its reflection ("reflection"). This is PyTorch's ``grid_sampler_2d`` and
onnxruntime's rule; ONNX's reference evaluator also moves a bicubic point's coordinate (it
differs for bicubic "border" sampling near the edges).
"""
from __future__ import annotations

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.resize import _cubic_weights
from workbench.topi.utils import get_const_int

METHODS = ("nearest", "bilinear", "bicubic")
PADDING_MODES = ("zeros", "border", "reflection")

_F = "float32"


def _f(v: float) -> PrimExpr:
    return op.const(float(v), _F)


def _reflect(x: PrimExpr, lo: float, hi: float) -> PrimExpr:
    """``x`` reflected off ``lo`` and ``hi`` until it lies between them."""
    span = hi - lo
    if span <= 0:
        return _f(lo)

    def fold(dx: PrimExpr, near: float, far: float, sign: float) -> PrimExpr:
        n = te.floor(dx / _f(span))
        r = dx - n * _f(span)
        even = op.floormod(op.cast("int64", n), op.const(2, "int64")) == 0
        return op.if_then_else(even, _f(near) + _f(sign) * r, _f(far) - _f(sign) * r)
    below = fold(_f(lo) - x, lo, hi, 1.0)
    above = fold(x - _f(hi), hi, lo, -1.0)
    return op.if_then_else(x < _f(lo), below, op.if_then_else(x > _f(hi), above, x))


def grid_sample(data: Tensor, grid: Tensor, method: str = "bilinear",
                padding_mode: str = "zeros", align_corners: bool = False) -> Tensor:
    """Sample NCHW ``data`` at the points of ``grid`` (see the module docstring):
    ``(N, C, OH, OW)``."""
    if method not in METHODS:
        raise ValueError(f"grid_sample: method must be one of {METHODS}, got {method!r}")
    if padding_mode not in PADDING_MODES:
        raise ValueError(f"grid_sample: padding_mode must be one of {PADDING_MODES}, got "
                         f"{padding_mode!r}")
    sizes = [get_const_int(data.shape[2]), get_const_int(data.shape[3])]  # H, W
    borders = [(0.0, s - 1.0) if align_corners else (-0.5, s - 0.5) for s in sizes]
    idx_dtype = data.shape[2].dtype
    acc = data.dtype if data.dtype.startswith(("float", "bfloat")) else _F

    def coordinate(g: PrimExpr, axis: int) -> PrimExpr:
        s = sizes[axis]
        g = op.cast(_F, g)
        c = (g + _f(1)) / _f(2) * _f(s - 1) if align_corners else \
            ((g + _f(1)) * _f(s) - _f(1)) / _f(2)
        if method == "nearest":
            c = te.nearbyint(c)
        if method == "bicubic":
            return c  # (PyTorch's rule: only the 16 neighbours' indices are padded)
        lo, hi = borders[axis]
        outside = op.logical_or(c < _f(lo), c > _f(hi))
        if padding_mode == "border":
            c = op.if_then_else(outside, op.max(op.min(c, _f(s - 1)), _f(0)), c)
        elif padding_mode == "reflection":
            c = op.if_then_else(outside, _reflect(c, lo, hi), c)
        return c

    def index(k: PrimExpr, axis: int) -> tuple[PrimExpr, PrimExpr]:
        """(an in-range index, whether the pixel is the image's) for integer position k."""
        s = sizes[axis]
        if padding_mode == "zeros":
            inside = op.logical_and(k >= 0, k < s)
            return op.max(op.min(k, op.const(s - 1, "int64")), op.const(0, "int64")), inside
        if padding_mode == "border":
            return op.max(op.min(k, op.const(s - 1, "int64")), op.const(0, "int64")), None
        lo, hi = borders[axis]
        r = op.cast("int64", _reflect(op.cast(_F, k), lo, hi))
        return op.max(op.min(r, op.const(s - 1, "int64")), op.const(0, "int64")), None

    # The pixel coordinates of each grid point, once (not per channel and neighbour).
    coords = te.compute(tuple(grid.shape), lambda n, i, j, k: op.if_then_else(
        k == 0, coordinate(grid[n, i, j, 0], 1), coordinate(grid[n, i, j, 1], 0)),
        name="T_grid_coords", tag="injective")

    def f(n: PrimExpr, c: PrimExpr, i: PrimExpr, j: PrimExpr) -> PrimExpr:
        cx, cy = coords[n, i, j, 0], coords[n, i, j, 1]

        def pixel(y: tuple, x: tuple) -> PrimExpr:
            v = op.cast(acc, data[n, c, op.cast(idx_dtype, y[0]), op.cast(idx_dtype, x[0])])
            inside = [b for b in (y[1], x[1]) if b is not None]
            if inside:
                v = op.if_then_else(op.all(*inside), v, op.const(0, acc))
            return v
        if method == "nearest":
            value = pixel(index(op.cast("int64", cy), 0), index(op.cast("int64", cx), 1))
        else:
            y0, x0 = te.floor(cy), te.floor(cx)
            ty, tx = cy - y0, cx - x0
            if method == "bilinear":
                wy, wx, offs = [_f(1) - ty, ty], [_f(1) - tx, tx], [0, 1]
            else:
                wy, wx, offs = _cubic_weights(ty, -0.75), _cubic_weights(tx, -0.75), \
                    [-1, 0, 1, 2]
            by, bx = op.cast("int64", y0), op.cast("int64", x0)
            ys = [index(by + o, 0) for o in offs]
            xs = [index(bx + o, 1) for o in offs]
            value = None
            for a, y in zip(wy, ys):
                row = None
                for b, x in zip(wx, xs):
                    term = op.cast(acc, b) * pixel(y, x)
                    row = term if row is None else row + term
                term = op.cast(acc, a) * row
                value = term if value is None else value + term
        return op.cast(data.dtype, value)
    out_shape = (data.shape[0], data.shape[1], grid.shape[1], grid.shape[2])
    return te.compute(out_shape, f, name="T_grid_sample", tag="injective")


__all__ = ["grid_sample", "METHODS", "PADDING_MODES"]
