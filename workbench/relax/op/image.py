"""Image ops (``relax.op.image``): ``resize2d`` on NCHW tensors with ONNX ``Resize``'s
methods and coordinate modes (see :mod:`workbench.topi.resize`), and ``grid_sample``
(:mod:`workbench.topi.grid_sample`)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo
from workbench.tir.expr import IntImm

_METHODS = {"nearest_neighbor": "nearest", "nearest": "nearest", "linear": "linear",
            "cubic": "cubic"}


def resize2d(data: Expr, size: Sequence[int], roi: Sequence[float] = (0.0, 0.0, 1.0, 1.0),
             layout: str = "NCHW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel",
             rounding_method: str = "round_prefer_floor", cubic_alpha: float = -0.75,
             cubic_exclude: int = 0, extrapolation_value: float = 0.0,
             scales: Sequence[float] | None = None) -> Call:
    """NCHW ``data`` resized to ``size = (OH, OW)``. ``method``: "nearest_neighbor" (or
    "nearest"), "linear", "cubic"; ``rounding_method`` is ONNX's nearest mode; ``roi``
    ``(start_h, start_w, end_h, end_w)`` is read by "tf_crop_and_resize"; ``scales`` (the
    output/input ratios asked for, default the sizes' ratio) drive the coordinate mapping."""
    from workbench.topi.resize import COORDINATE_MODES, NEAREST_MODES
    if layout != "NCHW":
        raise ValueError(f"resize2d: only the NCHW layout is supported, got {layout!r}")
    if method not in _METHODS:
        raise ValueError(f"resize2d: method must be one of {sorted(_METHODS)}, got {method!r}")
    if coordinate_transformation_mode not in COORDINATE_MODES:
        raise ValueError(f"resize2d: coordinate_transformation_mode must be one of "
                         f"{COORDINATE_MODES}, got {coordinate_transformation_mode!r}")
    if rounding_method not in NEAREST_MODES:
        raise ValueError(f"resize2d: rounding_method must be one of {NEAREST_MODES}, got "
                         f"{rounding_method!r}")
    size = tuple(int(s) for s in size)
    if len(size) != 2 or min(size) <= 0:
        raise ValueError(f"resize2d: size must be two positive ints, got {size}")
    attrs = {"size": size, "roi": tuple(float(r) for r in roi), "layout": layout,
             "method": _METHODS[method],
             "coordinate_transformation_mode": coordinate_transformation_mode,
             "rounding_method": rounding_method, "cubic_alpha": float(cubic_alpha),
             "cubic_exclude": int(cubic_exclude),
             "extrapolation_value": float(extrapolation_value),
             "scales": None if scales is None else tuple(float(s) for s in scales)}
    return make_call("relax.image.resize2d", (data,), attrs)


@def_infer("relax.image.resize2d")
def _infer_resize2d(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "data")
    if x.ndim not in (-1, 4):
        raise I.error(call, f"data must be 4-d (NCHW), got {I.dims_text(x.values)}")
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, 4)
    for d in x.values[2:]:
        if I.const_int(d) is None:
            raise I.error(call, f"H and W must be static, got {I.dims_text(x.values)}")
    oh, ow = call.attrs["size"]
    return TensorStructInfo(tuple(x.values[:2]) + (IntImm("int64", oh), IntImm("int64", ow)),
                            x.dtype)


@def_legalize("relax.image.resize2d")
def _legalize_resize2d(bb: Any, call: Call) -> Expr:
    from workbench.topi.resize import resize2d as te_resize2d
    a = call.attrs
    return bb.call_te(te_resize2d, call.args[0], a["size"], a["method"],
                      a["coordinate_transformation_mode"], a["rounding_method"],
                      a["cubic_alpha"], bool(a["cubic_exclude"]), a["extrapolation_value"],
                      a["scales"], a["roi"], primfunc_name_hint="resize2d")


# ---- numpy (float64, ONNX's reference formulas) --------------------------------------------------

def _np_axis(x: np.ndarray, axis: int, size: int, a: dict, k: int) -> np.ndarray:
    n_in = x.shape[axis]
    scale = a["scales"][k] if a["scales"] else size / n_in
    mode = a["coordinate_transformation_mode"]
    xs = np.arange(size, dtype=np.float64)
    start, end = a["roi"][k], a["roi"][k + 2]
    if mode in ("half_pixel", "pytorch_half_pixel"):
        c = (xs + 0.5) / scale - 0.5
        if mode == "pytorch_half_pixel" and size == 1:
            c = np.zeros_like(xs)
    elif mode == "half_pixel_symmetric":
        c = n_in / 2 * (1 - size / (scale * n_in)) + (xs + 0.5) / scale - 0.5
    elif mode == "align_corners":
        c = xs * (n_in - 1) / (size - 1) if size > 1 else np.zeros_like(xs)
    elif mode == "asymmetric":
        c = xs / scale
    else:
        c = start * (n_in - 1) + xs * (end - start) * (n_in - 1) / (size - 1) if size > 1 \
            else np.full_like(xs, 0.5 * (start + end) * (n_in - 1))
    xm = np.moveaxis(x.astype(np.float64), axis, -1)
    clamp = lambda i: np.clip(i, 0, n_in - 1)  # noqa: E731
    if a["method"] == "nearest":
        r = a["rounding_method"]
        idx = {"round_prefer_floor": np.ceil(c - 0.5), "round_prefer_ceil": np.floor(c + 0.5),
               "floor": np.floor(c), "ceil": np.ceil(c)}[r].astype(np.int64)
        out = xm[..., clamp(idx)]
    else:
        base = np.floor(c).astype(np.int64)
        t = c - base
        if a["method"] == "linear":
            ws, offs = [1 - t, t], [0, 1]
        else:
            A = a["cubic_alpha"]  # noqa: N806
            far = lambda d: ((A * d - 5 * A) * d + 8 * A) * d - 4 * A  # noqa: E731
            near = lambda d: ((A + 2) * d - (A + 3)) * d * d + 1  # noqa: E731
            ws, offs = [far(t + 1), near(t), near(1 - t), far(2 - t)], [-1, 0, 1, 2]
        if a["cubic_exclude"]:
            ws = [np.where((base + o >= 0) & (base + o <= n_in - 1), w, 0.0)
                  for w, o in zip(ws, offs)]
            total = sum(ws)
            ws = [w / total for w in ws]
        out = sum(w * xm[..., clamp(base + o)] for w, o in zip(ws, offs))
    if mode == "tf_crop_and_resize":
        out = np.where((c >= 0) & (c <= n_in - 1), out, a["extrapolation_value"])
    return np.moveaxis(out, -1, axis)


@def_numpy("relax.image.resize2d")
def _numpy_resize2d(x: np.ndarray, **a: Any) -> np.ndarray:
    out = x
    for axis, k in ((3, 1), (2, 0)):
        out = _np_axis(out, axis, a["size"][k], a, k)
    if x.dtype.kind in "iu" and a["method"] != "nearest":
        out = np.round(out)
    return out.astype(x.dtype)


# ---- grid_sample ---------------------------------------------------------------------------------

_GRID_METHODS = {"nearest": "nearest", "bilinear": "bilinear", "linear": "bilinear",
                 "bicubic": "bicubic", "cubic": "bicubic"}


def grid_sample(data: Expr, grid: Expr, method: str = "bilinear", layout: str = "NCHW",
                padding_mode: str = "zeros", align_corners: bool = False) -> Call:
    """NCHW ``data`` sampled at an ``(N, OH, OW, 2)`` grid of normalised ``(x, y)``:
    "nearest", "bilinear" or "bicubic"; outside the image "zeros", "border" or
    "reflection"."""
    from workbench.topi.grid_sample import PADDING_MODES
    if layout != "NCHW":
        raise ValueError(f"grid_sample: only the NCHW layout is supported, got {layout!r}")
    if method not in _GRID_METHODS:
        raise ValueError(f"grid_sample: method must be one of {sorted(_GRID_METHODS)}, got "
                         f"{method!r}")
    if padding_mode not in PADDING_MODES:
        raise ValueError(f"grid_sample: padding_mode must be one of {PADDING_MODES}, got "
                         f"{padding_mode!r}")
    return make_call("relax.image.grid_sample", (data, grid),
                     {"method": _GRID_METHODS[method], "layout": layout,
                      "padding_mode": padding_mode, "align_corners": bool(align_corners)})


@def_infer("relax.image.grid_sample")
def _infer_grid_sample(call: Call, ctx: Any) -> StructInfo:
    x, g = I.tensor_arg(call, 0, "data"), I.tensor_arg(call, 1, "grid")
    if x.ndim not in (-1, 4) or g.ndim not in (-1, 4):
        raise I.error(call, f"data must be 4-d (NCHW) and grid (N, OH, OW, 2), got "
                            f"{I.dims_text(x.values)} and {I.dims_text(g.values)}")
    if x.shape is None or g.shape is None:
        return TensorStructInfo(None, x.dtype, 4)
    if I.const_int(g.values[3]) not in (None, 2):
        raise I.error(call, f"grid's last dimension must be 2, got {I.dims_text(g.values)}")
    return TensorStructInfo((x.values[0], x.values[1], g.values[1], g.values[2]), x.dtype)


@def_legalize("relax.image.grid_sample")
def _legalize_grid_sample(bb: Any, call: Call) -> Expr:
    from workbench.topi.grid_sample import grid_sample as te_grid_sample
    a = call.attrs
    return bb.call_te(te_grid_sample, call.args[0], call.args[1], a["method"],
                      a["padding_mode"], a["align_corners"], primfunc_name_hint="grid_sample")


def _np_reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    span = hi - lo
    if span <= 0:
        return np.full_like(x, lo)
    out = x.copy()
    for mask, dx, near, far, sign in ((x < lo, lo - x, lo, hi, 1), (x > hi, x - hi, hi, lo, -1)):
        n = np.floor(dx / span)
        r = dx - n * span
        out = np.where(mask, np.where(n % 2 == 0, near + sign * r, far - sign * r), out)
    return out


@def_numpy("relax.image.grid_sample")
def _numpy_grid_sample(x: np.ndarray, grid: np.ndarray, method: str, padding_mode: str,
                       align_corners: bool, **_: Any) -> np.ndarray:
    n_, c_, h, w = x.shape
    sizes = (h, w)
    borders = [(0.0, s - 1.0) if align_corners else (-0.5, s - 0.5) for s in sizes]

    def coordinate(g: np.ndarray, axis: int) -> np.ndarray:
        s = sizes[axis]
        c = (g + 1) / 2 * (s - 1) if align_corners else ((g + 1) * s - 1) / 2
        if method == "nearest":
            c = np.rint(c)
        if method == "bicubic":
            return c
        lo, hi = borders[axis]
        outside = (c < lo) | (c > hi)
        if padding_mode == "border":
            c = np.where(outside, np.clip(c, 0, s - 1), c)
        elif padding_mode == "reflection":
            c = np.where(outside, _np_reflect(c, lo, hi), c)
        return c

    gx = coordinate(grid[..., 0].astype(np.float64), 1)   # (N, OH, OW)
    gy = coordinate(grid[..., 1].astype(np.float64), 0)
    batch = np.arange(n_)[:, None, None]

    def pixel(ky: np.ndarray, kx: np.ndarray) -> np.ndarray:
        keep = np.ones(ky.shape, bool)
        idx = []
        for k, axis in ((ky, 0), (kx, 1)):
            s = sizes[axis]
            if padding_mode == "zeros":
                keep &= (k >= 0) & (k < s)
            elif padding_mode == "reflection":
                k = np.trunc(_np_reflect(k.astype(np.float64), *borders[axis])).astype(np.int64)
            idx.append(np.clip(k, 0, s - 1))
        v = x[batch, :, idx[0], idx[1]]                     # (N, OH, OW, C)
        return np.where(keep[..., None], v, 0.0)

    if method == "nearest":
        out = pixel(gy.astype(np.int64), gx.astype(np.int64))
    else:
        y0, x0 = np.floor(gy), np.floor(gx)
        ty, tx = gy - y0, gx - x0
        if method == "bilinear":
            wy, wx, offs = [1 - ty, ty], [1 - tx, tx], [0, 1]
        else:
            A = -0.75  # noqa: N806
            far = lambda d: ((A * d - 5 * A) * d + 8 * A) * d - 4 * A  # noqa: E731
            near = lambda d: ((A + 2) * d - (A + 3)) * d * d + 1  # noqa: E731
            wy = [far(ty + 1), near(ty), near(1 - ty), far(2 - ty)]
            wx = [far(tx + 1), near(tx), near(1 - tx), far(2 - tx)]
            offs = [-1, 0, 1, 2]
        out = 0.0
        for a, oa in zip(wy, offs):
            for b, ob in zip(wx, offs):
                out = out + (a * b)[..., None] * pixel(y0.astype(np.int64) + oa,
                                                       x0.astype(np.int64) + ob)
    return np.moveaxis(np.asarray(out), -1, 1).astype(x.dtype)


__all__ = ["resize2d", "grid_sample"]
