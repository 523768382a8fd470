"""The com.microsoft transformer ops (Attention, EmbedLayerNormalization) against
onnxruntime's contrib kernels."""
from __future__ import annotations

import numpy as np
import pytest

import frontend_zoo as zoo  # noqa: F401  (skips the module without the models extra)

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402
from onnx_graph import F32, Graph, check, rand  # noqa: E402

pytestmark = pytest.mark.slow
MS = "com.microsoft"
I32 = TensorProto.INT32


def test_attention_and_embed_layer_normalization():
    g = Graph()
    hidden, heads = 8, 2
    w, bias = g.const(rand(hidden, 3 * hidden, seed=1) * 0.5), g.const(rand(3 * hidden, seed=2))
    g("Attention", "x", w, bias, num_heads=heads, domain=MS)
    g("Attention", "x", w, bias, "mask", num_heads=heads, domain=MS)
    g("Attention", "x", w, bias, num_heads=heads, unidirectional=1, domain=MS)
    g("Attention", "x", g.const(rand(hidden, 16, seed=3) * 0.5), g.const(rand(16, seed=4)),
      num_heads=heads, qkv_hidden_sizes=[4, 4, 8], scale=0.3, domain=MS)
    emb = g("EmbedLayerNormalization", "ids", "seg", g.const(rand(20, hidden, seed=5)),
            g.const(rand(6, hidden, seed=6)), g.const(rand(2, hidden, seed=7)),
            g.const(rand(hidden, seed=8)), g.const(rand(hidden, seed=9)), "mask",
            epsilon=1e-5, domain=MS, outputs=3, out=False)
    g("Identity", emb[0])
    g("Identity", emb[1], out_type=I32)
    g("Identity", emb[2])
    model = g.model([helper.make_tensor_value_info("x", F32, [2, 5, hidden]),
                     helper.make_tensor_value_info("mask", I32, [2, 5]),
                     helper.make_tensor_value_info("ids", I32, [2, 5]),
                     helper.make_tensor_value_info("seg", I32, [2, 5])], opset=17)
    rng = np.random.default_rng(3)
    check(model, {"x": rand(2, 5, hidden, seed=10),
                  "mask": np.asarray([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], "int32"),
                  "ids": rng.integers(0, 20, (2, 5)).astype("int32"),
                  "seg": rng.integers(0, 2, (2, 5)).astype("int32")})
