"""Constant integer bounds: ``ConstIntBound`` and the interval arithmetic behind it.

Bounds are closed integer intervals ``[min_value, max_value]``. As in TVM, the ends saturate at
the sentinels ``POS_INF = 2**63 - 1`` and ``NEG_INF = -POS_INF``, which stand for "unbounded"
(int64 variables and anything that could overflow 64 bits are unbounded). The helpers here work
on plain ``(lo, hi)`` tuples of Python ints because the simplifier calls them in hot loops;
:class:`ConstIntBound` is the public face.

:class:`BoundEvaluator` computes the bound of an expression from the bounds of its variables,
with one handler per node type (a dispatch table, not an isinstance ladder). It never
simplifies: the affine-aware bound of sums lives in :mod:`.canonical`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from workbench.ir import dtype as dt
from workbench.ir.dispatch import TypeTable
from workbench.tir import expr as E

POS_INF = (1 << 63) - 1
NEG_INF = -POS_INF
EVERYTHING = (NEG_INF, POS_INF)

Interval = tuple[int, int]


@dataclass(frozen=True, slots=True)
class ConstIntBound:
    """``[min_value, max_value]``; the ends may be the ``POS_INF`` / ``NEG_INF`` sentinels."""

    min_value: int
    max_value: int

    POS_INF = POS_INF
    NEG_INF = NEG_INF

    def __contains__(self, value: int) -> bool:
        return self.min_value <= value <= self.max_value

    def is_const(self) -> bool:
        return self.min_value == self.max_value

    def __repr__(self) -> str:
        def show(v: int) -> str:
            return "+inf" if v >= POS_INF else "-inf" if v <= NEG_INF else str(v)
        return f"ConstIntBound[{show(self.min_value)}, {show(self.max_value)}]"


# ---- saturating arithmetic on ends -----------------------------------------------------------

def is_inf(v: int) -> bool:
    return v >= POS_INF or v <= NEG_INF


def clamp(v: int) -> int:
    return POS_INF if v >= POS_INF else NEG_INF if v <= NEG_INF else v


def add_end(a: int, b: int) -> int:
    # An infinite end wins: lo + lo and hi + hi never mix opposite infinities in practice.
    if is_inf(a):
        return a
    if is_inf(b):
        return b
    return clamp(a + b)


def neg_end(a: int) -> int:
    return -a  # the sentinels are symmetric, so negation maps one to the other


def mul_end(a: int, b: int) -> int:
    if a == 0 or b == 0:
        return 0
    if is_inf(a) or is_inf(b):
        return POS_INF if (a > 0) == (b > 0) else NEG_INF
    return clamp(a * b)


def floordiv_end(a: int, b: int) -> int:
    """floor(a / b) for b != 0 with infinite ends."""
    if is_inf(a):
        return POS_INF if (a > 0) == (b > 0) else NEG_INF
    if is_inf(b):
        if a == 0:
            return 0
        return 0 if (a > 0) == (b > 0) else -1
    return a // b


def truncdiv_end(a: int, b: int) -> int:
    if is_inf(a):
        return POS_INF if (a > 0) == (b > 0) else NEG_INF
    if is_inf(b):
        return 0
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


# ---- interval operations ----------------------------------------------------------------------

def iv_add(a: Interval, b: Interval) -> Interval:
    return add_end(a[0], b[0]), add_end(a[1], b[1])


def iv_sub(a: Interval, b: Interval) -> Interval:
    return add_end(a[0], neg_end(b[1])), add_end(a[1], neg_end(b[0]))


def iv_scale(a: Interval, c: int) -> Interval:
    lo, hi = mul_end(a[0], c), mul_end(a[1], c)
    return (lo, hi) if c >= 0 else (hi, lo)


def iv_mul(a: Interval, b: Interval) -> Interval:
    corners = (mul_end(a[0], b[0]), mul_end(a[0], b[1]), mul_end(a[1], b[0]),
               mul_end(a[1], b[1]))
    return min(corners), max(corners)


def iv_union(a: Interval, b: Interval) -> Interval:
    return min(a[0], b[0]), max(a[1], b[1])


def iv_intersect(a: Interval, b: Interval) -> Interval:
    return max(a[0], b[0]), min(a[1], b[1])


def _nonzero_divisor(b: Interval) -> Interval | None:
    """Drop 0 from a divisor range (division by zero is undefined, so it never happens);
    ``None`` when the range straddles zero."""
    lo, hi = b
    if lo > 0 or hi < 0:
        return b
    if lo == 0 and hi > 0:
        return (1, hi)
    if hi == 0 and lo < 0:
        return (lo, -1)
    return None


def _abs_max(a: Interval) -> int:
    return max(abs(a[0]), abs(a[1]))


def iv_div(a: Interval, b: Interval, floor: bool) -> Interval:
    """Bounds of floordiv (``floor=True``) or truncdiv; both are monotone in each argument
    while the divisor keeps its sign, so the corners bound the result."""
    nb = _nonzero_divisor(b)
    if nb is None:
        m = _abs_max(a)  # |a // b| <= |a| whenever |b| >= 1
        return neg_end(m), m
    f = floordiv_end if floor else truncdiv_end
    corners = (f(a[0], nb[0]), f(a[0], nb[1]), f(a[1], nb[0]), f(a[1], nb[1]))
    return min(corners), max(corners)


def iv_floormod(a: Interval, b: Interval) -> Interval:
    nb = _nonzero_divisor(b)
    if nb is None:
        if b[0] == b[1] == 0:
            return EVERYTHING  # modulo by zero is undefined: claim nothing
        return add_end(b[0], 1), add_end(b[1], -1)
    blo, bhi = nb
    if blo > 0:
        if blo == bhi and not is_inf(a[0]) and not is_inf(a[1]):
            k = a[0] // blo
            if a[1] // blo == k:  # the whole range sits inside one period
                return a[0] - k * blo, a[1] - k * blo
        if a[0] >= 0:
            return 0, min(a[1], add_end(bhi, -1))
        return 0, add_end(bhi, -1)
    # negative divisor: the result lies in (b, 0]
    return add_end(blo, 1), 0


def iv_truncmod(a: Interval, b: Interval) -> Interval:
    nb = _nonzero_divisor(b)
    if nb is None and b[0] == b[1] == 0:
        return EVERYTHING
    m = add_end(_abs_max(nb if nb is not None else b), -1)
    if a[0] >= 0:
        return 0, min(a[1], m)
    if a[1] <= 0:
        return max(a[0], neg_end(m)), 0
    return max(a[0], neg_end(m)), min(a[1], m)


def dtype_bound(dtype: str) -> Interval:
    """The values a scalar of ``dtype`` can hold; 64-bit ends are the infinity sentinels."""
    t = dt.parse(dtype)
    if t.is_bool:
        return 0, 1
    if t.is_int:
        if t.bits >= 64:
            return EVERYTHING
        return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1
    if t.is_uint:
        return 0, POS_INF if t.bits >= 64 else (1 << t.bits) - 1
    return EVERYTHING


# ---- bounds of expression trees ---------------------------------------------------------------

class BoundEvaluator:
    """Bounds of expressions; ``var_bound(v)`` supplies variables, ``recurse(e)`` children
    (the analyzer passes its memoised entry point so shared subtrees are computed once)."""

    def __init__(self, var_bound: Callable[[E.Var], Interval],
                 recurse: Callable[[E.PrimExpr], Interval]):
        self.var_bound = var_bound
        self.recurse = recurse

    def __call__(self, e: E.PrimExpr) -> Interval:
        return _HANDLERS.lookup(type(e))(self, e)


def _default(ev: BoundEvaluator, e: E.PrimExpr) -> Interval:
    return dtype_bound(e.dtype)


def _binary(fn: Callable[[Interval, Interval], Interval]):
    def h(ev: BoundEvaluator, e: E.BinaryOp) -> Interval:
        if not dt.parse(e.dtype).is_integer:
            return EVERYTHING
        r = fn(ev.recurse(e.a), ev.recurse(e.b))
        # The result of an integer op cannot leave its dtype (we assume no overflow).
        return iv_intersect(r, dtype_bound(e.dtype))
    return h


def _var(ev: BoundEvaluator, e: E.Var) -> Interval:
    return ev.var_bound(e)


def _intimm(ev: BoundEvaluator, e: E.IntImm) -> Interval:
    return e.value, e.value


def _cast(ev: BoundEvaluator, e: E.Cast) -> Interval:
    t = dt.parse(e.dtype)
    if not (t.is_integer or t.is_bool):
        return EVERYTHING
    src = dt.parse(e.value.dtype)
    if t.is_bool:
        return 0, 1
    if not (src.is_integer or src.is_bool):
        return dtype_bound(e.dtype)
    inner = ev.recurse(e.value)
    target = dtype_bound(e.dtype)
    if target[0] <= inner[0] and inner[1] <= target[1]:
        return inner  # fits: the cast keeps the value
    return target


def _select(ev: BoundEvaluator, e: E.Select) -> Interval:
    return iv_union(ev.recurse(e.true_value), ev.recurse(e.false_value))


def _boolean(ev: BoundEvaluator, e: E.PrimExpr) -> Interval:
    return 0, 1


def _ramp(ev: BoundEvaluator, e: E.Ramp) -> Interval:
    return iv_add(ev.recurse(e.base), iv_mul(ev.recurse(e.stride), (0, e.lanes - 1)))


def _broadcast(ev: BoundEvaluator, e: E.Broadcast) -> Interval:
    return ev.recurse(e.value)


def _let(ev: BoundEvaluator, e: E.Let) -> Interval:
    return ev.recurse(e.body)  # the analyzer binds e.var before asking for the body


def _call(ev: BoundEvaluator, e: E.Call) -> Interval:
    h = _CALL_HANDLERS.get(e.op)
    if h is None or not dt.parse(e.dtype).is_integer:
        return dtype_bound(e.dtype)
    return iv_intersect(h(ev, e), dtype_bound(e.dtype))


def _call_if_then_else(ev: BoundEvaluator, e: E.Call) -> Interval:
    return iv_union(ev.recurse(e.args[1]), ev.recurse(e.args[2]))


def _call_bitwise_and(ev: BoundEvaluator, e: E.Call) -> Interval:
    a, b = ev.recurse(e.args[0]), ev.recurse(e.args[1])
    # Masking with a non-negative value gives a non-negative result no larger than the mask.
    if a[0] >= 0 and b[0] >= 0:
        return 0, min(a[1], b[1])
    if a[0] >= 0:
        return 0, a[1]
    if b[0] >= 0:
        return 0, b[1]
    return dtype_bound(e.dtype)


def _call_shift_right(ev: BoundEvaluator, e: E.Call) -> Interval:
    a, s = ev.recurse(e.args[0]), ev.recurse(e.args[1])
    if s[0] >= 0 and s[1] < 64:
        return (floordiv_end(a[0], 1 << s[1]) if a[0] >= 0 else floordiv_end(a[0], 1 << s[0]),
                floordiv_end(a[1], 1 << s[0]) if a[1] >= 0 else floordiv_end(a[1], 1 << s[1]))
    return dtype_bound(e.dtype)


def _call_abs(ev: BoundEvaluator, e: E.Call) -> Interval:
    a = ev.recurse(e.args[0])
    if a[0] >= 0:
        return a
    if a[1] <= 0:
        return neg_end(a[1]), neg_end(a[0])
    return 0, _abs_max(a)


_CALL_HANDLERS: dict[str, Callable[[BoundEvaluator, E.Call], Interval]] = {
    "if_then_else": _call_if_then_else,
    "bitwise_and": _call_bitwise_and,
    "shift_right": _call_shift_right,
    "abs": _call_abs,
}

# Found along the MRO (SizeVar -> Var, LT -> CmpOp); other types get _default.
_HANDLERS: TypeTable[Callable[[BoundEvaluator, E.PrimExpr], Interval]] = TypeTable({
    E.IntImm: _intimm,
    E.Var: _var,
    E.Add: _binary(iv_add),
    E.Sub: _binary(iv_sub),
    E.Mul: _binary(iv_mul),
    E.FloorDiv: _binary(lambda a, b: iv_div(a, b, floor=True)),
    E.Div: _binary(lambda a, b: iv_div(a, b, floor=False)),
    E.FloorMod: _binary(iv_floormod),
    E.Mod: _binary(iv_truncmod),
    E.Min: _binary(lambda a, b: (min(a[0], b[0]), min(a[1], b[1]))),
    E.Max: _binary(lambda a, b: (max(a[0], b[0]), max(a[1], b[1]))),
    E.CmpOp: _boolean,
    E.And: _boolean,
    E.Or: _boolean,
    E.Not: _boolean,
    E.Cast: _cast,
    E.Select: _select,
    E.Ramp: _ramp,
    E.Broadcast: _broadcast,
    E.Let: _let,
    E.Call: _call,
}, default=_default)
