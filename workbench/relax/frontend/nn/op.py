"""Functional ops for nn modules (TVM's ``relax.frontend.nn.op``): each emits one Relax op call,
named after the op, and returns nn Tensor(s)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Expr, Tuple, const
from workbench.relax.frontend.nn.core import Tensor, wrap
from workbench.relax.frontend.nn.extern_ops import (
    extern, tensor_expr_op, tensor_ir_inplace_op, tensor_ir_op,
)


def _e(x: Any, like: Tensor | None = None) -> Expr:
    """The Relax value of ``x``: a Tensor's expression, or a scalar constant in ``like``'s dtype."""
    if isinstance(x, Tensor):
        return x.expr
    if isinstance(x, Expr):
        return x
    if isinstance(x, (int, float, bool, np.generic)):
        dtype = like.dtype if like is not None else None
        return const(x, dtype)
    raise TypeError(f"nn.op: expected an nn.Tensor or a number, got {x!r}")


def _binary(fn: Any, name: str, a: Any, b: Any) -> Tensor:
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    return wrap(fn(_e(a, like), _e(b, like)), name)


def add(a: Any, b: Any, name: str = "add") -> Tensor: return _binary(R.add, name, a, b)
def subtract(a: Any, b: Any, name: str = "subtract") -> Tensor:
    return _binary(R.subtract, name, a, b)
def multiply(a: Any, b: Any, name: str = "mul") -> Tensor: return _binary(R.multiply, name, a, b)
def divide(a: Any, b: Any, name: str = "divide") -> Tensor: return _binary(R.divide, name, a, b)
def maximum(a: Any, b: Any, name: str = "maximum") -> Tensor: return _binary(R.maximum, name, a, b)
def minimum(a: Any, b: Any, name: str = "minimum") -> Tensor: return _binary(R.minimum, name, a, b)


def matmul(a: Tensor, b: Tensor, out_dtype: str | None = None, name: str = "matmul") -> Tensor:
    return wrap(R.matmul(_e(a), _e(b), out_dtype), name)


def negative(x: Tensor, name: str = "neg") -> Tensor: return wrap(R.negative(_e(x)), name)
def exp(x: Tensor, name: str = "exp") -> Tensor: return wrap(R.exp(_e(x)), name)
def sqrt(x: Tensor, name: str = "sqrt") -> Tensor: return wrap(R.sqrt(_e(x)), name)
def square(x: Tensor, name: str = "square") -> Tensor: return wrap(R.square(_e(x)), name)
def sigmoid(x: Tensor, name: str = "sigmoid") -> Tensor: return wrap(R.sigmoid(_e(x)), name)
def tanh(x: Tensor, name: str = "tanh") -> Tensor: return wrap(R.tanh(_e(x)), name)
def relu(x: Tensor, name: str = "relu") -> Tensor: return wrap(R.nn.relu(_e(x)), name)
def silu(x: Tensor, name: str = "silu") -> Tensor: return wrap(R.nn.silu(_e(x)), name)


def gelu(x: Tensor, approximate: str | None = None, name: str = "gelu") -> Tensor:
    fn = R.nn.gelu_tanh if approximate == "tanh" else R.nn.gelu
    return wrap(fn(_e(x)), name)


def softmax(x: Tensor, axis: int = -1, name: str = "softmax") -> Tensor:
    return wrap(R.nn.softmax(_e(x), axis), name)


def astype(x: Tensor, dtype: str, name: str = "astype") -> Tensor:
    return wrap(R.astype(_e(x), dtype), name)


def reshape(x: Tensor, shape: Sequence[Any], name: str = "reshape") -> Tensor:
    return wrap(R.reshape(_e(x), tuple(shape)), name)


def permute_dims(x: Tensor, axes: Sequence[int] | None = None,
                 name: str = "permute_dims") -> Tensor:
    return wrap(R.permute_dims(_e(x), axes), name)


def unsqueeze(x: Tensor, dim: int, name: str = "unsqueeze") -> Tensor:
    return wrap(R.expand_dims(_e(x), dim), name)


def squeeze(x: Tensor, axis: int | None = None, name: str = "squeeze") -> Tensor:
    return wrap(R.squeeze(_e(x), axis), name)


def concat(xs: Sequence[Tensor], dim: int = 0, name: str = "concat") -> Tensor:
    return wrap(R.concat(Tuple(tuple(_e(x) for x in xs)), dim), name)


def split(x: Tensor, indices_or_sections: Any, axis: int = 0, name: str = "split") -> tuple:
    return wrap(R.split(_e(x), indices_or_sections, axis), name)


def take(x: Tensor, indices: Tensor, axis: int | None = None, name: str = "take") -> Tensor:
    return wrap(R.take(_e(x), _e(indices), axis), name)


def sum(x: Tensor, axis: Any = None, keepdims: bool = False,  # noqa: A001 - TVM's name
        name: str = "sum") -> Tensor:
    return wrap(R.sum(_e(x), axis, keepdims), name)


def mean(x: Tensor, axis: Any = None, keepdims: bool = False, name: str = "mean") -> Tensor:
    return wrap(R.mean(_e(x), axis, keepdims), name)


def broadcast_to(x: Tensor, shape: Sequence[Any], name: str = "broadcast_to") -> Tensor:
    return wrap(R.broadcast_to(_e(x), tuple(shape)), name)


def layer_norm(x: Tensor, normalized_shape: int | Sequence[int], weight: Tensor | None,
               bias: Tensor | None, eps: float = 1e-5, name: str = "layer_norm") -> Tensor:
    """Layer norm over the trailing ``len(normalized_shape)`` axes (PyTorch's convention)."""
    n = 1 if isinstance(normalized_shape, int) else len(normalized_shape)
    axes = list(range(-n, 0))
    shape = [normalized_shape] if isinstance(normalized_shape, int) else list(normalized_shape)
    w = _e(weight) if weight is not None else const(np.ones(shape, x.dtype))
    b = _e(bias) if bias is not None else const(np.zeros(shape, x.dtype))
    return wrap(R.nn.layer_norm(_e(x), w, b, axes, eps), name)


def rms_norm(x: Tensor, weight: Tensor, axes: int | Sequence[int], epsilon: float = 1e-5,
             name: str = "rms_norm") -> Tensor:
    return wrap(R.nn.rms_norm(_e(x), _e(weight), axes, epsilon), name)


def conv2d(x: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,
           padding: Any = 0, dilation: Any = 1, groups: int = 1, data_layout: str = "NCHW",
           name: str = "conv2d") -> Tensor:
    out = wrap(R.nn.conv2d(_e(x), _e(weight), stride, padding, dilation, groups, data_layout),
               name)
    if bias is None:
        return out
    shape = [1, -1, 1, 1] if data_layout == "NCHW" else [1, 1, 1, -1]
    return add(out, reshape(bias, shape))


def max_pool2d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               dilation: Any = 1, ceil_mode: bool = False, layout: str = "NCHW",
               name: str = "max_pool2d") -> Tensor:
    stride = kernel_size if stride is None else stride
    return wrap(R.nn.max_pool2d(_e(x), kernel_size, stride, padding, dilation, ceil_mode,
                                layout=layout), name)


def avg_pool2d(x: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,
               ceil_mode: bool = False, count_include_pad: bool = False,
               layout: str = "NCHW", name: str = "avg_pool2d") -> Tensor:
    stride = kernel_size if stride is None else stride
    return wrap(R.nn.avg_pool2d(_e(x), kernel_size, stride, padding, 1, ceil_mode,
                                count_include_pad, layout), name)


def adaptive_avg_pool2d(x: Tensor, output_size: Any, layout: str = "NCHW",
                        name: str = "adaptive_avg_pool2d") -> Tensor:
    return wrap(R.nn.adaptive_avg_pool2d(_e(x), output_size, layout), name)


def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor,
                                 attn_mask: Tensor | None = None, is_causal: bool = False,
                                 scale: float | None = None, name: str = "attention") -> Tensor:
    """Attention in BSNH layout (batch, seq, heads, head_dim), as ``relax.op.nn.attention``."""
    bias = _e(attn_mask) if attn_mask is not None else None
    return wrap(R.nn.attention(_e(query), _e(key), _e(value), bias, scale,
                               "TopLeft" if is_causal else None), name)


def less_equal(a: Any, b: Any, name: str = "less_equal") -> Tensor:
    return _binary(R.less_equal, name, a, b)


def where(cond: Tensor, a: Any, b: Any, name: str = "where") -> Tensor:
    like = a if isinstance(a, Tensor) else b if isinstance(b, Tensor) else None
    return wrap(R.where(_e(cond), _e(a, like), _e(b, like)), name)


__all__ = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "matmul", "negative",
           "exp", "sqrt", "square", "sigmoid", "tanh", "relu", "silu", "gelu", "softmax",
           "astype", "reshape", "permute_dims", "unsqueeze", "squeeze", "concat", "split",
           "take", "sum", "mean", "broadcast_to", "layer_norm", "rms_norm", "conv2d",
           "max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "scaled_dot_product_attention",
           "tensor_ir_op", "tensor_ir_inplace_op", "less_equal", "where", "extern",
           "tensor_expr_op"]

