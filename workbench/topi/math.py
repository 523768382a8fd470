"""Unary elementwise operators (TVM's ``topi.exp``, ``topi.sigmoid``, ``topi.cast`` ...).

Each takes a te Tensor and returns a tensor of the same shape named ``T_<op>`` with tag
``elemwise``. The math follows the TIR intrinsic of the same name (``workbench.tir.op``):
integer inputs of float functions are computed in float32.
"""
from __future__ import annotations

from typing import Any, Callable

from workbench.ir import dtype as dt
from workbench.te import compute
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr


def _unary(name: str, fn: Callable[[PrimExpr], PrimExpr], doc: str) -> Callable[[Tensor], Tensor]:
    def f(x: Tensor) -> Tensor:
        if not isinstance(x, Tensor):
            raise TypeError(f"{name}: expected a te Tensor, got {x!r}")
        return compute(x.shape, lambda *i: fn(x[i]), name=f"T_{name}", tag="elemwise")
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


def _intrinsic(name: str) -> Callable[[Tensor], Tensor]:
    return _unary(name, getattr(op, name), f"Elementwise ``{name}`` (the TIR intrinsic).")


exp = _intrinsic("exp")
exp2 = _intrinsic("exp2")
exp10 = _intrinsic("exp10")
log = _intrinsic("log")
log2 = _intrinsic("log2")
log10 = _intrinsic("log10")
log1p = _intrinsic("log1p")
sqrt = _intrinsic("sqrt")
rsqrt = _intrinsic("rsqrt")
sin = _intrinsic("sin")
cos = _intrinsic("cos")
tan = _intrinsic("tan")
atan = _intrinsic("atan")
tanh = _intrinsic("tanh")
sigmoid = _intrinsic("sigmoid")
erf = _intrinsic("erf")
floor = _intrinsic("floor")
ceil = _intrinsic("ceil")
round = _intrinsic("round")  # noqa: A001 - TVM's name; rounds half to even like numpy
trunc = _intrinsic("trunc")
isnan = _intrinsic("isnan")
isinf = _intrinsic("isinf")
isfinite = _intrinsic("isfinite")
abs = _intrinsic("abs")  # noqa: A001
bitwise_not = _intrinsic("bitwise_not")
negative = _unary("negative", op.neg, "Elementwise ``-x``.")
logical_not = _unary("logical_not", op.logical_not, "Elementwise logical not (a bool tensor).")


def sign(x: Tensor) -> Tensor:
    """-1, 0 or 1 with the sign of each element (0 for 0), in ``x``'s dtype."""
    def f(*i: PrimExpr) -> PrimExpr:
        v = x[i]
        zero, one = op.const(0, x.dtype), op.const(1, x.dtype)
        return op.select(v > zero, one, op.select(v < zero, op.neg(one), zero))
    return compute(x.shape, f, name="T_sign", tag="elemwise")


def identity(x: Tensor) -> Tensor:
    """A copy of ``x``."""
    return compute(x.shape, lambda *i: x[i], name="T_identity", tag="elemwise")


def cast(x: Tensor | PrimExpr | int | float, dtype: str) -> Tensor | PrimExpr:
    """``x`` converted to ``dtype``; a scalar gives a scalar expression (TVM's contract).

    Float -> int truncates toward zero and int -> narrower int wraps, as C (and numpy's
    ``astype``) do.
    """
    dtype = dt.normalize(dtype)
    if not isinstance(x, Tensor):
        return op.cast(dtype, op.convert(x))
    return compute(x.shape, lambda *i: op.cast(dtype, x[i]), name="T_cast", tag="elemwise")


def clip(x: Tensor, a_min: Any, a_max: Any) -> Tensor:
    """Each element clamped to ``[a_min, a_max]``."""
    def f(*i: PrimExpr) -> PrimExpr:
        v = x[i]
        return op.min(op.max(v, op.convert(a_min, v)), op.convert(a_max, v))
    return compute(x.shape, f, name="T_clip", tag="elemwise")


def fast_exp(x: Tensor) -> Tensor:
    """TVM's name for an approximate exp; here it is the exact ``exp``."""
    return exp(x)
