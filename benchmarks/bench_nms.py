"""ONNX NonMaxSuppression alone: the compiled kernel
(``relax.vision.all_class_non_max_suppression``, one serial block) against onnxruntime's CPU
kernel, on detector-sized inputs.

Shapes (batch 1): YOLOv3's 10647 boxes x 80 classes with a 0.25 score threshold and with none
(every box a candidate: the whole sort), and SSD's 1917 boxes x 91 classes. Scores are uniform
to the fourth power (most are small), boxes clustered so that NMS suppresses. The two runners
are timed in turns (each round times both once, so load on a shared machine hits them alike)
and the median over ``--rounds`` is printed with the ratio; outputs are checked equal.

Usage: ``python benchmarks/bench_nms.py [--rounds 7] [--shapes yolo,yolo-all,ssd]``
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import workbench as wb  # noqa: E402
from workbench import relax  # noqa: E402
from workbench.relax.frontend.onnx import from_onnx  # noqa: E402

#: name -> (classes, boxes, score threshold, max_output_boxes_per_class)
SHAPES = {
    "yolo": (80, 10647, 0.25, 100),
    "yolo-all": (80, 10647, 0.0, 200),
    "ssd": (91, 1917, 0.05, 100),
}


def _model(classes: int, boxes: int):
    from onnx import TensorProto as T
    from onnx import helper
    ins = [helper.make_tensor_value_info("boxes", T.FLOAT, [1, boxes, 4]),
           helper.make_tensor_value_info("scores", T.FLOAT, [1, classes, boxes]),
           helper.make_tensor_value_info("max", T.INT64, [1]),
           helper.make_tensor_value_info("iou", T.FLOAT, [1]),
           helper.make_tensor_value_info("score", T.FLOAT, [1])]
    node = helper.make_node("NonMaxSuppression", ["boxes", "scores", "max", "iou", "score"],
                            ["selected"])
    graph = helper.make_graph([node], "nms", ins, [
        helper.make_tensor_value_info("selected", T.INT64, [None, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    return model


def _feeds(classes: int, boxes: int, score: float, max_out: int) -> dict:
    rng = np.random.default_rng(0)
    centres = rng.uniform(0, 400, (64, 2))[rng.integers(0, 64, boxes)]
    yx = centres + rng.normal(0, 8, (boxes, 2))
    hw = rng.uniform(10, 60, (boxes, 2))
    return {"boxes": np.concatenate([yx, yx + hw], -1)[None].astype("float32"),
            "scores": (rng.uniform(0, 1, (1, classes, boxes)) ** 4).astype("float32"),
            "max": np.asarray([max_out], "int64"), "iou": np.asarray([0.5], "float32"),
            "score": np.asarray([score], "float32")}


def main() -> None:
    import onnxruntime as ort
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    args = ap.parse_args()
    print(f"{'shape':10} {'selected':>8} {'workbench ms':>13} {'onnxruntime ms':>15} {'ratio':>6}")
    for name in args.shapes.split(","):
        classes, boxes, score, max_out = SHAPES[name]
        model, feeds = _model(classes, boxes), _feeds(classes, boxes, score, max_out)
        vm = relax.VirtualMachine(relax.build(from_onnx(model), "llvm"), wb.cpu())
        nd = [wb.nd.array(v) for v in feeds.values()]
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
        got, want = vm["main"](*nd).numpy(), sess.run(None, feeds)[0]
        assert np.array_equal(got, want), f"{name}: the selections differ from onnxruntime's"
        ours, theirs = [], []
        for _ in range(args.rounds):
            t = time.perf_counter()
            vm["main"](*nd)
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            sess.run(None, feeds)
            theirs.append(time.perf_counter() - t)
        a, b = statistics.median(ours) * 1e3, statistics.median(theirs) * 1e3
        print(f"{name:10} {len(want):8d} {a:13.2f} {b:15.2f} {a / b:6.2f}")


if __name__ == "__main__":
    main()
