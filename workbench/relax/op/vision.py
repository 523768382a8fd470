"""Vision ops (``relax.op.vision``): ``roi_align`` and ``roi_pool`` on NCHW data, and
``all_class_non_max_suppression`` (TVM's names; the kernels are in :mod:`workbench.topi.roi`
and :mod:`workbench.topi.nms`)."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo, TupleStructInfo
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


# ---- non-maximum suppression ---------------------------------------------------------------------

def all_class_non_max_suppression(boxes: Expr, scores: Expr, max_output_boxes_per_class: Expr,
                                  iou_threshold: Expr, score_threshold: Expr,
                                  output_format: str = "onnx", center_point_box: int = 0,
                                  max_keep: int | None = None) -> Call:
    """Greedy non-maximum suppression of every class of every image (TVM's name, ONNX's
    ``NonMaxSuppression`` rule): ``boxes`` (B, N, 4) float32, ``scores`` (B, C, N) float32, the
    thresholds (1,) tensors (int64, float32, float32; a ``score_threshold`` of -inf keeps
    every score). ``center_point_box``: 0 for ``[y1, x1, y2, x2]`` (corners in either order),
    1 for ``[x_center, y_center, width, height]``.

    Returns the tuple ``(selected, count)``: ``selected`` (B * C * K, 3) int64 rows ``(batch,
    class, box)`` in image, class and selection order, of which the first ``count`` ((1,)
    int64) are valid (the rest are zeros); ``K`` is ``max_keep`` (a bound on what
    ``max_output_boxes_per_class`` can be at run time; default N)."""
    if output_format != "onnx":
        raise ValueError(f"all_class_non_max_suppression: only output_format='onnx' is "
                         f"supported, got {output_format!r}")
    if center_point_box not in (0, 1):
        raise ValueError(f"all_class_non_max_suppression: center_point_box must be 0 or 1, "
                         f"got {center_point_box!r}")
    if max_keep is not None and (not isinstance(max_keep, int) or max_keep < 0):
        raise ValueError(f"all_class_non_max_suppression: max_keep must be a non-negative "
                         f"int or None, got {max_keep!r}")
    return make_call("relax.vision.all_class_non_max_suppression",
                     (boxes, scores, max_output_boxes_per_class, iou_threshold,
                      score_threshold),
                     {"output_format": output_format, "center_point_box": int(center_point_box),
                      "max_keep": max_keep})


def _nms_dims(call: Call) -> tuple[Any, Any, Any]:
    """``(B, C, N)`` of a non-maximum suppression call (checked), or None when not known."""
    boxes, scores = I.tensor_arg(call, 0, "boxes"), I.tensor_arg(call, 1, "scores")
    for i, name in ((2, "max_output_boxes_per_class"), (3, "iou_threshold"),
                    (4, "score_threshold")):
        si = I.tensor_arg(call, i, name)
        if si.shape is not None and (len(si.values) != 1 or I.const_int(si.values[0]) != 1):
            raise I.error(call, f"{name} must be a (1,) tensor, got {I.dims_text(si.values)}")
    if boxes.shape is None or scores.shape is None:
        return None
    if len(boxes.values) != 3 or I.const_int(boxes.values[2]) not in (None, 4):
        raise I.error(call, f"boxes must be (batch, boxes, 4), got {I.dims_text(boxes.values)}")
    if len(scores.values) != 3:
        raise I.error(call, f"scores must be (batch, classes, boxes), got "
                            f"{I.dims_text(scores.values)}")
    (b, n, _), (sb, c, sn) = boxes.values, scores.values
    for x, y, what in ((b, sb, "batch sizes"), (n, sn, "box counts")):
        if I.prove_equal(x, y) is False:
            raise I.error(call, f"boxes {I.dims_text(boxes.values)} and scores "
                                f"{I.dims_text(scores.values)} differ in their {what}")
    return b, c, n


def _nms_keep(n: Any, max_keep: int | None) -> Any:
    if max_keep is None:
        return n
    cn = I.const_int(n)
    return IntImm("int64", max_keep if cn is None else min(max_keep, cn))


@def_infer("relax.vision.all_class_non_max_suppression")
def _infer_nms(call: Call, ctx: Any) -> StructInfo:
    dims = _nms_dims(call)
    count = TensorStructInfo((IntImm("int64", 1),), "int64")
    if dims is None:
        return TupleStructInfo((TensorStructInfo(None, "int64", 2), count))
    b, c, n = dims
    rows = b * c * _nms_keep(n, call.attrs["max_keep"])
    from workbench.tir.arith.analyzer import Analyzer
    rows = Analyzer().simplify(rows)
    return TupleStructInfo((TensorStructInfo((rows, IntImm("int64", 3)), "int64"), count))


@def_legalize("relax.vision.all_class_non_max_suppression")
def _legalize_nms(bb: Any, call: Call) -> Expr:
    """The serial selection kernel (:mod:`workbench.topi.nms`; it orders each class's
    candidates itself, in a heap), opaque to fusion. Static shapes only."""
    from workbench.relax.op.base import call_tir
    from workbench.relax.transform.annotate_tir_op_pattern import OpPatternKind
    from workbench.topi.nms import all_class_non_max_suppression as nms_kernel
    dims = _nms_dims(call)
    static = None if dims is None else [I.const_int(d) for d in dims]
    if static is None or None in static:
        raise I.error(call, "needs boxes and scores of static shape")
    b, c, n = static
    keep = I.const_int(_nms_keep(IntImm("int64", n), call.attrs["max_keep"]))
    if b * c * keep == 0:  # nothing can be selected: no kernel
        from workbench.relax.expr import Tuple, const
        return Tuple((const(np.zeros((0, 3), "int64")), const(np.zeros((1,), "int64"))))
    func = nms_kernel(b, c, n, keep, call.attrs["center_point_box"]).with_attr(
        "op_pattern", int(OpPatternKind.kOpaque))
    gv = bb.add_func(func, "all_class_non_max_suppression")
    return call_tir(gv, list(call.args), list(call.struct_info.fields))


@def_numpy("relax.vision.all_class_non_max_suppression")
def _numpy_nms(boxes: np.ndarray, scores: np.ndarray, max_out: np.ndarray, iou: np.ndarray,
               score_threshold: np.ndarray, center_point_box: int = 0,
               max_keep: int | None = None, **_: Any) -> tuple:
    b_n, c_n, n = scores.shape
    keep = n if max_keep is None else min(max_keep, n)
    limit = min(max(int(max_out.reshape(-1)[0]), 0), keep)
    thr, st = np.float32(iou.reshape(-1)[0]), np.float32(score_threshold.reshape(-1)[0])
    rows = []
    for b in range(b_n):
        corners = [_np_corners(boxes[b, i].astype(np.float32), center_point_box)
                   for i in range(n)]
        for c in range(c_n):
            kept: list[int] = []
            for i in np.argsort(-scores[b, c], kind="stable"):
                if len(kept) >= limit:
                    break
                if not (scores[b, c, i] > st or st == -np.inf):
                    continue
                if not any(_np_suppresses(corners[k], corners[i], thr) for k in kept):
                    kept.append(int(i))
            rows += [(b, c, k) for k in kept]
    out = np.zeros((b_n * c_n * keep, 3), "int64")
    out[:len(rows)] = np.asarray(rows, "int64").reshape(-1, 3)
    return out, np.asarray([len(rows)], "int64")


def _np_corners(v: np.ndarray, center: int) -> tuple:
    if center == 0:
        return min(v[1], v[3]), max(v[1], v[3]), min(v[0], v[2]), max(v[0], v[2])
    hw, hh = v[2] / np.float32(2), v[3] / np.float32(2)
    return v[0] - hw, v[0] + hw, v[1] - hh, v[1] + hh


def _np_suppresses(a: tuple, b: tuple, thr: np.float32) -> bool:
    ix0, ix1, iy0, iy1 = max(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), min(a[3], b[3])
    if ix1 <= ix0 or iy1 <= iy0:
        return False
    inter = (ix1 - ix0) * (iy1 - iy0)
    area_a, area_b = (a[1] - a[0]) * (a[3] - a[2]), (b[1] - b[0]) * (b[3] - b[2])
    union = area_a + area_b - inter
    if inter <= 0 or area_a <= 0 or area_b <= 0 or union <= 0:
        return False
    return bool(inter / union > thr)


__all__ = ["roi_align", "roi_pool", "all_class_non_max_suppression"]
