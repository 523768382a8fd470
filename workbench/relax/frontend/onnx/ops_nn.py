"""ONNX converters: normalisation, Gemm / MatMul, reductions (convolutions and pools are in
:mod:`.ops_conv`)."""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Expr
from workbench.relax.frontend.onnx._registry import Unavailable, converter
from workbench.relax.frontend.onnx.ops_elementwise import operands
from workbench.relax.struct_info import TensorStructInfo
from workbench.tir.expr import IntImm


def _sinfo(e: Expr) -> TensorStructInfo:
    return e.struct_info


def _static(d: Any) -> int | None:
    return int(d.value) if isinstance(d, IntImm) else None


# ---- normalisation -------------------------------------------------------------------------------

def _bn_check(imp: Any, node: Any) -> str | None:
    for a in node.attribute:
        if a.name == "training_mode" and a.i:
            return "training_mode=1"
    return None


@converter("BatchNormalization", check=_bn_check)
def _batch_norm(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x, gamma, beta, mean, var = operands(imp, *inputs[:5])
    out = imp.emit(R.nn.batch_norm(x, gamma, beta, mean, var, axis=1,
                                   epsilon=attrs.get("epsilon", 1e-5)))
    return out[0]


@converter("LayerNormalization")
def _layer_norm(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    x = imp.expr(inputs[0])
    rank = len(_sinfo(x).values)
    axis = attrs.get("axis", -1) % rank
    axes = list(range(axis, rank))
    gamma = imp.expr(inputs[1])
    if len(inputs) > 2 and inputs[2] is not None:
        beta = imp.expr(inputs[2])
    else:
        beta = imp.expr(np.zeros([_static(d) for d in _sinfo(x).values[axis:]],
                                 dtype=_sinfo(x).dtype))
    out = imp.emit(R.nn.layer_norm(x, gamma, beta, axes, attrs.get("epsilon", 1e-5)))
    extra = [Unavailable("LayerNormalization's mean"),
             Unavailable("LayerNormalization's inverse std")]
    return [out] + extra[:len(node.output) - 1]


@converter("InstanceNormalization")
def _instance_norm(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x, scale, bias = operands(imp, *inputs[:3])
    rank = len(_sinfo(x).values)
    axes = list(range(2, rank))
    dtype = _sinfo(x).dtype
    mean = imp.emit(R.mean(x, axes, keepdims=True))
    centred = imp.emit(R.subtract(x, mean))
    var = imp.emit(R.mean(imp.emit(R.multiply(centred, centred)), axes, keepdims=True))
    eps = imp.expr(np.asarray(attrs.get("epsilon", 1e-5), dtype=dtype))
    normed = imp.emit(R.multiply(centred, imp.emit(R.rsqrt(imp.emit(R.add(var, eps))))))
    per_channel = [1, -1] + [1] * (rank - 2)
    scale = imp.emit(R.reshape(scale, per_channel))
    bias = imp.emit(R.reshape(bias, per_channel))
    return R.add(imp.emit(R.multiply(normed, scale)), bias)


def _normalize_over(imp: Any, x: Expr, axes: list[int], eps: float) -> Expr:
    """``(x - mean) / sqrt(var + eps)`` over ``axes`` (biased variance)."""
    mean = imp.emit(R.mean(x, axes, keepdims=True))
    centred = imp.emit(R.subtract(x, mean))
    var = imp.emit(R.mean(imp.emit(R.multiply(centred, centred)), axes, keepdims=True))
    eps_c = imp.expr(np.asarray(eps, dtype=_sinfo(x).dtype))
    return imp.emit(R.multiply(centred, imp.emit(R.rsqrt(imp.emit(R.add(var, eps_c))))))


@converter("MeanVarianceNormalization")
def _mvn(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    rank = len(_sinfo(x).values)
    axes = [a % rank for a in attrs.get("axes", [0, 2, 3])]
    # ONNX's function body: (x - mean) / (sqrt(E[x^2] - E[x]^2) + 1e-9).
    mean = imp.emit(R.mean(x, axes, keepdims=True))
    sq_mean = imp.emit(R.mean(imp.emit(R.multiply(x, x)), axes, keepdims=True))
    var = imp.emit(R.subtract(sq_mean, imp.emit(R.multiply(mean, mean))))
    eps = imp.expr(np.asarray(1e-9, dtype=_sinfo(x).dtype))
    std = imp.emit(R.add(imp.emit(R.sqrt(var)), eps))
    return R.divide(imp.emit(R.subtract(x, mean)), std)


@converter("GroupNormalization")
def _group_norm(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x, scale, bias = operands(imp, *inputs[:3])
    dims = _sinfo(x).values
    rank = len(dims)
    g = attrs["num_groups"]
    grouped = imp.emit(R.reshape(x, [dims[0], g, -1]))
    normed = imp.emit(R.reshape(_normalize_over(imp, grouped, [2], attrs.get("epsilon", 1e-5)),
                                list(dims)))
    c = _static(dims[1])
    per_channel = [1, -1] + [1] * (rank - 2)
    if _static(_sinfo(scale).values[0]) == g and c != g:  # opset 18's per-group scale/bias
        scale = imp.emit(R.reshape(imp.emit(R.broadcast_to(imp.emit(R.reshape(scale, [g, 1])),
                                                           [g, c // g])), [c]))
        bias = imp.emit(R.reshape(imp.emit(R.broadcast_to(imp.emit(R.reshape(bias, [g, 1])),
                                                          [g, c // g])), [c]))
    scale = imp.emit(R.reshape(scale, per_channel))
    bias = imp.emit(R.reshape(bias, per_channel))
    return R.add(imp.emit(R.multiply(normed, scale)), bias)


@converter("RMSNormalization")
def _rms_norm(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x, scale = operands(imp, *inputs[:2])
    rank = len(_sinfo(x).values)
    axis = attrs.get("axis", -1) % rank
    sq = imp.emit(R.mean(imp.emit(R.multiply(x, x)), list(range(axis, rank)), keepdims=True))
    eps = imp.expr(np.asarray(attrs.get("epsilon", 1e-5), dtype=_sinfo(x).dtype))
    normed = imp.emit(R.multiply(x, imp.emit(R.rsqrt(imp.emit(R.add(sq, eps))))))
    return R.multiply(normed, scale)


@converter("LpNormalization")
def _lp_norm(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    axis = attrs.get("axis", -1) % len(_sinfo(x).values)
    if attrs.get("p", 2) == 1:
        norm = imp.emit(R.sum(imp.emit(R.abs(x)), [axis], keepdims=True))
    else:
        norm = imp.emit(R.sqrt(imp.emit(R.sum(imp.emit(R.multiply(x, x)), [axis],
                                              keepdims=True))))
    return R.divide(x, norm)


@converter("LRN")
def _lrn(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    """x / (bias + alpha / size * (sum of x^2 over a window of ``size`` channels))^beta."""
    x = imp.expr(inputs[0])
    dims = _sinfo(x).values
    size = attrs["size"]
    alpha, beta, bias = attrs.get("alpha", 1e-4), attrs.get("beta", 0.75), attrs.get("bias", 1.0)
    lo, hi = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = imp.emit(R.multiply(x, x))
    width = [(0, 0)] * len(dims)
    width[1] = (lo, hi)
    padded = imp.emit(R.nn.pad(sq, width))
    c = _static(dims[1])
    total = None
    for k in range(size):
        part = imp.emit(R.strided_slice(padded, [1], [k], [k + c]))
        total = part if total is None else imp.emit(R.add(total, part))
    dtype = _sinfo(x).dtype
    scaled = imp.emit(R.add(imp.expr(np.asarray(bias, dtype)),
                            imp.emit(R.multiply(total, imp.expr(np.asarray(alpha / size,
                                                                           dtype))))))
    return R.divide(x, imp.emit(R.power(scaled, imp.expr(np.asarray(beta, dtype)))))


@converter("Hardmax")
def _hardmax(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    dims = _sinfo(x).values
    axis = attrs.get("axis", -1) % len(dims)
    n = _static(dims[axis])
    best = imp.emit(R.argmax(x, axis, keepdims=True))
    shape = [1] * len(dims)
    shape[axis] = n
    positions = imp.expr(np.arange(n, dtype=_sinfo(best).dtype).reshape(shape))
    hit = imp.emit(R.equal(best, positions))
    dtype = _sinfo(x).dtype
    return R.where(hit, imp.expr(np.ones((), dtype)), imp.expr(np.zeros((), dtype)))


# ---- matrix products ---------------------------------------------------------------------------

@converter("MatMul")
def _matmul(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    a, b = operands(imp, *inputs)
    return R.matmul(a, b)


@converter("Gemm")
def _gemm(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    a, b = operands(imp, inputs[0], inputs[1])
    if attrs.get("transA", 0):
        a = imp.emit(R.permute_dims(a, [1, 0]))
    if attrs.get("transB", 0):
        b = imp.emit(R.permute_dims(b, [1, 0]))
    dtype = _sinfo(a).dtype
    out = imp.emit(R.matmul(a, b))
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    if alpha != 1.0:
        out = imp.emit(R.multiply(out, imp.expr(np.asarray(alpha, dtype=dtype))))
    if len(inputs) > 2 and inputs[2] is not None and beta != 0.0:
        c = operands(imp, out, inputs[2])[1]
        if beta != 1.0:
            c = imp.emit(R.multiply(c, imp.expr(np.asarray(beta, dtype=dtype))))
        return R.add(out, c)
    return out


# ---- reductions ----------------------------------------------------------------------------------

def _reduce_axes(imp: Any, inputs: list, attrs: dict, rank: int) -> list[int] | None:
    axes = attrs.get("axes")
    if len(inputs) > 1 and inputs[1] is not None:
        known = imp.known(inputs[1])
        if known is None:
            raise NotImplementedError("reduction axes computed at run time")
        axes = [int(a) for a in known.reshape(-1)]
    if not axes:
        return [] if attrs.get("noop_with_empty_axes", 0) else None
    return [a % rank for a in axes]


def _reduce(fn: Any, square: bool = False):
    def convert(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
        x = imp.expr(inputs[0])
        axes = _reduce_axes(imp, inputs, attrs, len(_sinfo(x).values))
        if axes == []:
            return x
        if square:
            x = imp.emit(R.multiply(x, x))
        return fn(x, axes, bool(attrs.get("keepdims", 1)))
    return convert


converter("ReduceMean")(_reduce(R.mean))
converter("ReduceSum")(_reduce(R.sum))
converter("ReduceMax")(_reduce(R.max))
converter("ReduceMin")(_reduce(R.min))
converter("ReduceProd")(_reduce(R.prod))
converter("ReduceSumSquare")(_reduce(R.sum, square=True))


@converter("ReduceL2")
def _reduce_l2(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    return R.sqrt(imp.emit(_reduce(R.sum, square=True)(imp, node, inputs, attrs)))


@converter("ReduceL1")
def _reduce_l1(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.emit(R.abs(imp.expr(inputs[0])))
    return _reduce(R.sum)(imp, node, [x] + list(inputs[1:]), attrs)


@converter("ReduceLogSum")
def _reduce_log_sum(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    return R.log(imp.emit(_reduce(R.sum)(imp, node, inputs, attrs)))


@converter("ReduceLogSumExp")
def _reduce_log_sum_exp(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    # max + log(sum(exp(x - max))): no overflow for large inputs.
    x = imp.expr(inputs[0])
    top = imp.emit(_reduce(R.max)(imp, node, [x] + list(inputs[1:]), {**attrs, "keepdims": 1}))
    shifted = imp.emit(R.exp(imp.emit(R.subtract(x, top))))
    total = imp.emit(_reduce(R.sum)(imp, node, [shifted] + list(inputs[1:]), attrs))
    if not attrs.get("keepdims", 1):
        axes = _reduce_axes(imp, inputs, attrs, len(_sinfo(x).values))
        top = imp.emit(R.squeeze(top, axes))
    return R.add(imp.emit(R.log(total)), top)


def _arg(fn: Any):
    def convert(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
        if attrs.get("select_last_index", 0):
            raise NotImplementedError(f"{node.op_type} with select_last_index=1")
        return fn(imp.expr(inputs[0]), attrs.get("axis", 0), bool(attrs.get("keepdims", 1)))
    return convert


converter("ArgMax")(_arg(R.argmax))
converter("ArgMin")(_arg(R.argmin))


@converter("Dropout")
def _dropout(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    x = imp.expr(inputs[0])
    if len(node.output) > 1 and node.output[1]:
        return [x, Unavailable("Dropout's mask")]
    return x


__all__: list[str] = []
