"""relax.frontend.nn: modules, parameters, export_tvm, and models checked against numpy."""
from __future__ import annotations

import math

import numpy as np
import pytest

from workbench import relax
from workbench.relax.frontend import nn
from workbench.relax.testing import evaluate_numpy

from legalized_runner import LegalizedRunner

rng = np.random.default_rng(11)


def init(params, scale=0.3):
    for _, p in params:
        p.data = (rng.standard_normal(p.shape) * scale).astype(p.dtype)
    return [p.data for _, p in params]


class MLP(nn.Module):
    def __init__(self):
        self.fc1, self.fc2 = nn.Linear(8, 16), nn.Linear(16, 4)

    def forward(self, x):
        return self.fc2(nn.relu(self.fc1(x)))


def test_mlp_export_param_spec_and_signature():
    mod, params = MLP().export_tvm(spec={"forward": {"x": nn.spec.Tensor(("n", 8), "float32")}})
    assert [(k, p.shape) for k, p in params] == [
        ("fc1.weight", [16, 8]), ("fc1.bias", [16]), ("fc2.weight", [4, 16]), ("fc2.bias", [4])]
    f = mod["forward"]
    assert [p.name_hint for p in f.params] == ["x", "fc1.weight", "fc1.bias", "fc2.weight",
                                               "fc2.bias"]
    assert f.attrs["num_input"] == 1
    assert str(f.ret_struct_info) == 'R.Tensor((n, 4), dtype="float32")'
    ops = [b.value.op.name for blk in f.body.blocks for b in blk.bindings
           if isinstance(b.value, relax.Call)]
    assert ops == ["relax.permute_dims", "relax.matmul", "relax.add", "relax.nn.relu",
                   "relax.permute_dims", "relax.matmul", "relax.add"]


def test_mlp_runs_for_any_batch_against_numpy():
    model = MLP()
    mod, params = model.export_tvm(spec={"forward": {"x": nn.spec.Tensor(("n", 8), "float32")}})
    w1, b1, w2, b2 = init(params)
    runner = LegalizedRunner(relax.transform.LegalizeOps()(mod))
    for n in (1, 6):
        x = rng.standard_normal((n, 8)).astype("float32")
        want = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
        np.testing.assert_allclose(evaluate_numpy(mod, "forward", x, w1, b1, w2, b2), want,
                                   rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(runner.run("forward", x, w1, b1, w2, b2), want,
                                   rtol=1e-4, atol=1e-5)


def test_parameter_data_is_checked():
    p = nn.Parameter((2, 3))
    p.data = np.zeros((2, 3), "float32")
    with pytest.raises(ValueError, match="does not match the parameter's shape"):
        p.data = np.zeros((3, 2), "float32")
    with pytest.raises(ValueError, match="dtype float64"):
        p.data = np.zeros((2, 3))
    with pytest.raises(RuntimeError, match="outside Module.export_tvm"):
        _ = p.expr


class CNN(nn.Module):
    def __init__(self):
        self.conv = nn.Conv2D(3, 4, 3, padding=1)
        self.act = nn.ReLU()
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        h = nn.op.max_pool2d(self.act(self.conv(x)), 2)
        return self.fc(h.reshape(x.shape[0], 64))


def test_cnn_module_against_numpy():
    mod, params = CNN().export_tvm({"forward": {"x": nn.spec.Tensor((2, 3, 8, 8))}})
    w, b, fw, fb = init(params)
    x = rng.standard_normal((2, 3, 8, 8)).astype("float32")
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    conv = np.zeros((2, 4, 8, 8))
    for i in range(8):
        for j in range(8):
            conv[:, :, i, j] = np.einsum("nchw,ochw->no", xp[:, :, i:i + 3, j:j + 3], w)
    h = np.maximum(conv + b[None, :, None, None], 0).reshape(2, 4, 4, 2, 4, 2).max(axis=(3, 5))
    want = h.reshape(2, 64) @ fw.T + fb
    np.testing.assert_allclose(evaluate_numpy(mod, "forward", x, w, b, fw, fb), want,
                               rtol=1e-4, atol=1e-4)
    got = LegalizedRunner(relax.transform.LegalizeOps()(mod)).run("forward", x, w, b, fw, fb)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


class TransformerBlock(nn.Module):
    def __init__(self, d=16, heads=2):
        self.d, self.heads = d, heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, s = x.shape[0], x.shape[1]
        q, k, v = nn.op.split(self.qkv(self.ln1(x)), 3, axis=2)
        shape = [b, s, self.heads, self.d // self.heads]
        a = nn.op.scaled_dot_product_attention(q.reshape(shape), k.reshape(shape),
                                               v.reshape(shape), is_causal=True)
        x = x + self.proj(a.reshape([b, s, self.d]))
        return x + self.mlp(self.ln2(x))


def _np_transformer(x, p, d=16, heads=2):
    (g1, b1, g2, b2, wqkv, bqkv, wp, bp, w1, c1, w2, c2) = p

    def ln(t, g, b):
        return (t - t.mean(-1, keepdims=True)) / np.sqrt(t.var(-1, keepdims=True) + 1e-5) * g + b
    B, S, _ = x.shape
    qkv = ln(x, g1, b1) @ wqkv.T + bqkv
    q, k, v = (t.reshape(B, S, heads, d // heads).transpose(0, 2, 1, 3)
               for t in np.split(qkv, 3, axis=2))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // heads)
    scores = np.where(np.tril(np.ones((S, S), bool)), scores, -np.inf)
    e = np.exp(scores - scores.max(-1, keepdims=True))
    a = (e / e.sum(-1, keepdims=True)) @ v
    x = x + a.transpose(0, 2, 1, 3).reshape(B, S, d) @ wp.T + bp
    h = ln(x, g2, b2) @ w1.T + c1
    h = 0.5 * h * (1 + np.vectorize(math.erf)(h / math.sqrt(2)))
    return x + h @ w2.T + c2


def test_transformer_block_with_symbolic_sequence_length():
    block = TransformerBlock()
    mod, params = block.export_tvm({"forward": {"x": nn.spec.Tensor((1, "s", 16))}})
    assert [k for k, _ in params][:4] == ["ln1.weight", "ln1.bias", "ln2.weight", "ln2.bias"]
    assert "mlp.0.weight" in dict(params) and "mlp.2.bias" in dict(params)
    vals = init(params)
    runner = LegalizedRunner(relax.transform.LegalizeOps()(mod))
    for s in (3, 5):
        x = rng.standard_normal((1, s, 16)).astype("float32")
        want = _np_transformer(x.astype("float64"), vals)
        np.testing.assert_allclose(evaluate_numpy(mod, "forward", x, *vals), want, rtol=1e-4,
                                   atol=1e-4)
        np.testing.assert_allclose(runner.run("forward", x, *vals), want, rtol=1e-4, atol=1e-4)


class Tiny(nn.Module):
    def __init__(self):
        self.emb = nn.Embedding(10, 4)
        self.norm = nn.RMSNorm(4, bias=True)
        self.act = nn.SiLU()

    def forward(self, ids):
        return self.act(self.norm(self.emb(ids)))

    def logits(self, ids):
        return nn.op.softmax(self.emb(ids))


def test_embedding_rmsnorm_and_two_methods():
    mod, params = Tiny().export_tvm({"forward": {"ids": nn.spec.Tensor((2, "t"), "int64")},
                                     "logits": {"ids": nn.spec.Tensor(("t",), "int64")}})
    assert set(mod) == {"forward", "logits"}
    emb, w, b = init(params)
    ids = np.array([[1, 9, 0], [3, 3, 7]], "int64")
    e = emb[ids]
    y = e / np.sqrt((e * e).mean(-1, keepdims=True) + 1e-5) * w + b
    want = y / (1 + np.exp(-y))
    np.testing.assert_allclose(evaluate_numpy(mod, "forward", ids, emb, w, b), want, rtol=1e-5,
                               atol=1e-6)
    got = LegalizedRunner(relax.transform.LegalizeOps()(mod)).run("forward", ids, emb, w, b)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_export_errors():
    with pytest.raises(AttributeError, match="no method 'decode'"):
        MLP().export_tvm({"decode": {"x": nn.spec.Tensor((1, 8))}})
    with pytest.raises(TypeError, match="nn.spec.Tensor"):
        MLP().export_tvm({"forward": {"x": (1, 8)}})
    with pytest.raises(relax.OpError, match="matmul: reduction dimensions differ"):
        MLP().export_tvm({"forward": {"x": nn.spec.Tensor((1, 9))}})
