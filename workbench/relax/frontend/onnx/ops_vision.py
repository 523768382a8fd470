"""ONNX converters: region-of-interest pooling (RoiAlign, MaxRoiPool) on
``relax.vision.roi_align`` / ``roi_pool``, and NonMaxSuppression on
``relax.vision.all_class_non_max_suppression``."""
from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Constant, Expr, TupleGetItem
from workbench.relax.frontend.onnx._registry import converter
from workbench.relax.struct_info import ShapeStructInfo
from workbench.tir.expr import IntImm, SizeVar


def _max_grid(imp: Any, rois: Any, attrs: dict, pooled: tuple[int, int]) -> tuple | None:
    """The largest adaptive sub-grid (``sampling_ratio=0``) over boxes known at import."""
    if attrs.get("sampling_ratio", 0) > 0:
        return None
    known = imp.known(rois)
    if known is None:
        raise NotImplementedError("RoiAlign with sampling_ratio=0 (a sub-grid per box) on "
                                  "boxes computed at run time; give a sampling_ratio")
    scale = attrs.get("spatial_scale", 1.0)
    aligned = attrs.get("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    gy = gx = 1
    for x1, y1, x2, y2 in known.reshape(-1, 4).astype(float):
        h, w = (y2 - y1) * scale, (x2 - x1) * scale
        if not aligned:
            h, w = max(h, 1.0), max(w, 1.0)
        gy, gx = max(gy, math.ceil(h / pooled[0])), max(gx, math.ceil(w / pooled[1]))
    return gy, gx


@converter("RoiAlign")
def _roi_align(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x, rois = imp.expr(inputs[0]), imp.expr(inputs[1])
    batch = imp.expr(inputs[2])
    pooled = (attrs.get("output_height", 1), attrs.get("output_width", 1))
    aligned = attrs.get("coordinate_transformation_mode", "half_pixel") == "half_pixel"
    if imp.opset < 16:
        aligned = False  # opset 10's RoiAlign has no half-pixel shift
    return R.vision.roi_align(x, rois, batch, pooled, attrs.get("spatial_scale", 1.0),
                              attrs.get("sampling_ratio", 0), mode=attrs.get("mode", "avg"),
                              aligned=aligned,
                              max_grid=_max_grid(imp, inputs[1], attrs, pooled))


@converter("MaxRoiPool")
def _max_roi_pool(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x, rois = imp.expr(inputs[0]), imp.expr(inputs[1])
    return R.vision.roi_pool(x, rois, attrs["pooled_shape"], attrs.get("spatial_scale", 1.0))


# ---- NonMaxSuppression ---------------------------------------------------------------------------

#: NonMaxSuppression's optional scalar inputs: (position, dtype, value when omitted). A
#: missing score threshold keeps every score (-inf: the op's "no threshold").
_NMS_SCALARS = ((2, "int64", 0), (3, "float32", 0.0), (4, "float32", -np.inf))


def _nms_scalars(imp: Any, inputs: list) -> list[tuple[Any, Any]]:
    """``(value as a (1,) tensor expression, the number when known)`` for each scalar."""
    out = []
    for i, dtype, default in _NMS_SCALARS:
        v = inputs[i] if len(inputs) > i else None
        known = np.asarray([default], dtype) if v is None else imp.known(v)
        if known is not None:
            if known.size != 1:
                raise ValueError(f"NonMaxSuppression: input {i} must hold one value, got "
                                 f"shape {known.shape}")
            known = known.reshape(1).astype(dtype)
            out.append((Constant(known), known[0]))
            continue
        e = imp.expr(v)
        e = imp.emit(R.reshape(e, [1]))
        if e.struct_info.dtype != dtype:
            e = imp.emit(R.astype(e, dtype))
        out.append((e, None))
    return out


def _nms_fold(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    from workbench.relax.op.vision import _numpy_nms
    scalars = [np.asarray([d], t) if len(inputs) <= i or inputs[i] is None else
               inputs[i].reshape(1).astype(t) for i, t, d in _NMS_SCALARS]
    out, count = _numpy_nms(inputs[0].astype("float32"), inputs[1].astype("float32"), *scalars,
                            center_point_box=attrs.get("center_point_box", 0))
    return out[:int(count[0])]


@converter("NonMaxSuppression", fold=_nms_fold)
def _non_max_suppression(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    """The op's padded selections and their count, then the first ``count`` rows: the output's
    length is a symbolic dim read from the count at run time."""
    (max_out, max_known), (iou, iou_known), (score, _) = _nms_scalars(imp, inputs)
    if iou_known is not None and not 0.0 <= float(iou_known) <= 1.0:
        raise ValueError(f"NonMaxSuppression: iou_threshold must be in [0, 1], got "
                         f"{float(iou_known)}")
    if max_known is not None and max_known <= 0:
        return np.zeros((0, 3), "int64")   # nothing is kept
    boxes, scores = (imp.expr(v) for v in inputs[:2])
    for name, x in (("boxes", boxes), ("scores", scores)):
        si = x.struct_info
        if si.shape is None or any(not isinstance(d, IntImm) for d in si.values):
            raise NotImplementedError(f"NonMaxSuppression on {name} of dynamic shape "
                                      f"{si}: the kernel needs static shapes")
    boxes, scores = (x if x.struct_info.dtype == "float32" else imp.emit(R.astype(x, "float32"))
                     for x in (boxes, scores))
    res = imp.emit(R.vision.all_class_non_max_suppression(
        boxes, scores, max_out, iou, score, center_point_box=attrs.get("center_point_box", 0),
        max_keep=None if max_known is None else int(max_known)))
    padded, count = imp.emit(TupleGetItem(res, 0)), imp.emit(TupleGetItem(res, 1))
    n = SizeVar(re.sub(r"[^0-9A-Za-z_]", "_", node.output[0]) + "_count", "int64")
    imp.bb.match_cast(imp.emit(R.tensor_to_shape(count)), ShapeStructInfo((n,)))
    return R.take(padded, imp.emit(R.arange(0, n)), axis=0)


__all__: list[str] = []
