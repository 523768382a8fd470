"""Models older than opset 13 are converted with ONNX's version converter before import: the
old forms of ops (attributes that became inputs, Softmax's 2-d coercion, legacy broadcasting,
per-channel PRelu slopes) give the results of the original model; errors name the opset."""
from __future__ import annotations

import numpy as np
import pytest

import frontend_zoo as zoo  # noqa: F401  (skips the module without the models extra)
import workbench as wb
from workbench import relax
from workbench.relax.frontend import OpNotImplemented
from workbench.relax.frontend.onnx import from_onnx

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from onnx_graph import F32, Graph, check, rand  # noqa: E402

pytestmark = pytest.mark.slow


def test_opset_9_forms_match_onnxruntime():
    g = Graph()
    x = "x"
    g("Softmax", x, axis=1)
    g("LogSoftmax", x, axis=1)
    g("Clip", x, min=-0.5, max=0.4)
    g("Pad", x, pads=[0, 1, 0, 0, 2, 1], mode="constant", value=1.5)
    g("Pad", x, pads=[0, 0, 1, 0, 0, 2], mode="reflect")
    g("Slice", x, starts=[1, 0], ends=[3, -1], axes=[1, 2])
    g("Squeeze", g("Unsqueeze", x, axes=[0, 3], out=False), axes=[0])
    g("ReduceSum", x, axes=[1], keepdims=0)
    g("Split", x, axis=1, split=[1, 2], outputs=2)
    g("BatchNormalization", x, *(g.const(np.abs(rand(3, seed=k)) + 0.5) for k in range(4)),
      epsilon=1e-3)
    g("Gemm", g("Flatten", x, out=False), g.const(rand(12, 5, seed=6)), g.const(rand(5, seed=7)),
      alpha=0.5)
    model = g.model([helper.make_tensor_value_info("x", F32, [2, 3, 4])], opset=9)
    check(model, {"x": rand(2, 3, 4, seed=1)})


def _run(model, *args):
    exe = relax.build(from_onnx(model), "llvm")
    out = relax.VirtualMachine(exe, wb.cpu())["main"](*[wb.nd.array(a) for a in args])
    return [o.numpy() for o in (out if isinstance(out, (tuple, list)) else (out,))]


def test_opset_6_legacy_broadcast_and_per_channel_prelu():
    """Opset 6 (onnxruntime no longer runs it): numpy is the reference."""
    b, slope = rand(3, seed=2), rand(3, seed=3)
    nodes = [helper.make_node("Add", ["x", "b"], ["added"], broadcast=1, axis=1),
             helper.make_node("PRelu", ["x", "slope"], ["prelu"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", F32, [2, 3, 4])],
        [helper.make_tensor_value_info(n, F32, [2, 3, 4]) for n in ("added", "prelu")],
        [onnx.numpy_helper.from_array(b, "b"), onnx.numpy_helper.from_array(slope, "slope")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    model.ir_version = 4
    x = rand(2, 3, 4, seed=1)
    added, prelu = _run(model, x)
    np.testing.assert_allclose(added, x + b[:, None], rtol=1e-6)
    np.testing.assert_allclose(prelu, np.where(x < 0, x * slope[:, None], x), rtol=1e-6)


def test_errors_name_the_opset():
    g = Graph()
    g("TfIdfVectorizer", "x", mode="TF", min_gram_length=1, max_gram_length=1,
      max_skip_count=0, ngram_counts=[0], ngram_indexes=[0], pool_int64s=[1])
    model = g.model([helper.make_tensor_value_info("x", TensorProto.INT64, [1, 4])], opset=9)
    with pytest.raises(OpNotImplemented, match=r"opset 9, converted to 13"):
        from_onnx(model)
    bn = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"], spatial=0)
    graph = helper.make_graph(
        [bn], "g", [helper.make_tensor_value_info(n, F32, [2, 3]) for n in ("x",)] +
        [helper.make_tensor_value_info(n, F32, [3]) for n in "sbmv"],
        [helper.make_tensor_value_info("y", F32, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 7)])
    with pytest.raises(NotImplementedError, match=r"from opset 7 to opset 13.*spatial"):
        from_onnx(model)
