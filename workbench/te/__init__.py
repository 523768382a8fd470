"""Tensor expressions: describe a computation with placeholder / compute / reduce_axis, then
turn it into a block-form PrimFunc with :func:`create_prim_func` (TVM's ``tvm.te``)."""
from workbench.tir.expr import SizeVar, Var
from workbench.tir.op import (
    abs, all, any, atan, atan2, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, cast, ceil,
    const, cos, erf, exp, exp2, exp10, fabs, floor, floordiv, floormod, fmod, if_then_else,
    infinity, isfinite, isinf, isnan, log, log1p, log2, log10, logical_and, logical_not,
    logical_or, max_value, min_value, nearbyint, popcount, pow, round, rsqrt, select,
    shift_left, shift_right, sigmoid, sin, sqrt, tan, tanh, trunc, truncdiv, truncmod,
)
from workbench.te.reduction import AxisIterVar, CommReducer, comm_reducer, max, min, reduce_axis, sum
from workbench.te.tensor import (
    ComputeOp, Operation, PlaceholderOp, Tensor, compute, placeholder,
)
from workbench.te.create_prim_func import create_prim_func

power = pow
div = truncdiv
indexdiv = floordiv
indexmod = floormod


def var(name: str = "tindex", dtype: str = "int32") -> Var:
    """A symbolic variable (a shape dimension or a scalar parameter)."""
    from workbench.ir.dtype import normalize
    return Var(name, normalize(dtype))


def size_var(name: str = "size", dtype: str = "int32") -> SizeVar:
    """A symbolic variable known to be non-negative, for shape dimensions."""
    from workbench.ir.dtype import normalize
    return SizeVar(name, normalize(dtype))


__all__ = [
    "Tensor", "Operation", "PlaceholderOp", "ComputeOp", "CommReducer", "AxisIterVar",
    "placeholder", "compute", "reduce_axis", "comm_reducer", "sum", "min", "max",
    "create_prim_func", "var", "size_var", "const", "if_then_else", "select", "cast",
    "exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "tanh", "sigmoid",
    "erf", "sin", "cos", "tan", "atan", "atan2", "floor", "ceil", "round", "trunc", "nearbyint",
    "abs", "fabs", "pow", "power", "fmod", "isnan", "isinf", "isfinite", "popcount",
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "shift_left", "shift_right",
    "floordiv", "floormod", "truncdiv", "truncmod", "div", "indexdiv", "indexmod",
    "logical_and", "logical_or", "logical_not", "all", "any", "max_value", "min_value",
    "infinity",
]
