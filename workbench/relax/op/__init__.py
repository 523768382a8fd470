"""Relax operators (``relax.op``): constructors that build op calls.

Each family module registers its ops with their struct-info inference, legalization and numpy
rules (see :mod:`workbench.relax.op.registry`). ``relax.op.nn`` holds the neural-network ops.
"""
from workbench.relax.op.base import (
    call_dps_packed, call_pure_packed, call_tir, call_tir_inplace,
)
from workbench.relax.op.binary import (
    add, bitwise_and, bitwise_or, bitwise_xor, divide, equal, floor_divide, floor_mod, greater,
    greater_equal, left_shift, less, less_equal, logical_and, logical_or, maximum, minimum, mod,
    multiply, not_equal, power, right_shift, subtract,
)
from workbench.relax.op.datatype import astype
from workbench.relax.op.dynamic import arange, tensor_to_shape
from workbench.relax.op.einsum import einsum
from workbench.relax.op.index import strided_slice, take
from workbench.relax.op.layout import layout_transform
from workbench.relax.op.linear_algebra import linear, matmul
from workbench.relax.op.manipulate import (
    broadcast_to, concat, expand_dims, flatten, permute_dims, reshape, split, squeeze,
)
from workbench.relax.op.quantize import dequantize, quantize, requantize
from workbench.relax.op.scatter import gather_elements, gather_nd, scatter_elements, scatter_nd
from workbench.relax.op.search import argmax, argmin, where
from workbench.relax.op.sorting import cumprod, cumsum, topk
from workbench.relax.op.statistical import max, mean, min, prod, sum  # noqa: A004
from workbench.relax.op.unary import (
    abs, atan, bitwise_not, ceil, clip, cos, erf, exp, floor, isinf, isnan, log, logical_not,
    negative, round, rsqrt, sigmoid, sign, sin, sqrt, square, tan, tanh, trunc,
)
from workbench.relax.op import image, nn, vision
from workbench.relax.op.registry import get_op, list_ops, OpError

__all__ = [
    "call_tir", "call_tir_inplace", "call_dps_packed", "call_pure_packed", "add", "subtract", "multiply", "divide", "floor_divide", "mod", "floor_mod",
    "power", "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "astype", "strided_slice", "take", "matmul",
    "linear", "broadcast_to", "concat", "expand_dims", "flatten", "permute_dims", "reshape",
    "split", "squeeze", "argmax", "argmin", "where", "sum", "mean", "max", "min", "prod",
    "abs", "ceil", "clip", "cos", "erf", "exp", "floor", "log", "logical_not", "negative",
    "round", "rsqrt", "sigmoid", "sin", "sqrt", "square", "tanh", "nn", "get_op", "list_ops",
    "OpError", "requantize", "quantize", "dequantize", "layout_transform", "einsum",
    "gather_elements", "gather_nd", "scatter_elements", "scatter_nd", "cumsum", "cumprod", "topk",
    "image", "tensor_to_shape", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
    "left_shift", "right_shift", "tan", "atan", "vision", "arange",
    "trunc", "sign", "isnan", "isinf",
]
