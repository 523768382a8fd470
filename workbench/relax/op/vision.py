"""Vision ops (``relax.op.vision``): ``roi_align`` and ``roi_pool`` on NCHW data (TVM's
names; the kernels and their rules are in :mod:`workbench.topi.roi`)."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo
from workbench.tir.expr import IntImm


def roi_align(data: Expr, rois: Expr, batch_indices: Expr, pooled_size: Sequence[int],
              spatial_scale: float = 1.0, sample_ratio: int = 0, layout: str = "NCHW",
              mode: str = "avg", aligned: bool = True,
              max_grid: Sequence[int] | None = None) -> Call:
    """Bins of the boxes ``rois`` ``(num_rois, 4)`` of images ``batch_indices``, each the
    average (or max) of bilinear samples: ``(num_rois, C, PH, PW)``. ``aligned``: the half-pixel
    shift; ``sample_ratio`` 0 sizes each box's sub-grid by its bins, up to ``max_grid``."""
    if layout != "NCHW":
        raise ValueError(f"roi_align: only the NCHW layout is supported, got {layout!r}")
    if mode not in ("avg", "max"):
        raise ValueError(f"roi_align: mode must be 'avg' or 'max', got {mode!r}")
    if sample_ratio <= 0 and max_grid is None:
        raise ValueError("roi_align: sample_ratio=0 needs max_grid (the largest sub-grid)")
    return make_call("relax.vision.roi_align", (data, rois, batch_indices),
                     {"pooled_size": tuple(int(p) for p in pooled_size),
                      "spatial_scale": float(spatial_scale), "sample_ratio": int(sample_ratio),
                      "layout": layout, "mode": mode, "aligned": bool(aligned),
                      "max_grid": None if max_grid is None else tuple(int(g) for g in max_grid)})


def roi_pool(data: Expr, rois: Expr, pooled_size: Sequence[int], spatial_scale: float = 1.0,
             layout: str = "NCHW") -> Call:
    """Caffe's max ROI pooling of boxes ``rois`` ``(num_rois, 5)`` = ``(batch index, x1, y1,
    x2, y2)``: ``(num_rois, C, PH, PW)``."""
    if layout != "NCHW":
        raise ValueError(f"roi_pool: only the NCHW layout is supported, got {layout!r}")
    return make_call("relax.vision.roi_pool", (data, rois),
                     {"pooled_size": tuple(int(p) for p in pooled_size),
                      "spatial_scale": float(spatial_scale), "layout": layout})


def _infer_roi(call: Call, ctx: Any) -> StructInfo:
    x, rois = I.tensor_arg(call, 0, "data"), I.tensor_arg(call, 1, "rois")
    if x.ndim not in (-1, 4):
        raise I.error(call, f"data must be 4-d (NCHW), got {I.dims_text(x.values)}")
    width = 4 if call.op.name.endswith("roi_align") else 5
    if rois.shape is not None and (len(rois.values) != 2 or
                                   I.const_int(rois.values[1]) not in (None, width)):
        raise I.error(call, f"rois must be (num_rois, {width}), got {I.dims_text(rois.values)}")
    if x.shape is None or rois.shape is None:
        return TensorStructInfo(None, x.dtype, 4)
    ph, pw = call.attrs["pooled_size"]
    return TensorStructInfo((rois.values[0], x.values[1], IntImm("int64", ph),
                             IntImm("int64", pw)), x.dtype)


def_infer("relax.vision.roi_align")(_infer_roi)
def_infer("relax.vision.roi_pool")(_infer_roi)


@def_legalize("relax.vision.roi_align")
def _legalize_roi_align(bb: Any, call: Call) -> Expr:
    from workbench.topi.roi import roi_align as te_roi_align
    a = call.attrs
    return bb.call_te(te_roi_align, *call.args, a["pooled_size"], a["spatial_scale"],
                      a["sample_ratio"], a["mode"], a["aligned"], a["max_grid"],
                      primfunc_name_hint="roi_align")


@def_legalize("relax.vision.roi_pool")
def _legalize_roi_pool(bb: Any, call: Call) -> Expr:
    from workbench.topi.roi import roi_pool as te_roi_pool
    a = call.attrs
    return bb.call_te(te_roi_pool, *call.args, a["pooled_size"], a["spatial_scale"],
                      primfunc_name_hint="roi_pool")


# ---- numpy ---------------------------------------------------------------------------------------

def _np_bilinear(img: np.ndarray, y: float, x: float) -> np.ndarray:
    """The four weighted corners (C, 4) at (y, x), or zeros outside [-1, size]."""
    h, w = img.shape[1:]
    if y < -1 or y > h or x < -1 or x > w:
        return np.zeros((img.shape[0], 4))
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    hy, hx = 1 - ly, 1 - lx
    return np.stack([hy * hx * img[:, y0, x0], hy * lx * img[:, y0, x1],
                     ly * hx * img[:, y1, x0], ly * lx * img[:, y1, x1]], -1)


@def_numpy("relax.vision.roi_align")
def _numpy_roi_align(x: np.ndarray, rois: np.ndarray, batch: np.ndarray, pooled_size: tuple,
                     spatial_scale: float, sample_ratio: int, mode: str, aligned: bool,
                     **_: Any) -> np.ndarray:
    ph_n, pw_n = pooled_size
    out = np.zeros((rois.shape[0], x.shape[1], ph_n, pw_n))
    offset = 0.5 if aligned else 0.0
    for r in range(rois.shape[0]):
        x1, y1, x2, y2 = (float(v) * spatial_scale - offset for v in rois[r])
        rw, rh = x2 - x1, y2 - y1
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / ph_n, rw / pw_n
        gy = sample_ratio if sample_ratio > 0 else math.ceil(bh)
        gx = sample_ratio if sample_ratio > 0 else math.ceil(bw)
        img = x[int(batch[r])].astype(np.float64)
        for i in range(ph_n):
            for j in range(pw_n):
                samples = [_np_bilinear(img, y1 + i * bh + (iy + 0.5) * bh / gy,
                                        x1 + j * bw + (ix + 0.5) * bw / gx)
                           for iy in range(gy) for ix in range(gx)]
                if mode == "avg":
                    out[r, :, i, j] = sum(s.sum(-1) for s in samples) / max(gy * gx, 1)
                elif samples:
                    out[r, :, i, j] = np.max([s.max(-1) for s in samples], axis=0)
    return out.astype(x.dtype)


@def_numpy("relax.vision.roi_pool")
def _numpy_roi_pool(x: np.ndarray, rois: np.ndarray, pooled_size: tuple, spatial_scale: float,
                    **_: Any) -> np.ndarray:
    ph_n, pw_n = pooled_size
    h, w = x.shape[2:]
    out = np.zeros((rois.shape[0], x.shape[1], ph_n, pw_n), x.dtype)
    half_away = lambda v: math.floor(v + 0.5) if v >= 0 else math.ceil(v - 0.5)  # noqa: E731
    for r in range(rois.shape[0]):
        n = int(rois[r, 0])
        x1, y1, x2, y2 = (half_away(float(v) * spatial_scale) for v in rois[r, 1:])
        rh, rw = max(y2 - y1 + 1, 1), max(x2 - x1 + 1, 1)
        for i in range(ph_n):
            h0 = min(max(math.floor(i * rh / ph_n) + y1, 0), h)
            h1 = min(max(math.ceil((i + 1) * rh / ph_n) + y1, 0), h)
            for j in range(pw_n):
                w0 = min(max(math.floor(j * rw / pw_n) + x1, 0), w)
                w1 = min(max(math.ceil((j + 1) * rw / pw_n) + x1, 0), w)
                if h1 > h0 and w1 > w0:
                    out[r, :, i, j] = x[n, :, h0:h1, w0:w1].max(axis=(1, 2))
    return out


__all__ = ["roi_align", "roi_pool"]
