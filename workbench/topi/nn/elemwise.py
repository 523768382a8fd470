"""Activation functions (TVM's ``topi.nn.relu`` and friends)."""
from __future__ import annotations

import math

from workbench.te import compute
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr


def relu(x: Tensor) -> Tensor:
    """``max(x, 0)``."""
    return compute(x.shape, lambda *i: op.max(x[i], op.const(0, x.dtype)),
                   name="T_relu", tag="elemwise")


def leaky_relu(x: Tensor, alpha: float) -> Tensor:
    """``x`` where positive, else ``alpha * x``."""
    def f(*i: PrimExpr) -> PrimExpr:
        v = x[i]
        return op.select(v > op.const(0, x.dtype), v, v * op.const(alpha, x.dtype))
    return compute(x.shape, f, name="T_leaky_relu", tag="elemwise")


def gelu(x: Tensor, approximate: str = "none") -> Tensor:
    """GELU: ``0.5 x (1 + erf(x / sqrt 2))``; ``approximate="tanh"`` uses the tanh formula."""
    t = x.dtype

    def exact(*i: PrimExpr) -> PrimExpr:
        v = x[i]
        return op.const(0.5, t) * v * (op.const(1.0, t) + op.erf(v * op.const(math.sqrt(0.5), t)))

    def tanh_form(*i: PrimExpr) -> PrimExpr:
        v = x[i]
        # 0.5 (1 + tanh(u)) == sigmoid(2 u): one inline exp in float32 code instead of a
        # vector tanh call, which spills a fused product's register tile around it, and
        # no 1 + tanh(u) cancellation for negative inputs
        inner = op.const(2 * math.sqrt(2 / math.pi), t) * (v + op.const(0.044715, t) * v * v * v)
        return v * op.sigmoid(inner)
    if approximate not in ("none", "tanh"):
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return compute(x.shape, exact if approximate == "none" else tanh_form,
                   name="T_gelu", tag="elemwise")


def silu(x: Tensor) -> Tensor:
    """``x * sigmoid(x)``."""
    return compute(x.shape, lambda *i: x[i] * op.sigmoid(x[i]), name="T_silu", tag="elemwise")
