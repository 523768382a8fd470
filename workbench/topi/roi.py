"""Region-of-interest pooling (TVM's ``topi.vision.roi_align`` / ``roi_pool``; the ONNX
``RoiAlign`` and ``MaxRoiPool`` rules) on NCHW data.

- ``roi_align``: each of the ``(PH, PW)`` bins of a box ``(x1, y1, x2, y2)`` (times
  ``spatial_scale``, shifted by half a pixel in "half_pixel" mode) averages -- or takes the
  maximum of -- ``grid_h x grid_w`` bilinear samples at the centres of a regular sub-grid.
  The sub-grid is ``sampling_ratio`` per side, or (0) ``ceil(bin size)`` for each box: the
  reduction then runs to ``max_grid`` (the caller's bound) with the extra samples masked.
  "max" keeps onnxruntime's rule: the largest of each sample's four weighted corners.
- ``roi_pool``: Caffe's ROIPool -- the box rounded to pixels, each bin the maximum over its
  integer cell (0 for an empty cell); the cell is found by masking the whole plane.
"""
from __future__ import annotations

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.utils import get_const_int

_F = "float32"


def _f(v: float) -> PrimExpr:
    return op.const(float(v), _F)


def _bilinear(data: Tensor, n: PrimExpr, c: PrimExpr, y: PrimExpr, x: PrimExpr, h: int,
              w: int, acc: str) -> tuple[PrimExpr, list[PrimExpr]]:
    """(inside the extended image, the four weighted corner values) at ``(y, x)``."""
    inside = op.logical_and(op.logical_and(y >= _f(-1), y <= _f(h)),
                            op.logical_and(x >= _f(-1), x <= _f(w)))
    y, x = op.max(y, _f(0)), op.max(x, _f(0))
    idx = data.shape[2].dtype

    def corners(v: PrimExpr, size: int) -> tuple[PrimExpr, PrimExpr, PrimExpr]:
        low = op.cast("int64", v)
        edge = low >= size - 1
        low = op.if_then_else(edge, op.const(size - 1, "int64"), low)
        high = op.if_then_else(edge, op.const(size - 1, "int64"), low + 1)
        frac = op.if_then_else(edge, _f(0), v - op.cast(_F, low))
        return low, high, frac
    y0, y1, ly = corners(y, h)
    x0, x1, lx = corners(x, w)
    hy, hx = _f(1) - ly, _f(1) - lx

    def at(yy: PrimExpr, xx: PrimExpr) -> PrimExpr:
        return op.cast(acc, data[n, c, op.cast(idx, yy), op.cast(idx, xx)])
    weighted = [op.cast(acc, hy * hx) * at(y0, x0), op.cast(acc, hy * lx) * at(y0, x1),
                op.cast(acc, ly * hx) * at(y1, x0), op.cast(acc, ly * lx) * at(y1, x1)]
    return inside, weighted


def roi_align(data: Tensor, rois: Tensor, batch_indices: Tensor, pooled_size: tuple[int, int],
              spatial_scale: float = 1.0, sampling_ratio: int = 0, mode: str = "avg",
              half_pixel: bool = True, max_grid: tuple[int, int] | None = None) -> Tensor:
    """``(num_rois, C, PH, PW)`` (see the module docstring); ``rois`` is ``(num_rois, 4)``
    boxes ``(x1, y1, x2, y2)`` of the images ``batch_indices``."""
    if mode not in ("avg", "max"):
        raise ValueError(f"roi_align: mode must be 'avg' or 'max', got {mode!r}")
    ph_n, pw_n = pooled_size
    h, w = get_const_int(data.shape[2]), get_const_int(data.shape[3])
    if sampling_ratio > 0:
        gmax = (sampling_ratio, sampling_ratio)
    elif max_grid is None:
        raise ValueError("roi_align: sampling_ratio=0 needs max_grid, the largest sub-grid")
    else:
        gmax = max_grid
    acc = data.dtype if data.dtype.startswith(("float", "bfloat")) else _F
    offset = 0.5 if half_pixel else 0.0
    ry = te.reduce_axis((0, gmax[0]), name="iy")
    rx = te.reduce_axis((0, gmax[1]), name="ix")
    out_shape = (rois.shape[0], data.shape[1], op.const(ph_n, "int64"),
                 op.const(pw_n, "int64"))

    def box(r: PrimExpr) -> tuple:
        coords = [op.cast(_F, rois[r, k]) * _f(spatial_scale) - _f(offset) for k in range(4)]
        x1, y1, x2, y2 = coords
        rw, rh = x2 - x1, y2 - y1
        if not half_pixel:
            rw, rh = op.max(rw, _f(1)), op.max(rh, _f(1))
        return x1, y1, rw / _f(pw_n), rh / _f(ph_n)

    def grid_of(size: PrimExpr, k: int) -> PrimExpr:
        if sampling_ratio > 0:
            return op.const(sampling_ratio, "int64")
        return op.cast("int64", te.ceil(size))

    def f(r: PrimExpr, c: PrimExpr, i: PrimExpr, j: PrimExpr) -> PrimExpr:
        x1, y1, bw, bh = box(r)
        gy, gx = grid_of(bh, 0), grid_of(bw, 1)
        y = y1 + op.cast(_F, i) * bh + (op.cast(_F, ry) + _f(0.5)) * bh / op.cast(_F, gy)
        x = x1 + op.cast(_F, j) * bw + (op.cast(_F, rx) + _f(0.5)) * bw / op.cast(_F, gx)
        n = op.cast(data.shape[0].dtype, batch_indices[r])
        inside, weighted = _bilinear(data, n, c, y, x, h, w, acc)
        valid = op.logical_and(ry < gy, rx < gx)
        zero = op.const(0, acc)
        if mode == "avg":
            sample = op.if_then_else(inside, weighted[0] + weighted[1] + weighted[2] +
                                     weighted[3], zero)
            return te.sum(sample, axis=[ry, rx], where=valid)
        top = op.max(op.max(weighted[0], weighted[1]), op.max(weighted[2], weighted[3]))
        return te.max(op.if_then_else(inside, top, zero), axis=[ry, rx], where=valid)
    pooled = te.compute(out_shape, f, name=f"T_roi_align_{mode}")
    if mode == "max":
        return pooled

    def average(r: PrimExpr, c: PrimExpr, i: PrimExpr, j: PrimExpr) -> PrimExpr:
        _, _, bw, bh = box(r)
        count = op.max(grid_of(bh, 0) * grid_of(bw, 1), op.const(1, "int64"))
        return pooled[r, c, i, j] / op.cast(acc, count)
    return te.compute(out_shape, average, name="T_roi_align", tag="injective")


def _round_half_away(v: PrimExpr) -> PrimExpr:
    return op.if_then_else(v >= _f(0), te.floor(v + _f(0.5)), te.ceil(v - _f(0.5)))


def roi_pool(data: Tensor, rois: Tensor, pooled_size: tuple[int, int],
             spatial_scale: float = 1.0) -> Tensor:
    """Caffe's max ROI pooling: ``rois`` is ``(num_rois, 5)`` rows ``(batch index, x1, y1,
    x2, y2)``; ``(num_rois, C, PH, PW)``."""
    ph_n, pw_n = pooled_size
    h, w = get_const_int(data.shape[2]), get_const_int(data.shape[3])
    ky = te.reduce_axis((0, h), name="ky")
    kx = te.reduce_axis((0, w), name="kx")
    out_shape = (rois.shape[0], data.shape[1], op.const(ph_n, "int64"),
                 op.const(pw_n, "int64"))
    idx = data.shape[2].dtype

    def cell(start: PrimExpr, length: PrimExpr, k: PrimExpr, n_bins: int, size: int
             ) -> tuple[PrimExpr, PrimExpr]:
        size_f = op.cast(_F, length) / _f(n_bins)
        lo = op.cast("int64", te.floor(op.cast(_F, k) * size_f)) + start
        hi = op.cast("int64", te.ceil(op.cast(_F, k + 1) * size_f)) + start
        clip = lambda v: op.min(op.max(v, op.const(0, "int64")),  # noqa: E731
                                op.const(size, "int64"))
        return clip(lo), clip(hi)

    def bounds(r: PrimExpr) -> list[PrimExpr]:
        return [op.cast("int64", _round_half_away(op.cast(_F, rois[r, k]) *
                                                  _f(spatial_scale))) for k in range(1, 5)]

    def cells(r: PrimExpr, i: PrimExpr, j: PrimExpr) -> tuple:
        x1, y1, x2, y2 = bounds(r)
        one = op.const(1, "int64")
        rh, rw = op.max(y2 - y1 + one, one), op.max(x2 - x1 + one, one)
        return cell(y1, rh, i, ph_n, h) + cell(x1, rw, j, pw_n, w)

    def f(r: PrimExpr, c: PrimExpr, i: PrimExpr, j: PrimExpr) -> PrimExpr:
        h0, h1, w0, w1 = cells(r, i, j)
        n = op.cast(idx, op.cast("int64", rois[r, 0]))
        inside = op.all(ky >= h0, ky < h1, kx >= w0, kx < w1)
        return te.max(data[n, c, ky, kx], axis=[ky, kx], where=inside)
    best = te.compute(out_shape, f, name="T_roi_pool_max")

    def g(r: PrimExpr, c: PrimExpr, i: PrimExpr, j: PrimExpr) -> PrimExpr:
        h0, h1, w0, w1 = cells(r, i, j)
        empty = op.logical_or(h1 <= h0, w1 <= w0)
        return op.if_then_else(empty, op.const(0, data.dtype), best[r, c, i, j])
    return te.compute(out_shape, g, name="T_roi_pool", tag="injective")


__all__ = ["roi_align", "roi_pool"]
