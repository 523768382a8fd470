"""Elementwise binary ops with numpy broadcasting: arithmetic, comparison, logical.

Both operands must have the same dtype (TVM does not promote; cast with ``astype``).
Arithmetic keeps the dtype; comparisons and logical ops give ``bool``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo


def _infer_binary(result_dtype: str | None) -> Callable[[Call, object], StructInfo]:
    def infer(call: Call, ctx: object) -> StructInfo:
        a, b = I.tensor_arg(call, 0, "x1"), I.tensor_arg(call, 1, "x2")
        named = [("x1", a), ("x2", b)]
        dtype = I.same_dtype(call, named)
        shape = I.broadcast_shapes(call, named)
        ndim = -1 if a.ndim < 0 or b.ndim < 0 else max(a.ndim, b.ndim)
        return I.tensor(shape, result_dtype or dtype, ndim)
    return infer


def _trunc_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(np.result_type(a, b), np.integer):
        q = np.abs(a) // np.abs(b)
        return (np.sign(a) * np.sign(b) * q).astype(np.result_type(a, b))
    return np.divide(a, b)


def _trunc_mod(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.fmod(a, b)


# name -> (numpy function, result dtype or None for "same as inputs")
_BINARY: dict[str, tuple[Callable, str | None]] = {
    "add": (np.add, None),
    "subtract": (np.subtract, None),
    "multiply": (np.multiply, None),
    "divide": (_trunc_divide, None),
    "floor_divide": (np.floor_divide, None),
    "mod": (_trunc_mod, None),
    "floor_mod": (np.mod, None),
    "power": (np.power, None),
    "maximum": (np.maximum, None),
    "minimum": (np.minimum, None),
    "equal": (np.equal, "bool"),
    "not_equal": (np.not_equal, "bool"),
    "less": (np.less, "bool"),
    "less_equal": (np.less_equal, "bool"),
    "greater": (np.greater, "bool"),
    "greater_equal": (np.greater_equal, "bool"),
    "logical_and": (np.logical_and, "bool"),
    "logical_or": (np.logical_or, "bool"),
    "bitwise_and": (np.bitwise_and, None),
    "bitwise_or": (np.bitwise_or, None),
    "bitwise_xor": (np.bitwise_xor, None),
    "left_shift": (np.left_shift, None),
    "right_shift": (np.right_shift, None),
}


def _define(name: str, np_fn: Callable, result_dtype: str | None) -> Callable[[Expr, Expr], Call]:
    full = f"relax.{name}"

    def constructor(x1: Expr, x2: Expr) -> Call:
        return make_call(full, (x1, x2))
    constructor.__name__ = constructor.__qualname__ = name
    constructor.__doc__ = f"Elementwise ``{name}`` of ``x1`` and ``x2`` with broadcasting."

    def_infer(full)(_infer_binary(result_dtype))

    @def_legalize(full)
    def legalize(bb, call: Call) -> Expr:
        from workbench.topi import broadcast
        return bb.call_te(getattr(broadcast, name), call.args[0], call.args[1],
                          primfunc_name_hint=name)

    @def_numpy(full)
    def numpy_impl(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        out = np_fn(a, b)
        return np.asarray(out, dtype=result_dtype or a.dtype)

    return constructor


add = _define("add", *_BINARY["add"])
subtract = _define("subtract", *_BINARY["subtract"])
multiply = _define("multiply", *_BINARY["multiply"])
divide = _define("divide", *_BINARY["divide"])
floor_divide = _define("floor_divide", *_BINARY["floor_divide"])
mod = _define("mod", *_BINARY["mod"])
floor_mod = _define("floor_mod", *_BINARY["floor_mod"])
power = _define("power", *_BINARY["power"])
maximum = _define("maximum", *_BINARY["maximum"])
minimum = _define("minimum", *_BINARY["minimum"])
equal = _define("equal", *_BINARY["equal"])
not_equal = _define("not_equal", *_BINARY["not_equal"])
less = _define("less", *_BINARY["less"])
less_equal = _define("less_equal", *_BINARY["less_equal"])
greater = _define("greater", *_BINARY["greater"])
greater_equal = _define("greater_equal", *_BINARY["greater_equal"])
logical_and = _define("logical_and", *_BINARY["logical_and"])
logical_or = _define("logical_or", *_BINARY["logical_or"])
bitwise_and = _define("bitwise_and", *_BINARY["bitwise_and"])
bitwise_or = _define("bitwise_or", *_BINARY["bitwise_or"])
bitwise_xor = _define("bitwise_xor", *_BINARY["bitwise_xor"])
left_shift = _define("left_shift", *_BINARY["left_shift"])
right_shift = _define("right_shift", *_BINARY["right_shift"])

__all__ = list(_BINARY)
