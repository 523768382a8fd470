"""Operator library written with te (TVM's ``tvm.topi``): each function takes te Tensors and
returns the te Tensor of the result, ready for :func:`workbench.te.create_prim_func`.

Families: :mod:`.broadcast` (binary elementwise with numpy broadcasting, ``where``),
:mod:`.math` (unary elementwise, ``cast``), :mod:`.reduction` (``sum``/``max``/``argmax``...),
:mod:`.transform` (``transpose``, ``reshape``, ``concatenate``, ``strided_slice``, ``take``),
and :mod:`.nn` (convolutions, pooling, matmul/dense/batch_matmul, softmax, layer_norm, pad,
activations). The graph-IR legalizer lowers its operators through these functions.

Conventions (TVM's, which fusion and the tuner's workload features rely on): stages are named
``T_<op>`` (``T_add``, ``T_softmax_norm``, ``T_matmul_NT``) or after the layout
(``conv2d_nchw``, ``pool_max``); padding is its own stage (``pad_temp``); tags say the pattern
(``elemwise``, ``broadcast``, ``injective``, ``comm_reduce``, ``conv2d_nchw``...). Weights of
matmul/conv are listed in the ``layout_free_placeholders`` attr. Shapes are static ints except
where a docstring says otherwise (broadcast/elementwise/reduction accept symbolic extents).
"""
from workbench.topi import nn, utils
from workbench.topi.broadcast import (
    add, bitwise_and, bitwise_or, bitwise_xor, broadcast_to, divide, equal, floor_divide,
    floor_mod, greater, greater_equal, left_shift, less, less_equal, logical_and, logical_or,
    maximum, minimum, mod, multiply, not_equal, power, right_shift, subtract, where,
)
from workbench.topi.math import (
    abs, atan, bitwise_not, cast, ceil, clip, cos, erf, exp, exp2, exp10, fast_exp, floor,
    identity, isfinite, isinf, isnan, log, log1p, log2, log10, logical_not, negative, round,
    rsqrt, sigmoid, sign, sin, sqrt, tan, tanh, trunc,
)
from workbench.topi.reduction import all, any, argmax, argmin, max, mean, min, prod, sum
from workbench.topi.transform import (
    concatenate, expand_dims, reshape, squeeze, stack, strided_slice, take, transpose,
)
from workbench.topi.nn.dense import matmul as _nn_matmul


def matmul(a, b, transp_a: bool = False, transp_b: bool = False):
    """TVM's generic ``topi.matmul(a, b, transp_a, transp_b)`` (see :func:`nn.matmul`)."""
    return _nn_matmul(a, b, transpose_a=transp_a, transpose_b=transp_b)


__all__ = [
    "nn", "utils", "add", "subtract", "multiply", "divide", "floor_divide", "mod", "floor_mod",
    "maximum", "minimum", "power", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "logical_not", "bitwise_and", "bitwise_or",
    "bitwise_xor", "bitwise_not", "left_shift", "right_shift", "where", "broadcast_to",
    "exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "sin", "cos",
    "tan", "atan", "tanh", "sigmoid", "erf", "floor", "ceil", "round", "trunc", "abs",
    "negative", "sign", "isnan", "isinf", "isfinite", "identity", "cast", "clip", "fast_exp",
    "sum", "max", "min", "prod", "mean", "all", "any", "argmax", "argmin",
    "transpose", "reshape", "expand_dims", "squeeze", "concatenate", "stack", "strided_slice",
    "take", "matmul",
]
