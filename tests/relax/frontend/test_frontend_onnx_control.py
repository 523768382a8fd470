"""If and Loop against onnxruntime: a known condition takes one branch, a run-time one
selects between both; loops with a known trip count unroll (carried values, scan outputs,
an early exit on a known condition, a body reading outer values)."""
from __future__ import annotations

import numpy as np
import pytest

import frontend_zoo as zoo  # noqa: F401  (skips the module without the models extra)

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from onnx_graph import F32, Graph, check, rand  # noqa: E402

pytestmark = pytest.mark.slow
BOOL, I64 = TensorProto.BOOL, TensorProto.INT64


def _branch(name, nodes, out, shape=(2, 3)):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, F32, shape)])


def _body_add_scan():
    """(i, cond, acc) -> (cond, acc + x * i, acc * 0.5): reads the outer x."""
    nodes = [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "fi"], ["xi"]),
             helper.make_node("Add", ["acc", "xi"], ["acc_out"]),
             helper.make_node("Mul", ["acc", "half"], ["scan_out"]),
             helper.make_node("Identity", ["cond"], ["cond_out"])]
    return helper.make_graph(
        nodes, "body",
        [helper.make_tensor_value_info("i", I64, []),
         helper.make_tensor_value_info("cond", BOOL, []),
         helper.make_tensor_value_info("acc", F32, [2, 3])],
        [helper.make_tensor_value_info("cond_out", BOOL, []),
         helper.make_tensor_value_info("acc_out", F32, [2, 3]),
         helper.make_tensor_value_info("scan_out", F32, [2, 3])],
        [onnx.numpy_helper.from_array(np.asarray(0.5, "float32"), "half")])


def _body_until():
    """(i, cond, acc) -> (i < 2, acc + 1): stops after three iterations."""
    nodes = [helper.make_node("Add", ["acc", "one"], ["acc_out"]),
             helper.make_node("Less", ["i", "two"], ["cond_out"])]
    return helper.make_graph(
        nodes, "until",
        [helper.make_tensor_value_info("i", I64, []),
         helper.make_tensor_value_info("cond", BOOL, []),
         helper.make_tensor_value_info("acc", F32, [2, 3])],
        [helper.make_tensor_value_info("cond_out", BOOL, []),
         helper.make_tensor_value_info("acc_out", F32, [2, 3])],
        [onnx.numpy_helper.from_array(np.asarray(1.0, "float32"), "one"),
         onnx.numpy_helper.from_array(np.asarray(2, "int64"), "two")])


def test_if_and_loop():
    g = Graph()
    then = _branch("then", [helper.make_node("Exp", ["x"], ["t"])], "t")
    other = _branch("else", [helper.make_node("Neg", ["x"], ["e"])], "e")
    g("If", g.const(np.asarray(True)), then_branch=then, else_branch=other)
    g("If", g.const(np.asarray([False])), then_branch=then, else_branch=other)
    g("If", "c", then_branch=then, else_branch=other)
    g("Loop", g.const(np.asarray(4, "int64")), "", "x", body=_body_add_scan(), outputs=2)
    g("Loop", g.const(np.asarray(3, "int64")), g.const(np.asarray(True)), "x",
      body=_body_add_scan(), outputs=2)
    g("Loop", g.const(np.asarray(10, "int64")), g.const(np.asarray(True)), "x",
      body=_body_until())
    model = g.model([helper.make_tensor_value_info("x", F32, [2, 3]),
                     helper.make_tensor_value_info("c", BOOL, [])], opset=16)
    x = rand(2, 3, seed=1)
    check(model, {"x": x, "c": np.asarray(True)})
    check(model, {"x": x, "c": np.asarray(False)})


def test_unsupported_ops_in_branches_are_listed_up_front():
    from workbench.relax.frontend import OpNotImplemented
    from workbench.relax.frontend.onnx import from_onnx
    g = Graph()
    then = _branch("then", [helper.make_node("Det", ["x"], ["t"])], "t", shape=[])
    other = _branch("else", [helper.make_node("ReduceSum", ["x"], ["e"], keepdims=0)], "e",
                    shape=[])
    g("If", "c", then_branch=then, else_branch=other)
    model = g.model([helper.make_tensor_value_info("x", F32, [3, 3]),
                     helper.make_tensor_value_info("c", BOOL, [])], opset=16)
    with pytest.raises(OpNotImplemented, match=r"Det: used at If_1/then_branch/Det_0"):
        from_onnx(model)
