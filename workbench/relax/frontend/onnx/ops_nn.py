"""ONNX converters: convolution, pooling, normalisation, Gemm / MatMul, reductions."""
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


def _same_pads(size: int, k: int, s: int, d: int, upper: bool) -> tuple[int, int]:
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    small, big = total // 2, total - total // 2
    return (small, big) if upper else (big, small)


def _window(node: Any, x: Expr, attrs: dict, kernel: list[int]) -> tuple:
    """``(strides, dilations, pads (top, left, bottom, right))`` of a 2-d window op."""
    strides = attrs.get("strides", [1, 1])
    dilations = attrs.get("dilations", [1, 1])
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        hw = [_static(d) for d in _sinfo(x).values[2:]]
        if None in hw:
            raise NotImplementedError(f"{node.op_type} with auto_pad={auto} on a dynamic size")
        (t, b), (lft, r) = (_same_pads(hw[i], kernel[i], strides[i], dilations[i],
                                       auto == "SAME_UPPER") for i in range(2))
        pads = [t, lft, b, r]
    elif auto == "VALID":
        pads = [0, 0, 0, 0]
    else:
        pads = attrs.get("pads", [0, 0, 0, 0])
    return strides, dilations, pads


def _rank_check(*ranks: int):
    def check(imp: Any, node: Any) -> str | None:
        for a in node.attribute:
            if a.name == "kernel_shape" and len(a.ints) not in ranks:
                return f"{len(a.ints)}-d windows (supported: {', '.join(map(str, ranks))}-d)"
        return None
    return check


def _to_2d(imp: Any, x: Expr, attrs: dict) -> tuple[Expr, dict, bool]:
    """1-d windows run as 2-d ones over (N, C, 1, L)."""
    if len(_sinfo(x).values) != 3:
        return x, attrs, False
    attrs = dict(attrs)
    for name, unit in (("strides", 1), ("dilations", 1), ("kernel_shape", 1)):
        if name in attrs:
            attrs[name] = [unit] + list(attrs[name])
    if "pads" in attrs:
        p = attrs["pads"]
        attrs["pads"] = [0, p[0], 0, p[1]]
    return imp.emit(R.expand_dims(x, 2)), attrs, True


@converter("Conv", check=_rank_check(1, 2))
def _conv(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x, w = imp.expr(inputs[0]), imp.expr(inputs[1])
    x, attrs, one_d = _to_2d(imp, x, attrs)
    if one_d:
        w = imp.emit(R.expand_dims(w, 2))
    kernel = [_static(d) for d in _sinfo(w).values[2:]]
    strides, dilations, pads = _window(node, x, attrs, kernel)
    out = imp.emit(R.nn.conv2d(x, w, strides, pads, dilations, attrs.get("group", 1)))
    if len(inputs) > 2 and inputs[2] is not None:
        bias = imp.emit(R.reshape(imp.expr(inputs[2]), [1, -1, 1, 1]))
        out = imp.emit(R.add(out, bias))
    return R.squeeze(out, [2]) if one_d else out


def _pool(kind: str):
    def convert(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
        x, attrs, one_d = _to_2d(imp, imp.expr(inputs[0]), attrs)
        kernel = attrs["kernel_shape"]
        strides, dilations, pads = _window(node, x, attrs, kernel)
        ceil = bool(attrs.get("ceil_mode", 0))
        if kind == "max":
            out = R.nn.max_pool2d(x, kernel, strides, pads, dilations, ceil)
        else:
            out = R.nn.avg_pool2d(x, kernel, strides, pads, dilations, ceil,
                                  bool(attrs.get("count_include_pad", 0)))
        out = imp.emit(out)
        if one_d:
            out = imp.emit(R.squeeze(out, [2]))
        if kind == "max" and len(node.output) > 1:
            return [out, Unavailable("MaxPool's indices")]
        return out
    return convert


converter("MaxPool", check=_rank_check(1, 2))(_pool("max"))
converter("AveragePool", check=_rank_check(1, 2))(_pool("avg"))


@converter("GlobalAveragePool")
def _global_avg(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    return R.mean(x, list(range(2, len(_sinfo(x).values))), keepdims=True)


@converter("GlobalMaxPool")
def _global_max(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    return R.max(x, list(range(2, len(_sinfo(x).values))), keepdims=True)


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
