"""RoiAlign (avg and max, both coordinate modes, fixed and adaptive sub-grids, boxes past the
image) and MaxRoiPool against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest

import frontend_zoo as zoo  # noqa: F401  (skips the module without the models extra)

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from onnx_graph import F32, Graph, check, rand  # noqa: E402

pytestmark = pytest.mark.slow

_BOXES = np.asarray([[0.5, 1.0, 6.0, 5.5], [2.0, 0.0, 9.5, 3.0], [-2.0, -1.0, 4.0, 11.0],
                     [3.0, 3.0, 3.5, 3.2]], "float32")


def test_roi_align_and_max_roi_pool():
    g = Graph()
    boxes, batch = g.const(_BOXES), g.const(np.asarray([0, 1, 1, 0], "int64"))
    g("RoiAlign", "x", boxes, batch, output_height=3, output_width=2, sampling_ratio=2)
    g("RoiAlign", "x", boxes, batch, mode="max", output_height=3, output_width=2,
      sampling_ratio=2)
    g("RoiAlign", "x", boxes, batch, coordinate_transformation_mode="output_half_pixel",
      output_height=2, output_width=3, spatial_scale=0.8)   # adaptive sub-grids
    g("RoiAlign", "x", "r", batch, output_height=2, output_width=2, sampling_ratio=3)
    with_batch = np.concatenate([np.asarray([[0], [1], [1], [0]], "float32"), _BOXES], 1)
    g("MaxRoiPool", "x", g.const(with_batch), pooled_shape=[3, 2], spatial_scale=0.5)
    model = g.model([helper.make_tensor_value_info("x", F32, [2, 3, 8, 10]),
                     helper.make_tensor_value_info("r", TensorProto.FLOAT, [4, 4])], opset=16)
    check(model, {"x": rand(2, 3, 8, 10, seed=1), "r": _BOXES[::-1].copy()})
