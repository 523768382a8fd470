"""Resize over 1, 2 and 3 spatial dims against onnxruntime: nearest (every rounding mode),
linear and cubic (coefficient, exclude_outside), every coordinate transformation mode, scales
and sizes (keep_aspect_ratio_policy, axes); and an opset-9 Upsample / opset-10 Resize model
converted on import."""
from __future__ import annotations

import numpy as np
import pytest

import frontend_zoo as zoo  # noqa: F401  (skips the module without the models extra)

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402
from onnx_graph import F32, Graph, check, ort_run, rand  # noqa: E402

import workbench as wb  # noqa: E402
from workbench import relax  # noqa: E402
from workbench.relax.frontend.onnx import from_onnx  # noqa: E402

pytestmark = pytest.mark.slow

_MODES = ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners",
          "asymmetric")


def test_resize_family():
    g = Graph()
    f32 = lambda v: g.const(np.asarray(v, "float32"))  # noqa: E731
    i64 = lambda v: g.const(np.asarray(v, "int64"))  # noqa: E731
    up, down = f32([1, 1, 2, 1.5]), f32([1, 1, 0.6, 0.5])
    # Every coordinate mode with linear and cubic (up and down alternately), every nearest
    # rounding.
    for k, ctm in enumerate(_MODES):
        g("Resize", "x", "", (up, down)[k % 2], mode="linear",
          coordinate_transformation_mode=ctm)
        g("Resize", "x", "", (down, up)[k % 2], mode="cubic",
          coordinate_transformation_mode=ctm)
    for k, nearest in enumerate(("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")):
        g("Resize", "x", "", (up, down)[k % 2], mode="nearest", nearest_mode=nearest,
          coordinate_transformation_mode=_MODES[k])
    g("Resize", "x", "", "", i64([1, 2, 7, 4]), mode="cubic", cubic_coeff_a=-0.5,
      exclude_outside=1)
    g("Resize", "x", "", "", i64([8, 8]), axes=[2, 3], mode="linear",
      keep_aspect_ratio_policy="not_larger")
    g("Resize", "x", "", "", i64([8, 8]), axes=[2, 3], mode="nearest",
      keep_aspect_ratio_policy="not_smaller")
    g("Resize", "x1", "", f32([1, 1, 2.5]), mode="linear")
    g("Resize", "x1", "", "", i64([1, 2, 4]), mode="linear",
      coordinate_transformation_mode="align_corners")
    g("Resize", "x3", "", f32([1, 1, 2, 1.5, 0.8]), mode="linear")
    g("Resize", "x3", "", f32([1, 1, 1.5, 2, 2]), mode="nearest")
    # (onnxruntime has cubic only for 2 resized dims.)
    g("Resize", "x3", "", "", i64([1, 2, 2, 3, 7]), mode="linear",
      coordinate_transformation_mode="pytorch_half_pixel")
    model = g.model([helper.make_tensor_value_info("x", F32, [1, 2, 5, 6]),
                     helper.make_tensor_value_info("x1", F32, [1, 2, 7]),
                     helper.make_tensor_value_info("x3", F32, [1, 2, 3, 4, 5])], opset=19)
    check(model, {"x": rand(1, 2, 5, 6, seed=1), "x1": rand(1, 2, 7, seed=2),
                  "x3": rand(1, 2, 3, 4, 5, seed=3)})


@pytest.mark.parametrize("opset, op, mode", [(9, "Upsample", "nearest"),
                                             (9, "Upsample", "linear"),
                                             (10, "Resize", "nearest"),
                                             (10, "Resize", "linear")])
def test_old_upsample_and_resize_are_converted(opset, op, mode):
    g = Graph()
    g(op, "x", g.const(np.asarray([1, 1, 2, 3], "float32")), mode=mode)
    model = g.model([helper.make_tensor_value_info("x", F32, [1, 2, 3, 4])], opset=opset)
    check(model, {"x": rand(1, 2, 3, 4, seed=4)})


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_tf_crop_and_resize_matches_onnx_reference(mode):
    """onnxruntime departs from the ONNX spec here (no extrapolation outside the input):
    ONNX's reference evaluator is the reference."""
    from onnx.reference import ReferenceEvaluator
    g = Graph()
    g("Resize", "x", g.const(np.asarray([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.2], "float32")), "",
      g.const(np.asarray([1, 2, 4, 6], "int64")), mode=mode,
      coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-3.0)
    model = g.model([helper.make_tensor_value_info("x", F32, [1, 2, 5, 6])], opset=19)
    x = rand(1, 2, 5, 6, seed=1)
    got = relax.VirtualMachine(relax.build(from_onnx(model), "llvm"), wb.cpu())["main"](
        wb.nd.array(x)).numpy()
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    assert (want == -3.0).any()  # the region reaches past the input
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_read_directly(mode):
    """An Upsample node read without conversion (the model's opset overridden to 13)."""
    g = Graph()
    g("Upsample", "x", g.const(np.asarray([1, 1, 2, 3], "float32")), mode=mode)
    model = g.model([helper.make_tensor_value_info("x", F32, [1, 2, 3, 4])], opset=9)
    x = rand(1, 2, 3, 4, seed=5)
    exe = relax.build(from_onnx(model, opset=13), "llvm")
    got = relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x)).numpy()
    np.testing.assert_allclose(got, ort_run(model, {"x": x})[0], rtol=1e-5, atol=1e-5)


def test_grid_sample_and_affine_grid():
    g = Graph()
    grid = g.const(rand(1, 3, 4, 2, seed=6) * 0.8)
    for mode, pad, align in (("linear", "zeros", 0), ("linear", "reflection", 1),
                             ("nearest", "border", 0), ("nearest", "reflection", 0),
                             ("cubic", "border", 1), ("cubic", "reflection", 0)):
        g("GridSample", "x", grid, mode=mode, padding_mode=pad, align_corners=align)
    theta = g.const(np.asarray([[[0.9, -0.2, 0.1], [0.3, 1.1, -0.2]]], "float32"))
    for align in (0, 1):
        g("AffineGrid", theta, g.const([1, 2, 4, 7], "int64"), align_corners=align)
    g("AffineGrid", g.const(rand(2, 3, 4, seed=7)), g.const([2, 1, 2, 3, 4], "int64"))
    model = g.model([helper.make_tensor_value_info("x", F32, [1, 2, 5, 6])], opset=20)
    check(model, {"x": rand(1, 2, 5, 6, seed=1)})
