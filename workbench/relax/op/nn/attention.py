"""Scaled dot-product ``attention`` in TVM's BSNH layout.

``query`` (B, S, N, H), ``key`` (B, T, N_kv, H), ``value`` (B, T, N_kv, H_v) -> (B, S, N, H_v);
``N`` must be a multiple of ``N_kv`` (grouped-query attention). ``scale`` defaults to
``1/sqrt(H)``; ``causal_mask`` is None, "TopLeft" (keep ``t <= s``) or "BottomRight" (keep
``t <= s + T - S``); ``bias`` broadcasts to (B, N, S, T) and is added to the scaled scores.
A query row whose keys are all masked gives zeros (PyTorch's behaviour), not NaN.
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
    """Static shapes, or a symbolic batch or sequence lengths (dynamic dims): the keys
    transposed to (B, N_kv, H, T), then one fused streaming kernel
    (``workbench.topi.nn.attention``), marked opaque so fusion leaves it whole. Other symbolic
    shapes (heads, head dims): the staged te formulation (it writes the (B, N, S, T)
    scores)."""
    a = call.attrs
    q, k, v = call.args[:3]
    bias = call.args[3] if len(call.args) > 3 else None
    spec = _kernel_spec(call)
    if spec is None:
        from workbench.topi.nn.relax_extras import attention as te_attention
        return bb.call_te(te_attention, q, k, v, bias, a["scale"], a["causal_mask"],
                          primfunc_name_hint="attention")
    from workbench.relax.op.base import call_tir
    from workbench.relax.transform.annotate_tir_op_pattern import OpPatternKind
    from workbench.topi.nn.attention import flash_attention
    from workbench.topi.transform import transpose
    # The kernel reads the keys as K^T (B, N_kv, H, T): one transpose here, instead of one per
    # query block inside the kernel.
    k_t = bb.emit(bb.call_te(transpose, k, [0, 2, 3, 1], primfunc_name_hint="transpose"))
    func = flash_attention(spec).with_attr("op_pattern", int(OpPatternKind.kOpaque))
    gv = bb.add_func(func, "attention")
    return call_tir(gv, [q, k_t, v] + list(call.args[3:]), call.struct_info)


def _kernel_spec(call: Call) -> Any:
    """The kernel's :class:`FlashAttentionSpec` when every shape is a known constant except
    the batch and the sequence lengths S and T, which may also be symbolic variables (a
    dynamic batch or sequence length: the spec then names them); else None."""
    from workbench.tir.expr import Var as TirVar
    from workbench.topi.nn.attention import FlashAttentionSpec
    sis = [I.tensor_arg(call, i, n) for i, n in enumerate(("query", "key", "value", "bias")[
        :len(call.args)])]
    if any(si.shape is None for si in sis):
        return None
    q, k, v = (si.values for si in sis[:3])
    lengths: dict[int, str] = {}        # id(tir Var) -> its name in the spec

    def length(d: Any) -> int | str | None:
        c = I.const_int(d)
        if c is not None:
            return c
        if not isinstance(d, TirVar):
            return None
        name = lengths.setdefault(id(d), d.name)
        # two different variables of one name would be one in the kernel
        return name if list(lengths.values()).count(name) == 1 else None

    b, s, t = length(q[0]), length(q[1]), length(k[1])
    if None in (b, s, t) or length(v[1]) != t or length(k[0]) != b or length(v[0]) != b:
        return None
    fixed = [I.const_int(d) for d in (q[2], q[3], k[2], v[3])]
    if any(d is None for d in fixed):
        return None
    n, h, nk, hv = fixed
    bias = None
    if len(sis) > 3:
        bias = tuple(length(d) if id(d) in lengths else I.const_int(d) for d in sis[3].values)
        if any(d is None for d in bias):
            return None
    return FlashAttentionSpec(b, s, n, h, t, nk, hv, sis[0].dtype, call.attrs["scale"],
                              call.attrs["causal_mask"], bias,
                              sis[3].dtype if bias is not None else "float32")


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
    # A row with every key masked gives zeros, as PyTorch's safe softmax (>= 2.5) does.
    mx = scores.max(axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isneginf(mx), 0.0, mx))
    tot = e.sum(axis=-1, keepdims=True)
    p = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return (p @ vh).transpose(0, 2, 1, 3).astype(q.dtype)


__all__ = ["attention"]
