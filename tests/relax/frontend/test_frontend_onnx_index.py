"""Gathers, scatters, TopK, CumSum and Einsum against onnxruntime over their attributes (one
graph, one compile)."""
from __future__ import annotations

import numpy as np
import pytest

import frontend_zoo as zoo  # noqa: F401  (skips the module without the models extra)

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import helper  # noqa: E402
from onnx_graph import F32, Graph, check, rand  # noqa: E402

pytestmark = pytest.mark.slow


def test_index_family():
    g = Graph()
    x, m = "x", "m"
    i64 = lambda v: g.const(np.asarray(v, "int64"))  # noqa: E731
    g("GatherElements", x, i64([[[0, -1, 2, 1], [3, 3, 0, 0]]] * 2), axis=2)
    g("GatherElements", x, i64([[[1, 0, 2, 0]], [[0, 2, 1, -3]]]), axis=1)
    g("GatherND", x, i64([[0, 1], [1, -1]]))
    g("GatherND", x, i64([[[2], [0]], [[1], [1]]]), batch_dims=1)
    g("GatherND", x, i64([[1, 0, 3]]))
    idx = i64([[0, 2, -1, 1], [0, 0, 2, 1]])
    upd = g.const(rand(2, 4, seed=4))
    for reduction in ("none", "add", "mul", "max", "min"):
        g("ScatterElements", m, idx if reduction != "none" else i64([[0, 2, -1, 1],
                                                                     [1, 0, 2, 0]]),
          upd, axis=0, reduction=reduction)
    g("ScatterElements", m, i64([[3], [-1], [0]]), g.const(rand(3, 1, seed=5)), axis=1)
    g("ScatterND", m, i64([[2], [0]]), g.const(rand(2, 4, seed=6)))
    g("ScatterND", m, i64([[1, 3], [1, 3], [0, -2]]), g.const(rand(3, seed=7)),
      reduction="add")
    g("ScatterND", m, i64([[1, 3], [2, 0]]), g.const(rand(2, seed=8)), reduction="mul")
    g("TopK", x, i64([2]), axis=2, outputs=2)
    g("TopK", x, i64([3]), axis=-1, largest=0, outputs=2)
    g("TopK", m, i64([2]), axis=0, outputs=2)
    for exclusive in (0, 1):
        for reverse in (0, 1):
            g("CumSum", x, i64(2), exclusive=exclusive, reverse=reverse)
    g("CumSum", m, i64(-2))
    g("Einsum", x, g.const(rand(4, 5, seed=9)), equation="bij,jk->bik")
    g("Einsum", x, equation="bij->ji")
    g("Einsum", m, m, equation="ij,ij->i")
    g("Einsum", g.const(rand(3, 3, seed=10)), equation="ii->i")
    g("Einsum", x, m, equation="...j,ij")
    model = g.model([helper.make_tensor_value_info("x", F32, [2, 3, 4]),
                     helper.make_tensor_value_info("m", F32, [3, 4])], opset=18)
    check(model, {"x": rand(2, 3, 4, seed=1), "m": rand(3, 4, seed=2)})
