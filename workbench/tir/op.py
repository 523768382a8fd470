"""Building expressions: dtype promotion, constant folding and the math intrinsics.

Every public helper accepts Python numbers where an expression is expected and converts them
to constants of the other operand's dtype (``i + 1`` stays int32, ``x * 0.5`` stays float32).
Folding here is only the local, always-valid kind (two constants, ``x + 0``, ``x * 1``); the
real simplifier is :mod:`workbench.tir.arith`.
"""
from __future__ import annotations

import builtins
import math
import operator
from typing import Any, Callable

import numpy as np

from workbench.ir import dtype as dt
from workbench.tir.expr import (
    EQ, GE, GT, LE, LT, NE, Add, And, Broadcast, Call, Cast, Div, FloatImm, FloorDiv, FloorMod,
    IntImm, Max, Min, Mod, Mul, Not, Or, PrimExpr, Select, StringImm, Sub,
)

ExprLike = PrimExpr | int | float | bool


def const(value: Any, dtype: str | None = None) -> PrimExpr:
    """A constant; the dtype defaults to int32 / float32 / bool from the Python type."""
    if isinstance(value, PrimExpr):
        return value if dtype is None else cast(dtype, value)
    # Objects standing for an expression (te's axis IterVars) convert through __prim_expr__,
    # so ``x * k`` works as well as ``k * x``, as in TVM.
    as_expr = getattr(type(value), "__prim_expr__", None)
    if as_expr is not None:
        return const(as_expr(value), dtype)
    if dtype is None:
        if isinstance(value, (bool, np.bool_)):
            dtype = "bool"
        elif isinstance(value, (int, np.integer)):
            dtype = "int32" if -(2**31) <= int(value) < 2**31 else "int64"
        elif isinstance(value, (float, np.floating)):
            dtype = "float32"
        else:
            raise TypeError(f"cannot make a constant from {value!r} ({type(value).__name__})")
    t = dt.parse(dtype)
    if t.lanes > 1:
        return Broadcast(const(value, t.scalar), t.lanes, dtype)
    if t.is_float or t.is_bfloat:
        return FloatImm(dtype, float(value))
    if t.is_bool:
        return IntImm("bool", int(bool(value)))
    if t.is_integer:
        v = int(value)
        return IntImm(dtype, _wrap_int(v, t))
    raise TypeError(f"cannot make a constant of dtype {dtype!r}")


def _wrap_int(v: int, t: dt.DataType) -> int:
    """Wrap an integer into the range of ``t`` (two's complement), as the hardware would."""
    mask = (1 << t.bits) - 1
    v &= mask
    if t.is_int and v >= 1 << (t.bits - 1):
        v -= 1 << t.bits
    return v


def convert(value: ExprLike, like: PrimExpr | None = None) -> PrimExpr:
    """Turn a Python number into a constant, using ``like``'s dtype when it fits."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, str):
        return StringImm(value)
    if like is not None:
        t = dt.parse(like.dtype)
        if isinstance(value, (bool, np.bool_)):
            return const(value, "bool" if t.is_bool else like.dtype)
        if isinstance(value, (int, np.integer)) and not t.is_bool:
            return const(value, like.dtype)
        if isinstance(value, (float, np.floating)) and (t.is_float or t.is_bfloat):
            return const(value, like.dtype)
    return const(value)


def match_types(a: ExprLike, b: ExprLike) -> tuple[PrimExpr, PrimExpr]:
    """Two operands as PrimExprs of one dtype (TVM's BinaryOpMatchTypes): Python numbers take
    the other operand's dtype when it fits, and differing dtypes are cast to the promoted one."""
    if not isinstance(a, PrimExpr) and not isinstance(b, PrimExpr):
        a = const(a)
    a = convert(a, b if isinstance(b, PrimExpr) else None)
    b = convert(b, a)
    if a.dtype != b.dtype:
        target = dt.promote(a.dtype, b.dtype)
        a, b = cast(target, a), cast(target, b)
    return a, b


_pair = match_types  # the name te used before it was public


def cast(dtype: str, value: ExprLike) -> PrimExpr:
    """Convert ``value`` to ``dtype``; folds constants and removes no-op casts."""
    dtype = dt.normalize(dtype)
    value = convert(value)
    if value.dtype == dtype:
        return value
    t, src = dt.parse(dtype), dt.parse(value.dtype)
    if isinstance(value, (IntImm, FloatImm)) and t.lanes == 1:
        if t.is_float or t.is_bfloat:
            return FloatImm(dtype, float(value.value))
        if t.is_bool:
            return IntImm("bool", int(bool(value.value)))
        if src.is_float and not math.isfinite(value.value):
            return Cast(dtype, value)
        return const(int(value.value), dtype)
    if t.lanes != src.lanes and src.lanes == 1:
        return Broadcast(cast(t.scalar, value), t.lanes, dtype)
    return Cast(dtype, value)


_PY_ARITH: dict[type, Callable[[Any, Any], Any]] = {
    Add: operator.add, Sub: operator.sub, Mul: operator.mul, Min: min, Max: max,
}


def _fold_binary(cls: type, a: PrimExpr, b: PrimExpr) -> PrimExpr | None:
    fn = _PY_ARITH.get(cls)
    if fn is not None and isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm)):
        return const(fn(a.value, b.value), a.dtype)
    return None


def _arith(cls: type, a: ExprLike, b: ExprLike) -> PrimExpr:
    a, b = match_types(a, b)
    folded = _fold_binary(cls, a, b)
    if folded is not None:
        return folded
    if cls is Add:
        if _is_zero(b): return a
        if _is_zero(a): return b
    elif cls is Sub:
        if _is_zero(b): return a
    elif cls is Mul:
        if _is_one(b): return a
        if _is_one(a): return b
    return cls(a, b, a.dtype)


def _is_zero(e: PrimExpr) -> bool:
    return isinstance(e, (IntImm, FloatImm)) and e.value == 0


def _is_one(e: PrimExpr) -> bool:
    return isinstance(e, (IntImm, FloatImm)) and e.value == 1


def add(a: ExprLike, b: ExprLike) -> PrimExpr: return _arith(Add, a, b)
def sub(a: ExprLike, b: ExprLike) -> PrimExpr: return _arith(Sub, a, b)
def mul(a: ExprLike, b: ExprLike) -> PrimExpr: return _arith(Mul, a, b)
def min(a: ExprLike, b: ExprLike) -> PrimExpr: return _arith(Min, a, b)  # noqa: A001
def max(a: ExprLike, b: ExprLike) -> PrimExpr: return _arith(Max, a, b)  # noqa: A001


def neg(a: PrimExpr) -> PrimExpr:
    return sub(const(0, a.dtype), a)


def div(a: ExprLike, b: ExprLike) -> PrimExpr:
    """``a / b``: true division for floats; integers are divided as floats like Python does.

    For integer division use :func:`floordiv` (``//``) or :func:`truncdiv`.
    """
    a, b = match_types(a, b)
    if not dt.parse(a.dtype).is_float:
        a, b = cast("float32", a), cast("float32", b)
    if isinstance(a, FloatImm) and isinstance(b, FloatImm) and b.value != 0:
        return FloatImm(a.dtype, a.value / b.value)
    if _is_one(b):
        return a
    return Div(a, b, a.dtype)


def _int_div_checked(name: str, a: PrimExpr, b: PrimExpr) -> None:
    if isinstance(b, IntImm) and b.value == 0:
        raise ZeroDivisionError(f"{name}: division by the constant zero in {a!r} {name} 0")


def truncdiv(a: ExprLike, b: ExprLike) -> PrimExpr:
    """C-style integer division, rounding toward zero."""
    a, b = match_types(a, b)
    _int_div_checked("truncdiv", a, b)
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        q = builtins.abs(a.value) // builtins.abs(b.value)
        return const(q if (a.value >= 0) == (b.value >= 0) else -q, a.dtype)
    if _is_one(b):
        return a
    return Div(a, b, a.dtype)


def truncmod(a: ExprLike, b: ExprLike) -> PrimExpr:
    """C-style remainder, with the sign of the dividend."""
    a, b = match_types(a, b)
    _int_div_checked("truncmod", a, b)
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        r = builtins.abs(a.value) % builtins.abs(b.value)
        return const(r if a.value >= 0 else -r, a.dtype)
    return Mod(a, b, a.dtype)


def floordiv(a: ExprLike, b: ExprLike) -> PrimExpr:
    a, b = match_types(a, b)
    if dt.parse(a.dtype).is_float:
        return call("floor", div(a, b))
    _int_div_checked("floordiv", a, b)
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return const(a.value // b.value, a.dtype)
    if _is_one(b):
        return a
    return FloorDiv(a, b, a.dtype)


def floormod(a: ExprLike, b: ExprLike) -> PrimExpr:
    a, b = match_types(a, b)
    if dt.parse(a.dtype).is_float:
        return sub(a, mul(b, floordiv(a, b)))
    _int_div_checked("floormod", a, b)
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        return const(a.value % b.value, a.dtype)
    if _is_one(b):
        return const(0, a.dtype)
    return FloorMod(a, b, a.dtype)


def _bool_dtype(e: PrimExpr) -> str:
    return dt.with_lanes("bool", dt.lanes_of(e.dtype))


_PY_CMP = {EQ: operator.eq, NE: operator.ne, LT: operator.lt, LE: operator.le,
           GT: operator.gt, GE: operator.ge}


def _cmp(cls: type, a: ExprLike, b: ExprLike) -> PrimExpr:
    a, b = match_types(a, b)
    if isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm)):
        return const(_PY_CMP[cls](a.value, b.value), "bool")
    return cls(a, b, _bool_dtype(a))


def eq(a: ExprLike, b: ExprLike) -> PrimExpr: return _cmp(EQ, a, b)
def ne(a: ExprLike, b: ExprLike) -> PrimExpr: return _cmp(NE, a, b)
def lt(a: ExprLike, b: ExprLike) -> PrimExpr: return _cmp(LT, a, b)
def le(a: ExprLike, b: ExprLike) -> PrimExpr: return _cmp(LE, a, b)
def gt(a: ExprLike, b: ExprLike) -> PrimExpr: return _cmp(GT, a, b)
def ge(a: ExprLike, b: ExprLike) -> PrimExpr: return _cmp(GE, a, b)


def _as_bool(e: ExprLike) -> PrimExpr:
    e = convert(e)
    if not dt.parse(e.dtype).is_bool:
        e = ne(e, const(0, e.dtype))
    return e


def logical_and(a: ExprLike, b: ExprLike) -> PrimExpr:
    a, b = _as_bool(a), _as_bool(b)
    if isinstance(a, IntImm):
        return b if a.value else a
    if isinstance(b, IntImm):
        return a if b.value else b
    return And(a, b, a.dtype)


def logical_or(a: ExprLike, b: ExprLike) -> PrimExpr:
    a, b = _as_bool(a), _as_bool(b)
    if isinstance(a, IntImm):
        return a if a.value else b
    if isinstance(b, IntImm):
        return b if b.value else a
    return Or(a, b, a.dtype)


def logical_not(a: ExprLike) -> PrimExpr:
    a = _as_bool(a)
    if isinstance(a, IntImm):
        return const(not a.value, "bool")
    return Not(a, a.dtype)


def all(*conds: ExprLike) -> PrimExpr:  # noqa: A001
    out: PrimExpr = const(True)
    for c in conds:
        out = logical_and(out, c)
    return out


def any(*conds: ExprLike) -> PrimExpr:  # noqa: A001
    out: PrimExpr = const(False)
    for c in conds:
        out = logical_or(out, c)
    return out


def select(cond: ExprLike, t: ExprLike, f: ExprLike) -> PrimExpr:
    """Both branches evaluated; use :func:`if_then_else` when one side may be out of bounds."""
    t, f = match_types(t, f)
    cond = _as_bool(cond)
    if isinstance(cond, IntImm):
        return t if cond.value else f
    return Select(cond, t, f, t.dtype)


def if_then_else(cond: ExprLike, t: ExprLike, f: ExprLike) -> PrimExpr:
    """Lazy conditional: only the taken branch is evaluated (safe for padding loads)."""
    t, f = match_types(t, f)
    cond = _as_bool(cond)
    if isinstance(cond, IntImm):
        return t if cond.value else f
    return Call(t.dtype, "if_then_else", (cond, t, f))


# ---- intrinsics -------------------------------------------------------------------------------

# name -> (argument count, result kind): "float" keeps the float dtype (ints are cast to
# float32), "same" keeps the operand dtype, "bool" gives bool, "int" needs integer operands.
INTRINSICS: dict[str, tuple[int, str]] = {
    "exp": (1, "float"), "exp2": (1, "float"), "exp10": (1, "float"), "log": (1, "float"),
    "log2": (1, "float"), "log10": (1, "float"), "log1p": (1, "float"), "sqrt": (1, "float"),
    "rsqrt": (1, "float"), "tanh": (1, "float"), "sigmoid": (1, "float"), "erf": (1, "float"),
    "sin": (1, "float"), "cos": (1, "float"), "tan": (1, "float"), "atan": (1, "float"),
    "floor": (1, "float"), "ceil": (1, "float"), "round": (1, "float"), "trunc": (1, "float"),
    "nearbyint": (1, "float"),
    "pow": (2, "float"), "fmod": (2, "float"), "atan2": (2, "float"),
    "fabs": (1, "same"), "abs": (1, "same"),
    "isnan": (1, "bool"), "isinf": (1, "bool"), "isfinite": (1, "bool"),
    "bitwise_and": (2, "int"), "bitwise_or": (2, "int"), "bitwise_xor": (2, "int"),
    "bitwise_not": (1, "int"), "shift_left": (2, "int"), "shift_right": (2, "int"),
    "popcount": (1, "int"),
}


def call(name: str, *args: ExprLike) -> PrimExpr:
    """Call an intrinsic by name, checking its arity and operand dtypes."""
    if name not in INTRINSICS:
        raise ValueError(f"unknown intrinsic {name!r}; known: {sorted(INTRINSICS)}")
    arity, kind = INTRINSICS[name]
    if len(args) != arity:
        raise TypeError(f"{name} takes {arity} argument(s), got {len(args)}")
    if arity == 2:
        exprs = list(match_types(args[0], args[1]))
    else:
        exprs = [convert(args[0])]
    t = dt.parse(exprs[0].dtype)
    if kind == "float":
        if not t.is_float:
            exprs = [cast(dt.with_lanes("float32", t.lanes), e) for e in exprs]
        return Call(exprs[0].dtype, name, tuple(exprs))
    if kind == "int":
        if not t.is_integer and not t.is_bool:
            raise TypeError(f"{name} needs integer operands, got {exprs[0].dtype}")
        folded = _fold_int_call(name, exprs)
        return folded if folded is not None else Call(exprs[0].dtype, name, tuple(exprs))
    if kind == "bool":
        if not t.is_float:  # integers are never nan or inf
            return const(name == "isfinite", "bool")
        return Call(_bool_dtype(exprs[0]), name, tuple(exprs))
    if name in ("abs", "fabs") and t.is_uint:
        return exprs[0]
    return Call(exprs[0].dtype, name, tuple(exprs))


_PY_INT_CALL: dict[str, Callable[..., int]] = {
    "bitwise_and": operator.and_, "bitwise_or": operator.or_, "bitwise_xor": operator.xor,
    "bitwise_not": operator.invert, "shift_left": operator.lshift,
}


def _fold_int_call(name: str, args: list[PrimExpr]) -> PrimExpr | None:
    fn = _PY_INT_CALL.get(name)
    if fn is None or not builtins.all(isinstance(a, IntImm) for a in args):
        return None
    return const(fn(*(a.value for a in args)), args[0].dtype)


def _unary(name: str) -> Callable[[ExprLike], PrimExpr]:
    def f(x: ExprLike) -> PrimExpr:
        return call(name, x)
    f.__name__ = name
    f.__doc__ = f"The ``{name}`` intrinsic, elementwise."
    return f


exp = _unary("exp"); exp2 = _unary("exp2"); exp10 = _unary("exp10"); log = _unary("log")
log2 = _unary("log2"); log10 = _unary("log10"); log1p = _unary("log1p"); sqrt = _unary("sqrt")
rsqrt = _unary("rsqrt"); tanh = _unary("tanh"); sigmoid = _unary("sigmoid"); erf = _unary("erf")
sin = _unary("sin"); cos = _unary("cos"); tan = _unary("tan"); atan = _unary("atan")
floor = _unary("floor"); ceil = _unary("ceil"); round = _unary("round")  # noqa: A001
trunc = _unary("trunc"); nearbyint = _unary("nearbyint"); fabs = _unary("fabs")
isnan = _unary("isnan"); isinf = _unary("isinf"); isfinite = _unary("isfinite")
bitwise_not = _unary("bitwise_not"); popcount = _unary("popcount")


def abs(x: ExprLike) -> PrimExpr:  # noqa: A001
    return call("abs", x)


def pow(x: ExprLike, y: ExprLike) -> PrimExpr:  # noqa: A001
    return call("pow", x, y)


def fmod(x: ExprLike, y: ExprLike) -> PrimExpr:
    return call("fmod", x, y)


def atan2(x: ExprLike, y: ExprLike) -> PrimExpr:
    return call("atan2", x, y)


def bitwise_and(a: ExprLike, b: ExprLike) -> PrimExpr:
    a, b = match_types(a, b)
    if dt.parse(a.dtype).is_bool:
        return logical_and(a, b)
    return call("bitwise_and", a, b)


def bitwise_or(a: ExprLike, b: ExprLike) -> PrimExpr:
    a, b = match_types(a, b)
    if dt.parse(a.dtype).is_bool:
        return logical_or(a, b)
    return call("bitwise_or", a, b)


def bitwise_xor(a: ExprLike, b: ExprLike) -> PrimExpr:
    return call("bitwise_xor", a, b)


def shift_left(a: ExprLike, b: ExprLike) -> PrimExpr:
    return call("shift_left", a, b)


def shift_right(a: ExprLike, b: ExprLike) -> PrimExpr:
    """Arithmetic shift for signed integers, logical for unsigned."""
    return call("shift_right", a, b)


# ---- target intrinsics (tensorize implementations) -------------------------------------------

def reinterpret(dtype: str, value: ExprLike) -> PrimExpr:
    """The bits of ``value`` read as ``dtype`` (TVM's ``T.reinterpret``): the total width
    (bits x lanes) must be equal, e.g. ``reinterpret("int32", <uint8x4>)``."""
    value = convert(value)
    dtype = dt.normalize(dtype)
    src, dst = dt.parse(value.dtype), dt.parse(dtype)
    if src.bits * src.lanes != dst.bits * dst.lanes or src.is_bool or dst.is_bool:
        raise TypeError(f"reinterpret: {value.dtype} ({src.bits * src.lanes} bits) cannot be "
                        f"read as {dtype} ({dst.bits * dst.lanes} bits)")
    if value.dtype == dtype:
        return value
    return Call(dtype, "reinterpret", (value,))


def _llvm_intrin(op_name: str, dtype: str, name: str, args: tuple) -> PrimExpr:
    if not isinstance(name, str) or not name.startswith("llvm."):
        raise ValueError(f"{op_name}: the intrinsic is named by its LLVM name, e.g. "
                         f"'llvm.x86.avx512.vpdpbusd.512', got {name!r}")
    return Call(dt.normalize(dtype), op_name,
                (StringImm(name),) + tuple(convert(a) for a in args))


def call_llvm_pure_intrin(dtype: str, name: str, *args: ExprLike) -> PrimExpr:
    """Call the LLVM intrinsic ``name`` (e.g. ``"llvm.x86.avx512.vpdpbusd.512"``) on ``args``,
    returning ``dtype``; it has no side effects. Unlike TVM, which passes an id from
    ``llvm_lookup_intrinsic_id``, the name itself is the first argument (a StringImm)."""
    return _llvm_intrin("call_llvm_pure_intrin", dtype, name, args)


def call_llvm_intrin(dtype: str, name: str, *args: ExprLike) -> PrimExpr:
    """Like :func:`call_llvm_pure_intrin` for an intrinsic that may have side effects;
    ``dtype`` may be ``"void"`` (use the call as an ``Evaluate`` statement)."""
    return _llvm_intrin("call_llvm_intrin", dtype, name, args)


def address_of(load: Any) -> PrimExpr:
    """The address of the element ``load`` reads, as a ``handle`` (TVM's ``T.address_of``):
    for intrinsics that take a pointer (AMX tile loads and stores, tile configurations).
    ``load`` must be a scalar ``BufferLoad``; nothing is read."""
    from workbench.tir.expr import BufferLoad
    if not isinstance(load, BufferLoad) or dt.lanes_of(load.dtype) != 1:
        raise TypeError(f"address_of: expects a scalar BufferLoad such as B[i, j], got {load!r}")
    return Call("handle", "address_of", (load,))


def max_value(dtype: str) -> PrimExpr:
    t = dt.parse(dtype)
    if t.is_float:
        return const(float(np.finfo(t.scalar).max), dtype)
    if t.is_bool:
        return const(True, "bool")
    return const(int(np.iinfo(t.scalar).max), dtype)


def min_value(dtype: str) -> PrimExpr:
    t = dt.parse(dtype)
    if t.is_float:
        return const(float(np.finfo(t.scalar).min), dtype)
    if t.is_bool:
        return const(False, "bool")
    return const(int(np.iinfo(t.scalar).min), dtype)


def infinity(dtype: str) -> PrimExpr:
    return FloatImm(dtype, math.inf)
