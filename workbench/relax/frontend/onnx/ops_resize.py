"""ONNX converter: ``Resize`` (and ``Upsample``, which the version converter turns into it)
over 1, 2 or 3 spatial dims, on ``relax.image.resize2d``.

Scales or sizes must be known at import time. With ``scales`` the output is
``floor(in * scale)`` and the coordinate mapping uses the scale itself; with ``sizes`` the
ratio of the sizes (after ``keep_aspect_ratio_policy``). 1-d data runs as ``(N, C, 1, L)``; 3-d
data resizes H and W over ``(N, C * D, H, W)``, then D over ``(N, C, D, OH * OW)``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Expr
from workbench.relax.frontend.onnx._registry import converter
from workbench.tir.expr import IntImm


def _known_floats(imp: Any, v: Any) -> list[float] | None:
    if v is None:
        return None
    k = imp.known(v)
    if k is None:
        raise NotImplementedError("Resize with scales, sizes or roi computed at run time")
    return [float(x) for x in k.reshape(-1)] or None


def _plan(imp: Any, node: Any, inputs: list, attrs: dict, dims: list[int]
          ) -> tuple[list[int], list[float], list[float]]:
    """``(output sizes, scales, roi [starts..., ends...])`` over every dim of the data."""
    r = len(dims)
    axes = [a % r for a in attrs.get("axes", range(r))]
    roi = _known_floats(imp, inputs[1] if len(inputs) > 1 else None)
    scales = _known_floats(imp, inputs[2] if len(inputs) > 2 else None)
    sizes = _known_floats(imp, inputs[3] if len(inputs) > 3 else None)
    out, sc = list(dims), [1.0] * r
    if sizes is not None:
        want = [int(s) for s in sizes]
        policy = attrs.get("keep_aspect_ratio_policy", "stretch")
        ratio = None
        if policy != "stretch":  # one scale for every axis, which the mapping uses too
            ratios = [w / dims[a] for w, a in zip(want, axes) if dims[a] is not None]
            ratio = min(ratios) if policy == "not_larger" else max(ratios)
            want = [int(math.floor(ratio * dims[a] + 0.5)) for a in axes]
        for w, a in zip(want, axes):
            if dims[a] is not None:  # (a dynamic batch is taken as not resized)
                out[a], sc[a] = w, (w / dims[a] if ratio is None else ratio)
    elif scales is not None:
        for s, a in zip(scales, axes):
            if dims[a] is not None:
                out[a], sc[a] = int(math.floor(dims[a] * s)), s
    else:
        raise ValueError("Resize needs scales or sizes")
    full_roi = [0.0] * r + [1.0] * r
    if roi is not None and attrs.get("coordinate_transformation_mode") == "tf_crop_and_resize":
        n = len(axes)
        for k, a in enumerate(axes):
            full_roi[a], full_roi[r + a] = roi[k], roi[n + k]
    return out, sc, full_roi


@converter("Resize")
def _resize(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    values = x.struct_info.values
    dims = [int(d.value) if isinstance(d, IntImm) else None for d in values]
    if None in dims[2:] or len(dims) not in (3, 4, 5):
        raise NotImplementedError(f"Resize of a {len(dims)}-d tensor or dynamic spatial dims "
                                  "(supported: static 1-3 spatial dims after N, C)")
    out, scales, roi = _plan(imp, node, inputs, attrs, dims)
    if scales[:2] != [1.0, 1.0]:
        raise NotImplementedError("Resize of the batch or channel dimension")
    if attrs.get("antialias", 0) and any(s < 1 for s in scales[2:]):
        raise NotImplementedError("Resize with antialias=1 when downsampling")
    r = len(dims)
    common = dict(method=attrs.get("mode", "nearest"),
                  coordinate_transformation_mode=attrs.get("coordinate_transformation_mode",
                                                           "half_pixel"),
                  rounding_method=attrs.get("nearest_mode", "round_prefer_floor"),
                  cubic_alpha=attrs.get("cubic_coeff_a", -0.75),
                  cubic_exclude=attrs.get("exclude_outside", 0),
                  extrapolation_value=attrs.get("extrapolation_value", 0.0))

    def resize2d(t: Expr, size: tuple, sc: tuple, box: tuple) -> Expr:
        return imp.emit(R.image.resize2d(t, size, roi=box, scales=sc, **common))
    n, c = values[:2]
    if r == 4:
        return resize2d(x, (out[2], out[3]), (scales[2], scales[3]),
                        (roi[2], roi[3], roi[6], roi[7]))
    if r == 3:
        y = imp.emit(R.expand_dims(x, 2))
        y = resize2d(y, (1, out[2]), (1.0, scales[2]), (0.0, roi[2], 1.0, roi[5]))
        return R.squeeze(y, [2])
    d, h, w = dims[2:]
    y = imp.emit(R.reshape(x, [n, c * d, h, w]))
    y = resize2d(y, (out[3], out[4]), (scales[3], scales[4]), (roi[3], roi[4], roi[8], roi[9]))
    y = imp.emit(R.reshape(y, [n, c, d, out[3] * out[4]]))
    y = resize2d(y, (out[2], out[3] * out[4]), (scales[2], 1.0), (roi[2], 0.0, roi[7], 1.0))
    return R.reshape(y, [n, c, out[2], out[3], out[4]])


@converter("Upsample")
def _upsample(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    """Upsample (deprecated since opset 10): Resize with ``x / scale`` coordinates and the
    nearest element below."""
    scales = inputs[1] if len(inputs) > 1 else np.asarray(attrs["scales"], "float32")
    mode = attrs.get("mode", "nearest")
    return _resize(imp, node, [inputs[0], None, scales],
                   {"mode": "linear" if mode in ("linear", "bilinear") else mode,
                    "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"})


__all__: list[str] = []


# ---- sampling grids ---------------------------------------------------------------------------------

_GRID_MODES = {"bilinear": "bilinear", "linear": "bilinear", "nearest": "nearest",
               "bicubic": "bicubic", "cubic": "bicubic"}


@converter("GridSample")
def _grid_sample(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x, grid = imp.expr(inputs[0]), imp.expr(inputs[1])
    if len(x.struct_info.values) != 4:
        raise NotImplementedError("GridSample of other than 4-d (NCHW) data")
    mode = attrs.get("mode", "linear" if imp.opset >= 20 else "bilinear")
    if mode not in _GRID_MODES:
        raise NotImplementedError(f"GridSample mode {mode!r}")
    return R.image.grid_sample(x, grid, _GRID_MODES[mode],
                               padding_mode=attrs.get("padding_mode", "zeros"),
                               align_corners=bool(attrs.get("align_corners", 0)))


def _base_coords(n: int, align_corners: bool) -> np.ndarray:
    if align_corners:
        return np.linspace(-1.0, 1.0, n) if n > 1 else np.zeros(1)
    return (np.arange(n) * 2.0 + 1.0) / n - 1.0


@converter("AffineGrid")
def _affine_grid(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    """The grid of ``theta @ (x, y[, z], 1)`` over the normalised output pixel centres."""
    theta = imp.expr(inputs[0])
    size = imp.known(inputs[1])
    if size is None or size.dtype == object:
        raise NotImplementedError("AffineGrid with a size computed at run time")
    size = [int(s) for s in size.reshape(-1)]
    spatial = size[2:]
    r = len(spatial)
    align = bool(attrs.get("align_corners", 0))
    axes = [_base_coords(s, align) for s in spatial]          # D, H, W (outermost first)
    mesh = np.meshgrid(*axes, indexing="ij")
    # (x, y[, z]) is innermost-first: W's coordinate, then H's, then D's.
    base = np.stack([m.reshape(-1) for m in reversed(mesh)] + [np.ones(mesh[0].size)], -1)
    dtype = theta.struct_info.dtype
    base = imp.expr(base.astype(dtype)[None])                  # (1, P, r + 1)
    grid = imp.emit(R.matmul(base, imp.emit(R.permute_dims(theta, [0, 2, 1]))))
    return R.reshape(grid, [size[0]] + spatial + [r])
