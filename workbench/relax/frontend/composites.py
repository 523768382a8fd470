"""Math functions the importers build from Relax's elementwise ops (no kernels of their own):
hyperbolic functions and their inverses, asin / acos, atan2, log2 / log10.

Each is ``fn(emit, x[, y]) -> Expr`` where ``emit`` binds an expression (the importer's
``emit``) and ``x`` is a float tensor; constants take ``x``'s dtype.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Constant, Expr

Emit = Callable[[Expr], Expr]


def _c(x: Expr, v: float) -> Constant:
    return Constant(np.asarray(v, dtype=x.struct_info.dtype))


def sinh(emit: Emit, x: Expr) -> Expr:
    return R.multiply(emit(R.subtract(emit(R.exp(x)), emit(R.exp(emit(R.negative(x)))))),
                      _c(x, 0.5))


def cosh(emit: Emit, x: Expr) -> Expr:
    return R.multiply(emit(R.add(emit(R.exp(x)), emit(R.exp(emit(R.negative(x)))))),
                      _c(x, 0.5))


def asinh(emit: Emit, x: Expr) -> Expr:
    """log(x + sqrt(x^2 + 1))."""
    return R.log(emit(R.add(x, emit(R.sqrt(emit(R.add(emit(R.multiply(x, x)), _c(x, 1))))))))


def acosh(emit: Emit, x: Expr) -> Expr:
    """log(x + sqrt(x^2 - 1))."""
    return R.log(emit(R.add(x, emit(R.sqrt(emit(R.subtract(emit(R.multiply(x, x)),
                                                           _c(x, 1))))))))


def atanh(emit: Emit, x: Expr) -> Expr:
    """log((1 + x) / (1 - x)) / 2."""
    ratio = emit(R.divide(emit(R.add(_c(x, 1), x)), emit(R.subtract(_c(x, 1), x))))
    return R.multiply(emit(R.log(ratio)), _c(x, 0.5))


def asin(emit: Emit, x: Expr) -> Expr:
    """atan(x / sqrt(1 - x^2)) (+-inf at |x| = 1 gives +-pi/2)."""
    root = emit(R.sqrt(emit(R.subtract(_c(x, 1), emit(R.multiply(x, x))))))
    return R.atan(emit(R.divide(x, root)))


def acos(emit: Emit, x: Expr) -> Expr:
    return R.subtract(_c(x, math.pi / 2), emit(asin(emit, x)))


def atan2(emit: Emit, y: Expr, x: Expr) -> Expr:
    """The angle of (x, y): atan(y / x), moved by +-pi for x < 0 (atan2(+-0, x < 0) = +-pi,
    atan2(y, 0) = +-pi/2)."""
    base = emit(R.atan(emit(R.divide(y, x))))
    zero = _c(x, 0)
    shift = emit(R.where(R.less(y, zero), _c(x, -math.pi), _c(x, math.pi)))
    left = emit(R.add(base, shift))
    vertical = emit(R.where(R.less(y, zero), _c(x, -math.pi / 2),
                            emit(R.where(R.greater(y, zero), _c(x, math.pi / 2), zero))))
    out = emit(R.where(R.less(x, zero), left, base))
    return R.where(R.equal(x, zero), vertical, out)


def log_base(emit: Emit, x: Expr, base: float) -> Expr:
    return R.multiply(emit(R.log(x)), _c(x, 1 / math.log(base)))


__all__ = ["sinh", "cosh", "asinh", "acosh", "atanh", "asin", "acos", "atan2", "log_base"]
