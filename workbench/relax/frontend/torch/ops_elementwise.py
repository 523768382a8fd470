"""PyTorch converters: elementwise math, comparisons, activations, softmax, dtype casts.

Binary ops follow PyTorch's type promotion: arithmetic computes in the node's result dtype
(``meta["val"].dtype``), comparisons in ``torch.result_type`` of their operands; Python
scalars become constants of that dtype.
"""
from __future__ import annotations

from typing import Any, Callable

from workbench.relax import op as R
from workbench.relax.expr import Expr
from workbench.relax.frontend import composites as C
from workbench.relax.frontend.torch._registry import converter
from workbench.relax.frontend.torch._util import (
    const, is_float, operand, promoted_dtype, sinfo,
)

_INF = float("inf")


# ---- unary --------------------------------------------------------------------------------------

def _unary(fn: Callable[[Expr], Expr], float_op: bool = True) -> Callable:
    def convert(imp: Any, node: Any, x: Expr, *rest: Any, **kw: Any) -> Expr:
        if float_op:
            x = operand(imp, x, imp.out_dtype(node))
        return fn(x)
    return convert


_UNARY: dict[str, Callable[[Expr], Expr]] = {
    "relu": R.nn.relu, "sigmoid": R.sigmoid, "tanh": R.tanh, "exp": R.exp, "log": R.log,
    "sqrt": R.sqrt, "rsqrt": R.rsqrt, "erf": R.erf, "sin": R.sin, "cos": R.cos,
    "silu": R.nn.silu,
}
for _name, _fn in _UNARY.items():
    converter(f"{_name}.default", f"{_name}_.default")(_unary(_fn))

for _name, _fn in (("tan", R.tan), ("atan", R.atan)):
    converter(f"{_name}.default")(_unary(_fn))
for _name, _fn in (("trunc", R.trunc), ("sign", R.sign)):
    converter(f"{_name}.default")(_unary(_fn, float_op=False))


def _composite(fn: Callable) -> Callable:
    """A function built from the core ops (relax.frontend.composites), in the result dtype."""
    def convert(imp: Any, node: Any, x: Expr) -> Expr:
        return fn(imp.emit, operand(imp, x, imp.out_dtype(node)))
    return convert


for _name, _fn in (("sinh", C.sinh), ("cosh", C.cosh), ("asinh", C.asinh), ("acosh", C.acosh),
                   ("atanh", C.atanh), ("asin", C.asin), ("acos", C.acos)):
    converter(f"{_name}.default")(_composite(_fn))
converter("log2.default")(_composite(lambda emit, x: C.log_base(emit, x, 2.0)))
converter("log10.default")(_composite(lambda emit, x: C.log_base(emit, x, 10.0)))


@converter("atan2.default")
def _atan2(imp: Any, node: Any, y: Expr, x: Expr) -> Expr:
    dtype = imp.out_dtype(node)
    return C.atan2(imp.emit, operand(imp, y, dtype), operand(imp, x, dtype))


@converter("isnan.default")
def _isnan(imp: Any, node: Any, x: Expr) -> Expr:
    return R.isnan(x) if is_float(sinfo(x).dtype) else R.less(x, x)


@converter("isinf.default")
def _isinf(imp: Any, node: Any, x: Expr) -> Expr:
    return R.isinf(x) if is_float(sinfo(x).dtype) else R.less(x, x)


@converter("elu.default")
def _elu(imp: Any, node: Any, x: Expr, alpha: float = 1.0, scale: float = 1.0,
         input_scale: float = 1.0) -> Expr:
    """scale * (x if x > 0 else alpha * (exp(x * input_scale) - 1))."""
    dtype = sinfo(x).dtype
    neg = imp.emit(R.multiply(const(alpha, dtype), imp.emit(R.subtract(
        imp.emit(R.exp(imp.emit(R.multiply(x, const(input_scale, dtype))))), const(1, dtype)))))
    out = imp.emit(R.where(R.greater(x, const(0, dtype)), x, neg))
    return R.multiply(out, const(scale, dtype)) if scale != 1.0 else out


converter("neg.default")(_unary(R.negative, float_op=False))
converter("abs.default")(_unary(R.abs, float_op=False))
converter("floor.default")(_unary(R.floor, float_op=False))
converter("ceil.default")(_unary(R.ceil, float_op=False))
converter("round.default")(_unary(R.round, float_op=False))


@converter("reciprocal.default")
def _reciprocal(imp: Any, node: Any, x: Expr) -> Expr:
    dtype = imp.out_dtype(node)
    return R.divide(const(1, dtype), operand(imp, x, dtype))


@converter("log1p.default")
def _log1p(imp: Any, node: Any, x: Expr) -> Expr:
    dtype = imp.out_dtype(node)
    return R.log(R.add(operand(imp, x, dtype), const(1, dtype)))


@converter("expm1.default")
def _expm1(imp: Any, node: Any, x: Expr) -> Expr:
    dtype = imp.out_dtype(node)
    return R.subtract(R.exp(operand(imp, x, dtype)), const(1, dtype))


def _bool_only(imp: Any, node: Any) -> str | None:
    val = node.args[0].meta.get("val")
    if val is not None and str(val.dtype) != "torch.bool":
        return f"only on bool tensors (got {val.dtype})"
    return None


@converter("logical_not.default")
def _logical_not(imp: Any, node: Any, x: Expr) -> Expr:
    return R.logical_not(operand(imp, x, "bool"))


@converter("bitwise_not.default", check=_bool_only)
def _bitwise_not(imp: Any, node: Any, x: Expr) -> Expr:
    return R.logical_not(x)


# ---- activations ---------------------------------------------------------------------------------

@converter("gelu.default", "gelu_.default")
def _gelu(imp: Any, node: Any, x: Expr, approximate: str = "none") -> Expr:
    return R.nn.gelu_tanh(x) if approximate == "tanh" else R.nn.gelu(x)


def _clip(x: Expr, lo: Any, hi: Any) -> Expr:
    return R.clip(x, -_INF if lo is None else float(lo), _INF if hi is None else float(hi))


def _scalar_bounds(imp: Any, node: Any) -> str | None:
    for a in node.args[1:3]:
        if hasattr(a, "meta"):
            return "only with number bounds (not tensors)"
    return None


@converter("clamp.default", "clamp_.default", check=_scalar_bounds)
def _clamp(imp: Any, node: Any, x: Expr, min: Any = None, max: Any = None) -> Expr:  # noqa: A002
    return _clip(x, min, max)


@converter("clamp.Tensor")
def _clamp_tensor(imp: Any, node: Any, x: Expr, lo: Any = None, hi: Any = None) -> Expr:
    """Bounds as tensors: max(x, lo) then min(., hi)."""
    dtype = imp.out_dtype(node)
    out = operand(imp, x, dtype)
    if lo is not None:
        out = imp.emit(R.maximum(out, operand(imp, lo, dtype)))
    if hi is not None:
        out = imp.emit(R.minimum(out, operand(imp, hi, dtype)))
    return out


@converter("clamp_min.default")
def _clamp_min(imp: Any, node: Any, x: Expr, lo: Any) -> Expr:
    return _clip(x, lo, None)


@converter("clamp_max.default")
def _clamp_max(imp: Any, node: Any, x: Expr, hi: Any) -> Expr:
    return _clip(x, None, hi)


@converter("hardtanh.default", "hardtanh_.default")
def _hardtanh(imp: Any, node: Any, x: Expr, lo: float = -1.0, hi: float = 1.0) -> Expr:
    return _clip(x, lo, hi)


@converter("relu6.default", "relu6_.default")
def _relu6(imp: Any, node: Any, x: Expr) -> Expr:
    return _clip(x, 0.0, 6.0)


@converter("hardsigmoid.default", "hardsigmoid_.default")
def _hardsigmoid(imp: Any, node: Any, x: Expr) -> Expr:
    dtype = sinfo(x).dtype
    return R.divide(_clip(imp.emit(R.add(x, const(3, dtype))), 0.0, 6.0), const(6, dtype))


@converter("hardswish.default", "hardswish_.default")
def _hardswish(imp: Any, node: Any, x: Expr) -> Expr:
    gate = imp.emit(_hardsigmoid(imp, node, x))
    return R.multiply(x, gate)


@converter("leaky_relu.default", "leaky_relu_.default")
def _leaky_relu(imp: Any, node: Any, x: Expr, slope: float = 0.01) -> Expr:
    return R.nn.leaky_relu(x, slope)


# ---- softmax ----------------------------------------------------------------------------------

@converter("_softmax.default", "softmax.int")
def _softmax(imp: Any, node: Any, x: Expr, dim: int, *rest: Any, **kw: Any) -> Expr:
    return R.nn.softmax(operand(imp, x, imp.out_dtype(node)), dim)


@converter("_log_softmax.default", "log_softmax.int")
def _log_softmax(imp: Any, node: Any, x: Expr, dim: int, *rest: Any, **kw: Any) -> Expr:
    return R.nn.log_softmax(operand(imp, x, imp.out_dtype(node)), dim)


@converter("_safe_softmax.default")
def _safe_softmax(imp: Any, node: Any, x: Expr, dim: int, *rest: Any, **kw: Any) -> Expr:
    """Softmax whose rows that are all ``-inf`` give zeros (not NaN)."""
    dtype = imp.out_dtype(node)
    x = operand(imp, x, dtype)
    soft = imp.emit(R.nn.softmax(x, dim))
    masked = imp.emit(R.astype(R.equal(x, const(-_INF, dtype)), "int32"))
    all_masked = imp.emit(R.equal(R.min(masked, dim, keepdims=True), const(1, "int32")))
    return R.where(all_masked, const(0, dtype), soft)


# ---- binary arithmetic ----------------------------------------------------------------------------

def _arith(fn: Callable[[Expr, Expr], Expr], reverse: bool = False) -> Callable:
    def convert(imp: Any, node: Any, a: Any, b: Any, alpha: Any = 1) -> Expr:
        dtype = imp.out_dtype(node)
        x, y = operand(imp, a, dtype), operand(imp, b, dtype)
        if alpha != 1:
            y = imp.emit(R.multiply(y, const(alpha, dtype)))
        return fn(y, x) if reverse else fn(x, y)
    return convert


for _names, _fn, _rev in (
        (("add.Tensor", "add.Scalar", "add_.Tensor", "add_.Scalar"), R.add, False),
        (("sub.Tensor", "sub.Scalar", "sub_.Tensor"), R.subtract, False),
        (("rsub.Tensor", "rsub.Scalar"), R.subtract, True),
        (("mul.Tensor", "mul.Scalar", "mul_.Tensor", "mul_.Scalar"), R.multiply, False),
        (("maximum.default", "max.other"), R.maximum, False),
        (("minimum.default", "min.other"), R.minimum, False),
        (("remainder.Tensor", "remainder.Scalar"), R.floor_mod, False),
        (("fmod.Tensor", "fmod.Scalar"), R.mod, False)):
    converter(*_names)(_arith(_fn, _rev))


@converter("div.Tensor", "div.Scalar", "div_.Tensor", "div_.Scalar", "true_divide.Tensor")
def _div(imp: Any, node: Any, a: Any, b: Any) -> Expr:
    dtype = imp.out_dtype(node)
    return R.divide(operand(imp, a, dtype), operand(imp, b, dtype))


def _div_mode_check(imp: Any, node: Any) -> str | None:
    mode = node.kwargs.get("rounding_mode", node.args[2] if len(node.args) > 2 else None)
    val = node.meta.get("val")
    if mode == "trunc" and val is not None and val.dtype.is_floating_point:
        return "rounding_mode='trunc' on float tensors"
    return None


@converter("div.Tensor_mode", "div.Scalar_mode", check=_div_mode_check)
def _div_mode(imp: Any, node: Any, a: Any, b: Any, rounding_mode: str | None = None) -> Expr:
    dtype = imp.out_dtype(node)
    x, y = operand(imp, a, dtype), operand(imp, b, dtype)
    if rounding_mode is None:
        return R.divide(x, y)
    if rounding_mode == "floor":
        return R.floor(R.divide(x, y)) if is_float(dtype) else R.floor_divide(x, y)
    return R.divide(x, y)  # trunc on ints: relax's integer divide truncates


@converter("floor_divide.default", "floor_divide.Scalar")
def _floor_divide(imp: Any, node: Any, a: Any, b: Any) -> Expr:
    dtype = imp.out_dtype(node)
    x, y = operand(imp, a, dtype), operand(imp, b, dtype)
    return R.floor(R.divide(x, y)) if is_float(dtype) else R.floor_divide(x, y)


@converter("pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar")
def _pow(imp: Any, node: Any, a: Any, b: Any) -> Expr:
    dtype = imp.out_dtype(node)
    if isinstance(a, Expr) and not isinstance(b, Expr):
        x = operand(imp, a, dtype)
        if b == 2:
            return R.multiply(x, x)
        if b == 0.5:
            return R.sqrt(x)
        if b == 1:
            return x
    return R.power(operand(imp, a, dtype), operand(imp, b, dtype))


# ---- comparisons and logic --------------------------------------------------------------------

def _compare(fn: Callable[[Expr, Expr], Expr]) -> Callable:
    def convert(imp: Any, node: Any, a: Any, b: Any) -> Expr:
        dtype = promoted_dtype(imp, node, *node.args[:2])
        return fn(operand(imp, a, dtype), operand(imp, b, dtype))
    return convert


for _name, _fn in (("eq", R.equal), ("ne", R.not_equal), ("lt", R.less), ("le", R.less_equal),
                   ("gt", R.greater), ("ge", R.greater_equal)):
    converter(f"{_name}.Tensor", f"{_name}.Scalar")(_compare(_fn))


def _logical(fn: Callable[[Expr, Expr], Expr]) -> Callable:
    def convert(imp: Any, node: Any, a: Any, b: Any) -> Expr:
        return fn(operand(imp, a, "bool"), operand(imp, b, "bool"))
    return convert


converter("logical_and.default")(_logical(R.logical_and))
converter("logical_or.default")(_logical(R.logical_or))


converter("logical_xor.default")(_logical(R.not_equal))


def _bitwise(logical: Callable[[Expr, Expr], Expr], bits: Callable[[Expr, Expr], Expr]
             ) -> Callable:
    """On bool tensors the logical op, on integers the bitwise one."""
    def convert(imp: Any, node: Any, a: Any, b: Any) -> Expr:
        dtype = imp.out_dtype(node)
        fn = logical if dtype == "bool" else bits
        return fn(operand(imp, a, dtype), operand(imp, b, dtype))
    return convert


for _name, _logic, _bits in (("and", R.logical_and, R.bitwise_and),
                             ("or", R.logical_or, R.bitwise_or),
                             ("xor", R.not_equal, R.bitwise_xor)):
    converter(f"bitwise_{_name}.Tensor", f"bitwise_{_name}.Scalar", f"__{_name}__.Tensor",
              f"__{_name}__.Scalar")(_bitwise(_logic, _bits))


@converter("where.self")
def _where(imp: Any, node: Any, cond: Expr, a: Any, b: Any) -> Expr:
    dtype = imp.out_dtype(node)
    return R.where(operand(imp, cond, "bool"), operand(imp, a, dtype), operand(imp, b, dtype))


@converter("masked_fill.Scalar", "masked_fill_.Scalar", "masked_fill.Tensor")
def _masked_fill(imp: Any, node: Any, x: Expr, mask: Expr, value: Any) -> Expr:
    dtype = imp.out_dtype(node)
    return R.where(operand(imp, mask, "bool"), operand(imp, value, dtype), x)


# ---- dtype ------------------------------------------------------------------------------------------

@converter("_to_copy.default", "to.dtype", "to.dtype_layout", "to.device", "type_as.default")
def _to_dtype(imp: Any, node: Any, x: Any, *args: Any, **kwargs: Any) -> Any:
    if not isinstance(x, Expr):
        return x
    dtype = imp.out_dtype(node)
    return x if sinfo(x).dtype == dtype else R.astype(x, dtype)


@converter("scalar_tensor.default")
def _scalar_tensor(imp: Any, node: Any, value: Any, **kwargs: Any) -> Expr:
    return const(value, imp.out_dtype(node))


__all__: list[str] = []
