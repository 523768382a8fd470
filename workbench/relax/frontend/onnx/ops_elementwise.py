"""ONNX converters: elementwise math, comparisons, logic, activations, softmax, casts.

ONNX broadcasts like numpy and never mixes dtypes in one op, so operands keep their dtype;
known operands (constants) are cast to the other operand's dtype when they differ (an exporter
may leave a float64 scalar next to a float32 tensor).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Expr
from workbench.relax.frontend import composites as C
from workbench.relax.frontend.onnx._registry import converter
from workbench.relax.frontend.onnx.importer import onnx_dtype
from workbench.relax.struct_info import TensorStructInfo

_INF = float("inf")


def _dtype(e: Any) -> str | None:
    si = getattr(e, "struct_info", None)
    return si.dtype if isinstance(si, TensorStructInfo) else None


def operands(imp: Any, *values: Any) -> list[Expr]:
    """The values as Relax expressions of one dtype (the first non-constant one's)."""
    dtype = next((_dtype(v) for v in values if isinstance(v, Expr) and imp.known(v) is None),
                 None)
    if dtype is None:
        dtype = next((_dtype(v) for v in values if isinstance(v, Expr)), None)
    out = []
    for v in values:
        k = imp.known(v)
        if k is not None and dtype is not None and k.dtype != object and str(k.dtype) != dtype:
            out.append(imp.expr(k.astype(dtype)))
        else:
            out.append(imp.expr(v))
    return out


# ---- binary ---------------------------------------------------------------------------------------

def _known_binary(np_fn: Callable) -> Callable:
    """Fold on known inputs; object arrays (symbolic dims) only for + - * and //."""
    def fold(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
        a, b = inputs
        if (a.dtype == object or b.dtype == object) and np_fn not in _SYMBOLIC_OK:
            return None
        out = np_fn(a, b)
        if a.dtype != object and b.dtype != object:
            out = np.asarray(out).astype(np.result_type(a, b)) if np_fn not in _BOOL_OUT \
                else np.asarray(out)
        return np.asarray(out)
    return fold


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype == object or b.dtype == object or np.issubdtype(np.result_type(a, b),
                                                               np.integer):
        return a // b  # ONNX shape arithmetic divides non-negative sizes
    return a / b


_SYMBOLIC_OK = {np.add, np.subtract, np.multiply, _int_div}
_BOOL_OUT = {np.equal, np.less, np.greater, np.less_equal, np.greater_equal, np.logical_and,
             np.logical_or, np.logical_xor}


def _binary(fn: Callable[[Expr, Expr], Expr]) -> Callable:
    def convert(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
        a, b = operands(imp, *inputs)
        return fn(a, b)
    return convert


for _op, _fn, _np in (("Add", R.add, np.add), ("Sub", R.subtract, np.subtract),
                      ("Mul", R.multiply, np.multiply), ("Div", R.divide, _int_div),
                      ("Pow", R.power, np.power), ("Equal", R.equal, np.equal),
                      ("Less", R.less, np.less), ("Greater", R.greater, np.greater),
                      ("LessOrEqual", R.less_equal, np.less_equal),
                      ("GreaterOrEqual", R.greater_equal, np.greater_equal),
                      ("And", R.logical_and, np.logical_and),
                      ("Or", R.logical_or, np.logical_or)):
    converter(_op, fold=_known_binary(_np))(_binary(_fn))


@converter("Mod")
def _mod(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    a, b = operands(imp, *inputs)
    return R.mod(a, b) if attrs.get("fmod", 0) else R.floor_mod(a, b)


def _variadic(fn: Callable[[Expr, Expr], Expr], mean: bool = False) -> Callable:
    def convert(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
        vals = operands(imp, *inputs)
        out = vals[0]
        for v in vals[1:]:
            out = imp.emit(fn(out, v))
        if mean:
            out = R.divide(out, imp.expr(np.asarray(len(vals), dtype=_dtype(out))))
        return out
    return convert


def _fold_variadic(np_fn: Callable) -> Callable:
    def fold(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
        if any(a.dtype == object for a in inputs):
            return None
        out = inputs[0]
        for v in inputs[1:]:
            out = np_fn(out, v)
        return np.asarray(out)
    return fold


converter("Max", fold=_fold_variadic(np.maximum))(_variadic(R.maximum))
converter("Min", fold=_fold_variadic(np.minimum))(_variadic(R.minimum))
converter("Sum")(_variadic(R.add))
converter("Mean")(_variadic(R.add, mean=True))


@converter("Where", fold=lambda imp, node, inputs, attrs:
           np.where(*inputs) if not any(a.dtype == object for a in inputs[1:]) else None)
def _where(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    cond = imp.expr(inputs[0])
    a, b = operands(imp, inputs[1], inputs[2])
    return R.where(cond, a, b)


# ---- unary ----------------------------------------------------------------------------------------

def _unary(fn: Callable[[Expr], Expr]) -> Callable:
    def convert(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
        return fn(imp.expr(inputs[0]))
    return convert


for _op, _fn in (("Relu", R.nn.relu), ("Sigmoid", R.sigmoid), ("Tanh", R.tanh),
                 ("Exp", R.exp), ("Log", R.log), ("Sqrt", R.sqrt), ("Neg", R.negative),
                 ("Abs", R.abs), ("Erf", R.erf), ("Floor", R.floor), ("Ceil", R.ceil),
                 ("Round", R.round), ("Sin", R.sin), ("Cos", R.cos), ("Not", R.logical_not)):
    converter(_op)(_unary(_fn))


@converter("Xor", fold=lambda imp, node, inputs, attrs: np.logical_xor(*inputs))
def _xor(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    a, b = operands(imp, *inputs)
    return R.not_equal(a, b)


@converter("IsNaN")
def _isnan(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    return R.not_equal(x, x)


@converter("IsInf")
def _isinf(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    inf = _const_like(imp, x, _INF)
    pos = imp.emit(R.equal(x, inf)) if attrs.get("detect_positive", 1) else None
    neg = imp.emit(R.equal(x, imp.emit(R.negative(inf)))) \
        if attrs.get("detect_negative", 1) else None
    if pos is not None and neg is not None:
        return R.logical_or(pos, neg)
    if pos is None and neg is None:
        return R.less(x, x)  # nothing detected: all false, in x's shape
    return pos if pos is not None else neg


# Hyperbolic functions, their inverses, asin and acos from the core ops (relax.frontend.
# composites); tan and atan have kernels.
def _composite(fn: Callable) -> Callable:
    def convert(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
        return fn(imp.emit, imp.expr(inputs[0]))
    return convert


for _op, _fn in (("Sinh", C.sinh), ("Cosh", C.cosh), ("Asinh", C.asinh), ("Acosh", C.acosh),
                 ("Atanh", C.atanh), ("Asin", C.asin), ("Acos", C.acos)):
    converter(_op)(_composite(_fn))
converter("Tan")(_unary(R.tan))
converter("Atan")(_unary(R.atan))


for _op, _fn in (("BitwiseAnd", R.bitwise_and), ("BitwiseOr", R.bitwise_or),
                 ("BitwiseXor", R.bitwise_xor)):
    converter(_op)(_binary(_fn))
converter("BitwiseNot")(_unary(R.bitwise_not))


@converter("BitShift")
def _bit_shift(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    a, b = operands(imp, *inputs)
    return R.left_shift(a, b) if attrs["direction"] == "LEFT" else R.right_shift(a, b)


@converter("Identity", fold=lambda imp, node, inputs, attrs: inputs[0])
def _identity(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    return inputs[0]


@converter("Reciprocal")
def _reciprocal(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    return R.divide(imp.expr(np.asarray(1, dtype=_dtype(x))), x)


def _cast_fold(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    x = inputs[0]
    if x.dtype == object:
        return x  # shape arithmetic stays int64 PrimExprs
    return x.astype(onnx_dtype(attrs["to"]))


@converter("Cast", fold=_cast_fold)
def _cast(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    dtype = onnx_dtype(attrs["to"])
    return x if _dtype(x) == dtype else R.astype(x, dtype)


@converter("CastLike")
def _cast_like(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    dtype = _dtype(imp.expr(inputs[1]))
    return x if _dtype(x) == dtype else R.astype(x, dtype)


# ---- activations --------------------------------------------------------------------------------

def _const_like(imp: Any, x: Expr, value: float) -> Expr:
    return imp.expr(np.asarray(value, dtype=_dtype(x)))


@converter("Clip")
def _clip(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    bounds = []
    for i, default in ((1, -_INF), (2, _INF)):
        v = inputs[i] if len(inputs) > i and inputs[i] is not None else None
        k = imp.known(v) if v is not None else None
        if v is not None and k is None:
            raise NotImplementedError("Clip with bounds computed at run time")
        bounds.append(float(k) if k is not None else default)
    return R.clip(x, *bounds)


@converter("LeakyRelu")
def _leaky_relu(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    return R.nn.leaky_relu(imp.expr(inputs[0]), attrs.get("alpha", 0.01))


@converter("HardSigmoid")
def _hard_sigmoid(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    alpha, beta = attrs.get("alpha", 0.2), attrs.get("beta", 0.5)
    lin = imp.emit(R.add(R.multiply(x, _const_like(imp, x, alpha)), _const_like(imp, x, beta)))
    return R.clip(lin, 0.0, 1.0)


@converter("HardSwish")
def _hard_swish(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    gate = imp.emit(_hard_sigmoid(imp, node, [x], {"alpha": 1 / 6, "beta": 0.5}))
    return R.multiply(x, gate)


@converter("Gelu")
def _gelu(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    return R.nn.gelu_tanh(x) if attrs.get("approximate", "none") == "tanh" else R.nn.gelu(x)


@converter("Softplus")
def _softplus(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    return R.log(R.add(imp.emit(R.exp(x)), _const_like(imp, x, 1.0)))


@converter("Elu")
def _elu(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    alpha = attrs.get("alpha", 1.0)
    neg = imp.emit(R.multiply(_const_like(imp, x, alpha),
                              R.subtract(imp.emit(R.exp(x)), _const_like(imp, x, 1.0))))
    return R.where(R.greater(x, _const_like(imp, x, 0.0)), x, neg)


@converter("PRelu")
def _prelu(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x, slope = operands(imp, *inputs)
    # The slope broadcasts to x (unidirectionally; numpy's rule from opset 7; the older
    # per-channel form is rewritten before conversion, see .opset).
    return R.where(R.less(x, _const_like(imp, x, 0.0)), R.multiply(x, slope), x)


@converter("Selu")
def _selu(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    alpha = attrs.get("alpha", 1.67326319217681884765625)
    gamma = attrs.get("gamma", 1.05070102214813232421875)
    neg = imp.emit(R.multiply(_const_like(imp, x, alpha),
                              R.subtract(imp.emit(R.exp(x)), _const_like(imp, x, 1.0))))
    inner = R.where(R.greater(x, _const_like(imp, x, 0.0)), x, neg)
    return R.multiply(imp.emit(inner), _const_like(imp, x, gamma))


@converter("Celu")
def _celu(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    alpha = attrs.get("alpha", 1.0)
    scaled = imp.emit(R.divide(x, _const_like(imp, x, alpha)))
    neg = imp.emit(R.multiply(_const_like(imp, x, alpha),
                              R.subtract(imp.emit(R.exp(scaled)), _const_like(imp, x, 1.0))))
    return R.add(R.nn.relu(x), imp.emit(R.minimum(neg, _const_like(imp, x, 0.0))))


@converter("ThresholdedRelu")
def _thresholded_relu(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    alpha = attrs.get("alpha", 1.0)
    return R.where(R.greater(x, _const_like(imp, x, alpha)), x, _const_like(imp, x, 0.0))


@converter("Shrink")
def _shrink(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    bias, lambd = attrs.get("bias", 0.0), attrs.get("lambd", 0.5)
    low = imp.emit(R.where(R.less(x, _const_like(imp, x, -lambd)),
                           R.add(x, _const_like(imp, x, bias)), _const_like(imp, x, 0.0)))
    return R.where(R.greater(x, _const_like(imp, x, lambd)),
                   R.subtract(x, _const_like(imp, x, bias)), low)


converter("Sign")(_unary(R.sign))


@converter("Softsign")
def _softsign(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    return R.divide(x, imp.emit(R.add(imp.emit(R.abs(x)), _const_like(imp, x, 1.0))))


@converter("Mish")
def _mish(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    return R.multiply(x, imp.emit(R.tanh(imp.emit(_softplus(imp, node, [x], {})))))


def _softmax(fn: Callable[[Expr, int], Expr]) -> Callable:
    def convert(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
        return fn(imp.expr(inputs[0]), attrs.get("axis", -1))
    return convert


converter("Softmax")(_softmax(R.nn.softmax))
converter("LogSoftmax")(_softmax(R.nn.log_softmax))


__all__ = ["operands"]
