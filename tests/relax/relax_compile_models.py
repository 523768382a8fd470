"""Models and numpy references shared by the relax compilation tests and benchmarks.

Each ``make_*`` returns ``(mod, param_names, params, reference)`` where ``params`` are numpy
arrays in the function's parameter order (after the inputs) and ``reference(x, params)`` is an
independent numpy implementation of the model.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from workbench import relax
from workbench.relax.frontend import nn
from workbench.relax.frontend.nn.core import wrap

Model = tuple[Any, list[str], list[np.ndarray], Callable[..., np.ndarray]]


def _init(module: nn.Module, seed: int) -> tuple[list[str], list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    names, arrays = [], []
    for name, p in module.named_parameters():
        scale = 1.0 / math.sqrt(max(1, p.shape[-1] if len(p.shape) == 2 else
                                    int(np.prod(p.shape[1:])) if len(p.shape) > 1 else 4))
        arr = (rng.standard_normal(p.shape) * scale).astype(p.dtype)
        if name.endswith("var"):
            arr = np.abs(arr) + 0.5  # batch-norm variances are positive
        names.append(name)
        arrays.append(arr)
    return names, arrays


# ---- MLP ---------------------------------------------------------------------------------------

class MLP(nn.Module):
    def __init__(self) -> None:
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc2(nn.relu(self.fc1(x)))


def make_mlp(batch: Any = "n") -> Model:
    model = MLP()
    mod, _ = model.export_tvm({"forward": {"x": nn.spec.Tensor((batch, 8), "float32")}})
    names, params = _init(model, 0)

    def reference(x: np.ndarray, p: list[np.ndarray]) -> np.ndarray:
        w1, b1, w2, b2 = p
        return np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
    return mod, names, params, reference


# ---- CNN ---------------------------------------------------------------------------------------

class BatchNorm2d(nn.Module):
    """Inference batch norm over channels (NCHW) with its running statistics as parameters."""

    def __init__(self, channels: int, eps: float = 1e-5):
        self.weight = nn.Parameter((channels,))
        self.bias = nn.Parameter((channels,))
        self.running_mean = nn.Parameter((channels,))
        self.running_var = nn.Parameter((channels,))
        self.eps = eps

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        out = wrap(relax.op.nn.batch_norm(x.expr, self.weight.expr, self.bias.expr,
                                          self.running_mean.expr, self.running_var.expr,
                                          axis=1, epsilon=self.eps), "batch_norm")
        return out[0] if isinstance(out, tuple) else out


class CNN(nn.Module):
    def __init__(self) -> None:
        self.conv = nn.Conv2D(3, 8, 3, padding=1)
        self.bn = BatchNorm2d(8)
        self.fc = nn.Linear(8 * 4 * 4, 10)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        y = nn.relu(self.bn(self.conv(x)))
        y = nn.op.max_pool2d(y, 2)
        y = nn.op.reshape(y, [x.shape[0], 8 * 4 * 4])
        return self.fc(y)


def make_cnn(batch: Any = "n") -> Model:
    model = CNN()
    mod, _ = model.export_tvm({"forward": {"x": nn.spec.Tensor((batch, 3, 8, 8), "float32")}})
    names, params = _init(model, 1)

    def reference(x: np.ndarray, p: list[np.ndarray]) -> np.ndarray:
        cw, cb, g, b, mean, var, fw, fb = p
        n = x.shape[0]
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        y = np.zeros((n, 8, 8, 8), np.float32)
        for i in range(3):
            for j in range(3):
                y += np.einsum("nchw,oc->nohw", xp[:, :, i:i + 8, j:j + 8], cw[:, :, i, j])
        y += cb[None, :, None, None]
        y = (y - mean[None, :, None, None]) / np.sqrt(var[None, :, None, None] + 1e-5)
        y = y * g[None, :, None, None] + b[None, :, None, None]
        y = np.maximum(y, 0)
        y = y.reshape(n, 8, 4, 2, 4, 2).max(axis=(3, 5))
        return y.reshape(n, -1) @ fw.T + fb
    return mod, names, params, reference


# ---- transformer block ---------------------------------------------------------------------------

SEQ, DIM, HEADS = 8, 16, 2


class TransformerBlock(nn.Module):
    def __init__(self) -> None:
        self.ln1 = nn.LayerNorm(DIM)
        self.q = nn.Linear(DIM, DIM)
        self.k = nn.Linear(DIM, DIM)
        self.v = nn.Linear(DIM, DIM)
        self.o = nn.Linear(DIM, DIM)
        self.ln2 = nn.LayerNorm(DIM)
        self.fc1 = nn.Linear(DIM, 4 * DIM)
        self.fc2 = nn.Linear(4 * DIM, DIM)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        b = x.shape[0]
        h = self.ln1(x)
        hd = DIM // HEADS
        q = nn.op.reshape(self.q(h), [b, SEQ, HEADS, hd])
        k = nn.op.reshape(self.k(h), [b, SEQ, HEADS, hd])
        v = nn.op.reshape(self.v(h), [b, SEQ, HEADS, hd])
        a = nn.op.scaled_dot_product_attention(q, k, v)
        x = x + self.o(nn.op.reshape(a, [b, SEQ, DIM]))
        return x + self.fc2(nn.relu(self.fc1(self.ln2(x))))


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * g + b


def make_transformer(batch: Any = "n") -> Model:
    model = TransformerBlock()
    mod, _ = model.export_tvm({"forward": {"x": nn.spec.Tensor((batch, SEQ, DIM), "float32")}})
    names, params = _init(model, 2)

    def reference(x: np.ndarray, p: list[np.ndarray]) -> np.ndarray:
        (g1, b1, wq, bq, wk, bk, wv, bv, wo, bo, g2, b2, w1, c1, w2, c2) = p
        n = x.shape[0]
        hd = DIM // HEADS
        h = _layer_norm(x, g1, b1)
        q, k, v = [(h @ w.T + c).reshape(n, SEQ, HEADS, hd).transpose(0, 2, 1, 3)
                   for w, c in ((wq, bq), (wk, bk), (wv, bv))]
        s = q @ k.transpose(0, 1, 3, 2) / math.sqrt(hd)
        e = np.exp(s - s.max(-1, keepdims=True))
        a = (e / e.sum(-1, keepdims=True)) @ v
        x = x + a.transpose(0, 2, 1, 3).reshape(n, SEQ, DIM) @ wo.T + bo
        return x + np.maximum(_layer_norm(x, g2, b2) @ w1.T + c1, 0) @ w2.T + c2
    return mod, names, params, reference


MODELS = {"mlp": (make_mlp, (8,)), "cnn": (make_cnn, (3, 8, 8)),
          "transformer": (make_transformer, (SEQ, DIM))}


def input_for(kind: str, batch: int, seed: int = 7) -> np.ndarray:
    shape = (batch, *MODELS[kind][1])
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")
