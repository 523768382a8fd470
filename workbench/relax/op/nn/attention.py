"""Scaled dot-product ``attention`` in TVM's BSNH layout.

``query`` (B, S, N, H), ``key`` (B, T, N_kv, H), ``value`` (B, T, N_kv, H_v) -> (B, S, N, H_v);
``N`` must be a multiple of ``N_kv`` (grouped-query attention). ``scale`` defaults to
``1/sqrt(H)``; ``causal_mask`` is None, "TopLeft" (keep ``t <= s``) or "BottomRight" (keep
``t <= s + T - S``); ``bias`` broadcasts to (B, N, S, T) and is added to the scaled scores.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo


def attention(query: Expr, key: Expr, value: Expr, bias: Expr | None = None,
              scale: float | None = None, causal_mask: str | None = None) -> Call:
    """Scaled dot-product attention (see the module docstring for shapes and options)."""
    if causal_mask not in (None, "TopLeft", "BottomRight"):
        raise ValueError(f"attention: causal_mask must be None, 'TopLeft' or 'BottomRight', "
                         f"got {causal_mask!r}")
    args = (query, key, value) if bias is None else (query, key, value, bias)
    return make_call("relax.nn.attention", args,
                     {"scale": None if scale is None else float(scale),
                      "causal_mask": causal_mask})


@def_infer("relax.nn.attention")
def _infer_attention(call: Call, ctx: Any) -> StructInfo:
    q, k, v = (I.tensor_arg(call, i, n) for i, n in enumerate(("query", "key", "value")))
    dtype = I.same_dtype(call, [("query", q), ("key", k), ("value", v)])
    for name, si in (("query", q), ("key", k), ("value", v)):
        if si.ndim not in (-1, 4):
            raise I.error(call, f"{name} must be 4-d (batch, seq, heads, head_dim) in BSNH "
                                f"layout, got {I.dims_text(si.values)}")
    if q.shape is None or k.shape is None or v.shape is None:
        return TensorStructInfo(None, dtype, 4)
    (b, s, n, h), (bk, t, nk, hk), (bv, tv, nv, hv) = q.values, k.values, v.values

    def check(x: Any, y: Any, what: str) -> None:
        if I.prove_equal(x, y) is False:
            raise I.error(call, f"{what}: query {I.dims_text(q.values)}, key "
                                f"{I.dims_text(k.values)}, value {I.dims_text(v.values)}")
    check(b, bk, "batch sizes differ")
    check(b, bv, "batch sizes differ")
    check(h, hk, "query and key head dims differ")
    check(t, tv, "key and value sequence lengths differ")
    check(nk, nv, "key and value head counts differ")
    if I.const_int(n) is not None and I.const_int(nk) is not None and \
            I.const_int(n) % I.const_int(nk):
        raise I.error(call, f"query heads ({I.const_int(n)}) must be a multiple of key heads "
                            f"({I.const_int(nk)})")
    if len(call.args) > 3:
        bias = I.tensor_arg(call, 3, "bias")
        if bias.ndim > 4:
            raise I.error(call, f"bias must broadcast to (B, N, S, T), got "
                                f"{I.dims_text(bias.values)}")
    return TensorStructInfo((b, s, n, hv), dtype)


@def_legalize("relax.nn.attention")
def _legalize_attention(bb: Any, call: Call) -> Expr:
    from workbench.topi.nn.relax_extras import attention as te_attention
    a = call.attrs
    q, k, v = call.args[:3]
    bias = call.args[3] if len(call.args) > 3 else None
    return bb.call_te(te_attention, q, k, v, bias, a["scale"], a["causal_mask"],
                      primfunc_name_hint="attention")


@def_numpy("relax.nn.attention")
def _numpy_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: Any = None,
                     scale: float | None = None, causal_mask: str | None = None) -> np.ndarray:
    b, s, n, h = q.shape
    t, nk = k.shape[1], k.shape[2]
    rep = n // nk
    qh = q.transpose(0, 2, 1, 3).astype("float64")                      # B N S H
    kh = np.repeat(k.transpose(0, 2, 1, 3), rep, axis=1).astype("float64")
    vh = np.repeat(v.transpose(0, 2, 1, 3), rep, axis=1).astype("float64")
    scores = qh @ kh.transpose(0, 1, 3, 2) * (scale if scale is not None else 1 / math.sqrt(h))
    if bias is not None:
        scores = scores + bias
    if causal_mask is not None:
        offset = 0 if causal_mask == "TopLeft" else t - s
        keep = np.arange(t)[None, :] <= np.arange(s)[:, None] + offset
        scores = np.where(keep, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    return (p @ vh).transpose(0, 2, 1, 3).astype(q.dtype)


__all__ = ["attention"]
