"""ONNX converters: the com.microsoft contrib ops that onnxruntime's transformer optimizer
writes (Attention, EmbedLayerNormalization, SkipLayerNormalization, BiasGelu, FastGelu),
from the core ops. Outputs the importer does not compute (attention's ``present`` state,
normalisation statistics) are :class:`Unavailable`."""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Expr, TupleGetItem
from workbench.relax.frontend.onnx._registry import Unavailable, converter
from workbench.relax.frontend.onnx.ops_elementwise import operands
from workbench.relax.struct_info import TensorStructInfo
from workbench.tir.expr import IntImm


def _sinfo(e: Expr) -> TensorStructInfo:
    return e.struct_info


def _static(d: Any) -> int | None:
    return int(d.value) if isinstance(d, IntImm) else None


def _biased(imp: Any, inputs: list) -> Expr:
    x = imp.expr(inputs[0])
    if len(inputs) > 1 and inputs[1] is not None:
        x = imp.emit(R.add(*operands(imp, x, inputs[1])))
    return x


@converter("BiasGelu")
def _bias_gelu(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    """com.microsoft BiasGelu: gelu(x + bias), the exact (erf) form."""
    return R.nn.gelu(_biased(imp, inputs))


@converter("FastGelu")
def _fast_gelu(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    """com.microsoft FastGelu: the tanh approximation of gelu(x [+ bias])."""
    return R.nn.gelu_tanh(_biased(imp, inputs))


@converter("SkipLayerNormalization")
def _skip_layer_norm(imp: Any, node: Any, inputs: list, attrs: dict) -> list:
    """com.microsoft SkipLayerNormalization: layer_norm(input + skip [+ bias]) over the last
    axis; outputs the result and, when asked, ``input + skip + bias`` (the 4th output)."""
    x, skip = operands(imp, inputs[0], inputs[1])
    total = imp.emit(R.add(x, skip))
    if len(inputs) > 4 and inputs[4] is not None:
        total = imp.emit(R.add(*operands(imp, total, inputs[4])))
    hidden = _static(_sinfo(total).values[-1])
    gamma = operands(imp, total, inputs[2])[1]
    if len(inputs) > 3 and inputs[3] is not None:
        beta = operands(imp, total, inputs[3])[1]
    else:
        beta = imp.expr(np.zeros([hidden], dtype=_sinfo(total).dtype))
    out = imp.emit(R.nn.layer_norm(total, gamma, beta, [len(_sinfo(total).values) - 1],
                                   attrs.get("epsilon", 1e-12)))
    extra = [Unavailable("SkipLayerNormalization's mean"),
             Unavailable("SkipLayerNormalization's inverse std"), total]
    return [out] + extra[:len(node.output) - 1]


@converter("Attention")
def _attention(imp: Any, node: Any, inputs: list, attrs: dict) -> list:
    """Multi-head self-attention: ``input @ weight + bias`` split into Q, K, V
    (``qkv_hidden_sizes`` or three equal parts), ``softmax(Q K^T * scale + mask) V`` per head.
    ``mask_index``: a (B, S) or (B, S, S) 0/1 mask (0 adds ``mask_filter_value``);
    ``unidirectional`` masks later positions."""
    if len(inputs) > 4 and inputs[4] is not None:
        raise NotImplementedError("Attention with a past state")
    if len(inputs) > 5 and inputs[5] is not None:
        raise NotImplementedError("Attention with an attention bias input")
    x, w = operands(imp, inputs[0], inputs[1])
    b, s_len = (_static(d) for d in _sinfo(x).values[:2])
    heads = attrs["num_heads"]
    qkv = imp.emit(R.matmul(x, w))
    if len(inputs) > 2 and inputs[2] is not None:
        qkv = imp.emit(R.add(*operands(imp, qkv, inputs[2])))
    total = _static(_sinfo(qkv).values[-1])
    sizes = attrs.get("qkv_hidden_sizes") or [total // 3] * 3
    parts = imp.emit(R.split(qkv, [sizes[0], sizes[0] + sizes[1]], 2))
    dims = _sinfo(x).values[:2]

    def heads_of(k: int) -> Expr:
        t = imp.emit(TupleGetItem(parts, k))
        t = imp.emit(R.reshape(t, list(dims) + [heads, sizes[k] // heads]))
        return imp.emit(R.permute_dims(t, [0, 2, 1, 3]))           # B, H, S, D
    q, k, v = heads_of(0), heads_of(1), heads_of(2)
    dtype = _sinfo(x).dtype
    head = sizes[0] // heads
    scale = attrs.get("scale", 1.0 / np.sqrt(head))
    scores = imp.emit(R.matmul(q, imp.emit(R.permute_dims(k, [0, 1, 3, 2]))))
    scores = imp.emit(R.multiply(scores, imp.expr(np.asarray(scale, dtype))))
    fill = attrs.get("mask_filter_value", -10000.0)
    if len(inputs) > 3 and inputs[3] is not None:
        mask = imp.expr(inputs[3])
        rank = len(_sinfo(mask).values)
        if rank not in (2, 3):
            raise NotImplementedError(f"Attention with a {rank}-d mask_index (supported: "
                                      "(B, S) and (B, S, S) 0/1 masks)")
        keep = imp.emit(R.astype(mask, dtype))
        keep = imp.emit(R.reshape(keep, [b, 1, 1, -1] if rank == 2 else [b, 1, s_len, -1]))
        penalty = imp.emit(R.multiply(imp.emit(R.subtract(imp.expr(np.asarray(1, dtype)),
                                                          keep)),
                                      imp.expr(np.asarray(fill, dtype))))
        scores = imp.emit(R.add(scores, penalty))
    if attrs.get("unidirectional", 0):
        n = s_len
        causal = np.triu(np.full((n, n), fill, dtype), 1)
        scores = imp.emit(R.add(scores, imp.expr(causal)))
    probs = imp.emit(R.nn.softmax(scores, -1))
    out = imp.emit(R.matmul(probs, v))                                  # B, H, S, Dv
    out = imp.emit(R.permute_dims(out, [0, 2, 1, 3]))
    out = imp.emit(R.reshape(out, list(dims) + [sizes[2]]))
    return [out] + [Unavailable("Attention's present state")][:len(node.output) - 1]


@converter("EmbedLayerNormalization")
def _embed_layer_norm(imp: Any, node: Any, inputs: list, attrs: dict) -> list:
    """``layer_norm(word[ids] + position[positions] + segment[segment ids])``; the second
    output is the number of ones in each row of ``mask`` (int32), the third the sum before the
    normalisation."""
    ids = imp.expr(inputs[0])
    seg_ids = inputs[1] if len(inputs) > 1 else None
    word, pos = imp.expr(inputs[2]), imp.expr(inputs[3])
    seg = inputs[4] if len(inputs) > 4 else None
    gamma, beta = imp.expr(inputs[5]), imp.expr(inputs[6])
    mask = inputs[7] if len(inputs) > 7 else None
    positions = inputs[8] if len(inputs) > 8 else None
    b, s_len = _sinfo(ids).values
    total = imp.emit(R.take(word, ids, axis=0))
    if positions is not None:
        where = imp.expr(positions)
        if len(_sinfo(where).values) == 1:
            where = imp.emit(R.expand_dims(where, 0))
    else:
        where = imp.emit(R.expand_dims(imp.emit(R.arange(0, s_len, 1, "int64")), 0))
    total = imp.emit(R.add(total, imp.emit(R.take(pos, where, axis=0))))
    if seg is not None and seg_ids is not None:
        total = imp.emit(R.add(total, imp.emit(R.take(imp.expr(seg), imp.expr(seg_ids),
                                                      axis=0))))
    hidden = len(_sinfo(total).values) - 1
    out = imp.emit(R.nn.layer_norm(total, gamma, beta, [hidden], attrs.get("epsilon", 1e-12)))
    if mask is not None:
        count = imp.emit(R.sum(imp.emit(R.astype(imp.expr(mask), "int32")), [1]))
    else:
        count = imp.expr(np.zeros([_static(b)], "int32"))
    return [out, count, total][:len(node.output)]


__all__: list[str] = []
