"""ONNX converters: region-of-interest pooling (RoiAlign, MaxRoiPool) on
``relax.vision.roi_align`` / ``roi_pool``."""
from __future__ import annotations

import math
from typing import Any

from workbench.relax import op as R
from workbench.relax.expr import Expr
from workbench.relax.frontend.onnx._registry import converter


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


__all__: list[str] = []
