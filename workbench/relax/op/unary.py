"""Elementwise unary ops: math functions, rounding, sign, ``clip``, ``logical_not``,
``bitwise_not``.

The result has the input's struct info. Float-only functions (exp, log, ...) reject integer
tensors, as TVM does.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return 1.0 / np.sqrt(x)


# name -> (numpy function, float-only?)
_UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], bool]] = {
    "exp": (np.exp, True),
    "log": (np.log, True),
    "sqrt": (np.sqrt, True),
    "rsqrt": (_rsqrt, True),
    "tanh": (np.tanh, True),
    "sigmoid": (_sigmoid, True),
    "erf": (_erf, True),
    "sin": (np.sin, True),
    "cos": (np.cos, True),
    "tan": (np.tan, True),
    "atan": (np.arctan, True),
    "floor": (np.floor, False),
    "ceil": (np.ceil, False),
    "round": (np.round, False),
    "negative": (np.negative, False),
    "abs": (np.abs, False),
    "square": (np.square, False),
    "logical_not": (np.logical_not, False),
    "bitwise_not": (np.invert, False),
    "trunc": (np.trunc, False),
    "sign": (np.sign, False),
    "isnan": (np.isnan, True),
    "isinf": (np.isinf, True),
}

# Ops whose result is a bool tensor.
_BOOL_RESULT = {"logical_not", "isnan", "isinf"}


def _infer_unary(float_only: bool, result_dtype: str | None = None):
    def infer(call: Call, ctx: Any) -> StructInfo:
        x = I.tensor_arg(call, 0, "x")
        if float_only and x.dtype and not x.dtype.startswith(("float", "bfloat")):
            raise I.error(call, f"requires a float tensor, got x of dtype {x.dtype}")
        if result_dtype is not None:
            return TensorStructInfo(x.shape, result_dtype, x.ndim)
        return x
    return infer


def _te_square(x):
    from workbench import te
    return te.compute(x.shape, lambda *i: x[i] * x[i], name="T_square")


def _define(name: str, np_fn: Callable, float_only: bool) -> Callable[[Expr], Call]:
    full = f"relax.{name}"

    def constructor(x: Expr) -> Call:
        return make_call(full, (x,))
    constructor.__name__ = constructor.__qualname__ = name
    constructor.__doc__ = f"Elementwise ``{name}``."
    def_infer(full)(_infer_unary(float_only, "bool" if name in _BOOL_RESULT else None))

    @def_legalize(full)
    def legalize(bb, call: Call) -> Expr:
        from workbench.topi import math as tmath
        fn = _te_square if name == "square" else getattr(tmath, name)
        return bb.call_te(fn, call.args[0], primfunc_name_hint=name)

    @def_numpy(full)
    def numpy_impl(x: np.ndarray) -> np.ndarray:
        out = np_fn(x)
        return np.asarray(out, dtype="bool" if name in _BOOL_RESULT else x.dtype)

    return constructor


exp = _define("exp", *_UNARY["exp"])
log = _define("log", *_UNARY["log"])
sqrt = _define("sqrt", *_UNARY["sqrt"])
rsqrt = _define("rsqrt", *_UNARY["rsqrt"])
tanh = _define("tanh", *_UNARY["tanh"])
sigmoid = _define("sigmoid", *_UNARY["sigmoid"])
erf = _define("erf", *_UNARY["erf"])
sin = _define("sin", *_UNARY["sin"])
cos = _define("cos", *_UNARY["cos"])
tan = _define("tan", *_UNARY["tan"])
atan = _define("atan", *_UNARY["atan"])
floor = _define("floor", *_UNARY["floor"])
ceil = _define("ceil", *_UNARY["ceil"])
round = _define("round", *_UNARY["round"])  # noqa: A001 - TVM's name
negative = _define("negative", *_UNARY["negative"])
abs = _define("abs", *_UNARY["abs"])  # noqa: A001 - TVM's name
square = _define("square", *_UNARY["square"])
logical_not = _define("logical_not", *_UNARY["logical_not"])
bitwise_not = _define("bitwise_not", *_UNARY["bitwise_not"])
trunc = _define("trunc", *_UNARY["trunc"])
sign = _define("sign", *_UNARY["sign"])
isnan = _define("isnan", *_UNARY["isnan"])
isinf = _define("isinf", *_UNARY["isinf"])


# ---- clip -------------------------------------------------------------------------------------

def clip(x: Expr, min: float, max: float) -> Call:  # noqa: A002 - TVM's parameter names
    """``x`` limited to ``[min, max]``."""
    return make_call("relax.clip", (x,), {"min": float(min), "max": float(max)})


def_infer("relax.clip")(_infer_unary(False))


@def_legalize("relax.clip")
def _clip_legalize(bb, call: Call) -> Expr:
    from workbench.topi import math as tmath
    return bb.call_te(tmath.clip, call.args[0], call.attrs["min"], call.attrs["max"],
                      primfunc_name_hint="clip")


@def_numpy("relax.clip")
def _clip_numpy(x: np.ndarray, min: float, max: float) -> np.ndarray:  # noqa: A002
    return np.clip(x, min, max).astype(x.dtype)


__all__ = [*_UNARY, "clip"]
