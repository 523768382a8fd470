"""te kernels the Relax legalizer needs that topi did not have yet: ``rms_norm``,
``batch_norm_inference`` and scaled dot-product ``attention`` (BSNH layout).

Written by the Relax engineer, kept apart from the topi modules so their owner can fold them in
(or replace them) later; ``workbench.relax.op.nn`` imports them from here.
"""
from __future__ import annotations

import math
from typing import Sequence

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.utils import normalize_axes, prod


def rms_norm(data: Tensor, weight: Tensor, axis: int | Sequence[int] = -1,
             epsilon: float = 1e-5) -> Tensor:
    """``data * rsqrt(mean(data^2 over axis) + epsilon) * weight``; ``weight`` has the shape of
    the normalized axes. Stages ``T_rms_norm_sq_sum`` then ``T_rms_norm``."""
    axes = normalize_axes(axis, data.ndim, "rms_norm")
    kept = [d for d in range(data.ndim) if d not in axes]
    red = [te.reduce_axis((0, data.shape[d]), name=f"k{d}") for d in axes]

    def full_index(i: Sequence[PrimExpr]) -> tuple:
        it_i, it_r = iter(i), iter(red)
        return tuple(next(it_r) if d in axes else next(it_i) for d in range(data.ndim))

    sq = te.compute(tuple(data.shape[d] for d in kept),
                    lambda *i: te.sum(data[full_index(i)] * data[full_index(i)], axis=red),
                    name="T_rms_norm_sq_sum", tag="comm_reduce")
    count = op.cast(data.dtype, prod([data.shape[d] for d in axes]))

    def out_f(*i: PrimExpr) -> PrimExpr:
        outer = tuple(i[d] for d in kept)
        inner = tuple(i[d] for d in axes)
        scale = op.rsqrt(sq[outer] / count + op.const(epsilon, data.dtype))
        return data[i] * scale * weight[inner]
    return te.compute(data.shape, out_f, name="T_rms_norm", tag="injective")


def batch_norm_inference(data: Tensor, gamma: Tensor | None, beta: Tensor | None,
                         moving_mean: Tensor, moving_var: Tensor, axis: int = 1,
                         epsilon: float = 1e-5) -> Tensor:
    """``(x - mean[c]) * rsqrt(var[c] + epsilon) * gamma[c] + beta[c]`` with ``c`` the index
    along ``axis`` (the moving statistics are used: inference mode)."""
    axis = normalize_axes(axis, data.ndim, "batch_norm")[0]

    def f(*i: PrimExpr) -> PrimExpr:
        c = i[axis]
        y = (data[i] - moving_mean[c]) * op.rsqrt(moving_var[c] + op.const(epsilon, data.dtype))
        if gamma is not None:
            y = y * gamma[c]
        if beta is not None:
            y = y + beta[c]
        return y
    return te.compute(data.shape, f, name="T_batch_norm", tag="injective")


def attention(q: Tensor, k: Tensor, v: Tensor, bias: Tensor | None = None,
              scale: float | None = None, causal_mask: str | None = None) -> Tensor:
    """Scaled dot-product attention in BSNH layout.

    ``q`` is (B, S, N, H), ``k`` (B, T, N_kv, H), ``v`` (B, T, N_kv, H_v) with ``N % N_kv == 0``
    (grouped-query attention shares a kv head between ``N / N_kv`` query heads); the result is
    (B, S, N, H_v). ``scale`` defaults to ``1/sqrt(H)``. ``causal_mask`` "TopLeft" keeps
    ``t <= s``, "BottomRight" keeps ``t <= s + T - S``. ``bias`` (broadcastable to (B, N, S, T))
    is added to the scaled scores. A row that sees no key gives zeros (PyTorch's behaviour).
    Stages: scores, max, exp, sum, output. (Static shapes legalize to the fused streaming
    kernel of :mod:`workbench.topi.nn.attention` instead.)
    """
    b_, s_, n_, h_ = q.shape
    t_ = k.shape[1]
    n_kv = k.shape[2]
    hv = v.shape[3]
    group = op.floordiv(n_, n_kv)
    dtype = q.dtype
    sc = op.const(scale if scale is not None else 1.0 / math.sqrt(_const(h_)), dtype)
    rh = te.reduce_axis((0, h_), name="rh")

    def visible(s: PrimExpr, t: PrimExpr) -> PrimExpr | None:
        if causal_mask is None:
            return None
        if causal_mask == "TopLeft":
            return t <= s
        if causal_mask == "BottomRight":
            return t <= s + op.cast(s.dtype, t_ - s_)
        raise ValueError(f"attention: causal_mask must be 'TopLeft', 'BottomRight' or None, "
                         f"got {causal_mask!r}")

    def score_f(b: PrimExpr, n: PrimExpr, s: PrimExpr, t: PrimExpr) -> PrimExpr:
        return te.sum(q[b, s, n, rh] * k[b, t, op.floordiv(n, group), rh], axis=rh)
    raw = te.compute((b_, n_, s_, t_), score_f, name="T_attention_scores")

    def scaled_f(b: PrimExpr, n: PrimExpr, s: PrimExpr, t: PrimExpr) -> PrimExpr:
        x = raw[b, n, s, t] * sc
        if bias is not None:
            x = x + bias[_bias_index(bias, (b, n, s, t))]
        m = visible(s, t)
        return x if m is None else op.if_then_else(m, x, op.min_value(dtype))
    scores = te.compute((b_, n_, s_, t_), scaled_f, name="T_attention_masked")
    rt = te.reduce_axis((0, t_), name="rt")
    mx = te.compute((b_, n_, s_), lambda b, n, s: te.max(scores[b, n, s, rt], axis=rt),
                    name="T_attention_max")

    def exp_f(b: PrimExpr, n: PrimExpr, s: PrimExpr, t: PrimExpr) -> PrimExpr:
        # A row of -inf scores (an all -inf bias) has max -inf: exponents against 0 instead,
        # exp(-inf) = 0 rather than exp(nan).
        m = mx[b, n, s]
        m = op.if_then_else(m == op.neg(op.infinity(dtype)), op.const(0, dtype), m)
        e = op.exp(scores[b, n, s, t] - m)
        m = visible(s, t)
        return e if m is None else op.if_then_else(m, e, op.const(0, dtype))
    ex = te.compute((b_, n_, s_, t_), exp_f, name="T_attention_exp")
    rt2 = te.reduce_axis((0, t_), name="rt2")
    tot = te.compute((b_, n_, s_), lambda b, n, s: te.sum(ex[b, n, s, rt2], axis=rt2),
                     name="T_attention_sum")
    rv = te.reduce_axis((0, t_), name="rv")

    def out_f(b: PrimExpr, s: PrimExpr, n: PrimExpr, h: PrimExpr) -> PrimExpr:
        # A row that sees no key (sum 0) gives zeros, as PyTorch's safe softmax does.
        total = tot[b, n, s]
        inv = op.if_then_else(total > op.const(0, dtype), op.const(1, dtype) / total,
                              op.const(0, dtype))
        return te.sum(ex[b, n, s, rv] * inv * v[b, rv, op.floordiv(n, group), h], axis=rv)
    return te.compute((b_, s_, n_, hv), out_f, name="T_attention")


def _const(e: PrimExpr) -> int:
    value = getattr(e, "value", None)
    if value is None:
        raise ValueError("attention: the head dimension must be a constant when scale is None")
    return value


def _bias_index(bias: Tensor, idx: tuple) -> tuple:
    """Right-aligned broadcast of ``bias`` against (B, N, S, T)."""
    out = []
    off = 4 - bias.ndim
    for d, s in enumerate(bias.shape):
        one = getattr(s, "value", None) == 1
        out.append(op.const(0, idx[off + d].dtype) if one else idx[off + d])
    return tuple(out)


__all__ = ["rms_norm", "batch_norm_inference", "attention"]
