"""A reference evaluator for scalar expressions, used to check the simplifier.

``evaluate(expr, env)`` computes an expression's value with TIR semantics: integer ``//``/``%``
(FloorDiv/FloorMod) round toward minus infinity, ``Div``/``Mod`` on integers truncate toward
zero, casts to narrower integers wrap, floats are computed in their dtype's precision (numpy
scalars), ``if_then_else`` evaluates only the taken branch. ``env`` maps Vars to Python values
and Buffers to numpy arrays. It is deliberately independent of the simplifier's code.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import numpy as np

from workbench.ir import dtype as dt
from workbench.ir.dispatch import TypeTable
from workbench.tir import expr as E


class EvalError(ValueError):
    """The expression cannot be evaluated (unbound variable, division by zero, ...)."""


def evaluate(expr: E.PrimExpr, env: Mapping[Any, Any] | None = None) -> Any:
    """The value of ``expr`` with variables (and buffers) taken from ``env``."""
    return _Eval(dict(env or {})).run(expr)


def _wrap(v: int, dtype: str) -> int:
    t = dt.parse(dtype)
    if t.is_bool:
        return int(bool(v))
    if not t.is_integer:
        return v
    v &= (1 << t.bits) - 1
    if t.is_int and v >= 1 << (t.bits - 1):
        v -= 1 << t.bits
    return v


def _value(v: Any, dtype: str) -> Any:
    t = dt.parse(dtype)
    if t.is_float:
        return np.dtype(t.scalar).type(v)
    if t.is_bool:
        return bool(v)
    return int(v)


def _truncdiv(a: int, b: int) -> int:
    if b == 0:
        raise EvalError("integer division by zero")
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _floordiv(a: Any, b: Any) -> Any:
    if b == 0:
        raise EvalError("integer division by zero")
    return a // b


def _floormod(a: Any, b: Any) -> Any:
    if b == 0:
        raise EvalError("integer modulo by zero")
    return a % b


class _Eval:
    def __init__(self, env: dict):
        self.env = env

    def run(self, e: E.PrimExpr) -> Any:
        h = _TABLE.lookup(type(e))
        if h is None:
            raise EvalError(f"cannot evaluate {type(e).__name__}")
        return h(self, e)

    def binary(self, e: E.BinaryOp) -> Any:
        a, b = self.run(e.a), self.run(e.b)
        t = dt.parse(e.dtype)
        if t.is_float:
            with np.errstate(all="ignore"):
                return _FLOAT_BIN[type(e)](a, b)
        return _INT_BIN[type(e)](a, b)


_INT_BIN: dict[type, Callable[[int, int], int]] = {
    E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
    E.FloorDiv: _floordiv, E.FloorMod: _floormod,
    E.Div: _truncdiv, E.Mod: lambda a, b: a - b * _truncdiv(a, b),
    E.Min: min, E.Max: max,
}
_FLOAT_BIN: dict[type, Callable[[Any, Any], Any]] = {
    E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
    E.Div: lambda a, b: a / b, E.Mod: np.fmod, E.Min: min, E.Max: max,
}
_CMP: dict[type, Callable[[Any, Any], bool]] = {
    E.EQ: lambda a, b: a == b, E.NE: lambda a, b: a != b, E.LT: lambda a, b: a < b,
    E.LE: lambda a, b: a <= b, E.GT: lambda a, b: a > b, E.GE: lambda a, b: a >= b,
}


def _var(ev: _Eval, e: E.Var) -> Any:
    if e not in ev.env:
        raise EvalError(f"variable {e.name!r} has no value")
    return _value(ev.env[e], e.dtype)


def _cast(ev: _Eval, e: E.Cast) -> Any:
    v = ev.run(e.value)
    t = dt.parse(e.dtype)
    if t.is_float:
        return np.dtype(t.scalar).type(v)
    if t.is_bool:
        return bool(v != 0)
    if isinstance(v, (float, np.floating)):
        if not math.isfinite(float(v)):
            raise EvalError("cast of a non-finite float to an integer")
        v = int(v)  # truncation toward zero
    return _wrap(int(v), e.dtype)


def _call(ev: _Eval, e: E.Call) -> Any:
    if e.op == "if_then_else":
        return ev.run(e.args[1]) if ev.run(e.args[0]) else ev.run(e.args[2])
    args = [ev.run(a) for a in e.args]
    fn = _CALLS.get(e.op)
    if fn is None:
        raise EvalError(f"cannot evaluate the intrinsic {e.op!r}")
    with np.errstate(all="ignore"):
        out = fn(*args)
    return _value(out, e.dtype)


_CALLS: dict[str, Callable[..., Any]] = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "tanh": np.tanh, "fabs": np.abs,
    "abs": abs, "floor": np.floor, "ceil": np.ceil,
    "bitwise_and": lambda a, b: a & b, "bitwise_or": lambda a, b: a | b,
    "bitwise_xor": lambda a, b: a ^ b, "shift_left": lambda a, b: a << b,
    "shift_right": lambda a, b: a >> b,
}


def _load(ev: _Eval, e: E.BufferLoad) -> Any:
    arr = ev.env.get(e.buffer)
    if arr is None:
        raise EvalError(f"buffer {e.buffer.name!r} has no array")
    return _value(arr[tuple(int(ev.run(i)) for i in e.indices)], e.dtype)


def _let(ev: _Eval, e: E.Let) -> Any:
    inner = _Eval({**ev.env, e.var: ev.run(e.value)})
    return inner.run(e.body)


_TABLE: TypeTable[Callable[[_Eval, Any], Any]] = TypeTable({
    E.IntImm: lambda ev, e: _value(e.value, e.dtype),
    E.FloatImm: lambda ev, e: _value(e.value, e.dtype),
    E.Var: _var,
    E.CmpOp: lambda ev, e: bool(_CMP[type(e)](ev.run(e.a), ev.run(e.b))),
    E.And: lambda ev, e: bool(ev.run(e.a)) and bool(ev.run(e.b)),
    E.Or: lambda ev, e: bool(ev.run(e.a)) or bool(ev.run(e.b)),
    E.Not: lambda ev, e: not ev.run(e.a),
    E.BinaryOp: _Eval.binary,
    E.Cast: _cast,
    E.Select: lambda ev, e: ev.run(e.true_value) if ev.run(e.condition) else ev.run(e.false_value),
    E.Call: _call,
    E.BufferLoad: _load,
    E.Let: _let,
})
