"""NonMaxSuppression against onnxruntime: both box encodings, corners in either order,
several images and classes, tied scores, IoUs exactly at the threshold, thresholds and
``max_output_boxes_per_class`` given at run time (0, 1, more than the boxes) or at import,
omitted inputs, an empty selection; opsets 10 and 11."""
from __future__ import annotations

import numpy as np
import pytest

import frontend_zoo as zoo  # noqa: F401  (skips the module without the models extra)

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from onnx_graph import F32, I64, ort_run  # noqa: E402

import workbench as wb  # noqa: E402
from workbench import relax  # noqa: E402
from workbench.relax.frontend.onnx import from_onnx  # noqa: E402

pytestmark = pytest.mark.slow

B, C, N = 2, 3, 24


def _model(inputs: list[str], inits: dict | None = None, opset: int = 11,
           center_point_box: int = 0, shapes: dict | None = None):
    """One NonMaxSuppression node; ``inputs`` name its inputs in order ("" omits one);
    ``inits`` holds the ones given as initializers."""
    inits = inits or {}
    shapes = {"boxes": [B, N, 4], "scores": [B, C, N], "max": [1], "iou": [1], "score": [1],
              **(shapes or {})}
    types = {"max": I64}
    graph_inputs = [helper.make_tensor_value_info(n, types.get(n, F32), shapes[n])
                    for n in inputs if n and n not in inits]
    node = helper.make_node("NonMaxSuppression", inputs, ["selected"],
                            center_point_box=center_point_box)
    graph = helper.make_graph(
        [node], "nms", graph_inputs,
        [helper.make_tensor_value_info("selected", TensorProto.INT64, [None, 3])],
        [onnx.numpy_helper.from_array(np.asarray(v), n) for n, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


def _corner_boxes(rng, batch=B, n=N, flip=True):
    """``[y1, x1, y2, x2]`` boxes in clusters (so that some overlap a lot), with each
    box's corners swapped at random when ``flip``."""
    centres = rng.uniform(0, 20, (batch, 4, 2))[:, rng.integers(0, 4, n)]
    yx = centres + rng.normal(0, 1.5, (batch, n, 2))
    hw = rng.uniform(1, 6, (batch, n, 2))
    boxes = np.concatenate([yx, yx + hw], -1)
    if flip:
        swap = rng.random((batch, n)) < 0.5
        boxes[swap] = boxes[swap][:, [2, 3, 0, 1]]
    return boxes.astype("float32")


def _scores(rng, levels=None, batch=B, classes=C, n=N):
    """Uniform scores; with ``levels``, only that many distinct values (many ties)."""
    s = rng.uniform(0, 1, (batch, classes, n))
    if levels:
        s = np.floor(s * levels) / levels
    return s.astype("float32")


def _run(model, feeds, vm=None):
    if vm is None:
        vm = relax.VirtualMachine(relax.build(from_onnx(model), "llvm"), wb.cpu())
    got = vm["main"](*[wb.nd.array(v) for v in feeds.values()]).numpy()
    want = ort_run(model, feeds)[0]
    assert got.dtype == want.dtype == np.int64
    np.testing.assert_array_equal(got, want)
    return vm, want


def _scalars(max_out, iou, score):
    return {"max": np.asarray([max_out], "int64"), "iou": np.asarray([iou], "float32"),
            "score": np.asarray([score], "float32")}


@pytest.mark.parametrize("center_point_box", [0, 1])
def test_nms_run_time_inputs_over_thresholds_and_limits(center_point_box):
    """One compile; max_output_boxes_per_class 0, 1, a few, more than N; IoU thresholds 0,
    0.3, 0.7, 1; score thresholds below, inside and above every score (empty output)."""
    model = _model(["boxes", "scores", "max", "iou", "score"],
                   center_point_box=center_point_box)
    rng = np.random.default_rng(center_point_box)
    vm, selected = None, []
    for max_out, iou, score, levels in [
            (3, 0.5, 0.0, None), (0, 0.5, 0.0, None), (1, 0.3, 0.2, 4), (N + 5, 0.7, 0.5, 3),
            (N + 5, 0.0, -1.0, None), (5, 1.0, 0.1, 2), (4, 0.5, 1.5, None)]:
        boxes = _corner_boxes(rng)
        if center_point_box:
            # [x_centre, y_centre, width, height]; some widths / heights negative
            lo, hi = boxes[..., :2], boxes[..., 2:]
            boxes = np.concatenate([(lo + hi)[..., ::-1] / 2, (hi - lo)[..., ::-1]], -1)
        feeds = {"boxes": boxes, "scores": _scores(rng, levels), **_scalars(max_out, iou, score)}
        vm, want = _run(model, feeds, vm)
        selected.append(len(want))
    # the cases are not vacuous: empty, small and large selections all occurred
    assert selected[1] == 0 and selected[-1] == 0
    assert min(selected[0], selected[2]) > 0 and selected[3] > 3 * B * C


def test_nms_many_boxes_and_ties():
    """257 boxes (a deep heap of an odd size) in a few clusters, scores of 7 levels (long runs
    of ties), every box kept that survives; and a limit of 50."""
    n = 257
    model = _model(["boxes", "scores", "max", "iou", "score"], shapes={
        "boxes": [1, n, 4], "scores": [1, 2, n]})
    rng = np.random.default_rng(11)
    vm = None
    for max_out, iou in [(n, 0.45), (50, 0.2)]:
        feeds = {"boxes": _corner_boxes(rng, 1, n), "scores": _scores(rng, 7, 1, 2, n),
                 **_scalars(max_out, iou, 0.1)}
        vm, want = _run(model, feeds, vm)
        assert 20 < len(want) < 2 * n


def test_nms_ties_and_ious_at_the_threshold():
    """Integer boxes whose IoUs are exactly 1/3, 1/2 and 1 against equal thresholds (kept:
    only an IoU above the threshold suppresses), zero-area boxes, scores all equal (the lower
    index first) and scores equal to the score threshold (dropped)."""
    boxes = np.asarray([[[0, 0, 2, 2], [0, 1, 2, 3], [2, 2, 0, 0], [0, 0, 2, 1], [5, 5, 5, 7],
                         [5, 5, 5, 7], [9, 9, 10, 10], [10, 10, 9, 9]]], "float32")
    model = _model(["boxes", "scores", "max", "iou", "score"], shapes={
        "boxes": [1, 8, 4], "scores": [1, 2, 8]})
    vm = None
    for scores, iou, score in [(np.full((1, 2, 8), 0.5), 0.5, 0.0),
                               (np.full((1, 2, 8), 0.5), 1 / 3, 0.0),
                               (np.full((1, 2, 8), 0.5), 0.0, 0.0),
                               (np.tile(np.arange(8)[::-1] / 8, (1, 2, 1)), 0.5, 0.5),
                               (np.tile(np.arange(8) % 3 / 4, (1, 2, 1)), 1.0, 0.0)]:
        feeds = {"boxes": boxes, "scores": scores.astype("float32"), **_scalars(8, iou, score)}
        vm, _ = _run(model, feeds, vm)


def test_nms_inputs_known_at_import_and_omitted():
    """max_output_boxes_per_class as an initializer (the padded output sized by it, also when
    larger than N), the score threshold omitted (every box a candidate), the IoU threshold
    omitted (0), all three omitted (no output), max 0 (no output); opset 10."""
    rng = np.random.default_rng(7)
    feeds = {"boxes": _corner_boxes(rng), "scores": _scores(rng, 5)}
    for inputs, inits, opset in [
            (["boxes", "scores", "max", "iou"], {"max": np.asarray([2], "int64"),
                                                 "iou": np.asarray([0.4], "float32")}, 11),
            (["boxes", "scores", "max", "iou", "score"],
             {"max": np.asarray([N + 10], "int64"), "iou": np.asarray([0.6], "float32"),
              "score": np.asarray([0.3], "float32")}, 10),
            (["boxes", "scores", "max"], {"max": np.asarray([4], "int64")}, 10),
            (["boxes", "scores", "max", "", "score"], {"max": np.asarray([3], "int64"),
                                                        "score": np.asarray(0.5, "float32")}, 11),
            (["boxes", "scores"], {}, 11),
            (["boxes", "scores", "max"], {"max": np.asarray([0], "int64")}, 11)]:
        _run(_model(inputs, inits, opset), feeds)


def test_nms_computed_at_import():
    """Boxes and scores that are initializers: the selection is computed at import time (by
    the op's numpy rule) and matches onnxruntime."""
    rng = np.random.default_rng(3)
    inits = {"boxes": _corner_boxes(rng), "scores": _scores(rng, 4),
             "max": np.asarray([3], "int64"), "iou": np.asarray([0.3], "float32")}
    model = _model(["boxes", "scores", "max", "iou"], inits)
    mod = from_onnx(model)
    assert "all_class_non_max_suppression" not in str(mod)
    _run(model, {})


def test_nms_iou_threshold_out_of_range_is_refused():
    model = _model(["boxes", "scores", "max", "iou"], {"max": np.asarray([2], "int64"),
                                                       "iou": np.asarray([1.5], "float32")})
    with pytest.raises(Exception, match=r"iou_threshold must be in \[0, 1\], got 1.5"):
        from_onnx(model)


def test_nms_output_feeds_further_ops():
    """A detector's post-processing: scores from a Sigmoid, NonMaxSuppression, then the kept
    boxes gathered by the selections' box column and their scores summed per image -- ops on
    the selection's run-time length."""
    from onnx_graph import Graph
    g = Graph()
    scores = g("Sigmoid", "logits", out=False)
    sel = g("NonMaxSuppression", "boxes", scores, g.const(np.asarray([4], "int64")),
            g.const(np.asarray([0.4], "float32")), g.const(np.asarray([0.3], "float32")))
    box_col = g("Gather", sel, g.const(np.asarray(2, "int64")), axis=1)
    flat = g("Squeeze", "boxes", g.const(np.asarray([0], "int64")), out=False)
    g("Gather", flat, box_col, axis=0)
    g("ReduceSum", g("Cast", box_col, to=TensorProto.FLOAT, out=False), keepdims=1)
    model = g.model([helper.make_tensor_value_info("boxes", F32, [1, N, 4]),
                     helper.make_tensor_value_info("logits", F32, [1, C, N])], opset=13)
    rng = np.random.default_rng(5)
    feeds = {"boxes": _corner_boxes(rng, 1), "logits": rng.normal(0, 2, (1, C, N))
             .astype("float32")}
    exe = relax.build(from_onnx(model), "llvm")
    vm = relax.VirtualMachine(exe, wb.cpu())
    got = [o.numpy() for o in vm["main"](*[wb.nd.array(v) for v in feeds.values()])]
    want = ort_run(model, feeds)
    assert len(got) == len(want) == 4 and len(want[0]) > 3
    for g_, w in zip(got, want):
        assert g_.shape == w.shape and g_.dtype == w.dtype
        np.testing.assert_allclose(g_, w, rtol=1e-6)
