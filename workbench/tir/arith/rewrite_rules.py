"""Named rewrite rule sets for what the affine form does not cover.

A :class:`Rule` is a name, the node types it applies to, and a function ``fn(analyzer, e)`` that
returns a replacement or ``None``. ``e``'s children are already simplified; a replacement is
simplified again (its own children hit the memo). Rules are grouped in named :class:`RuleSet` s
that compose with ``+`` (the practice of tinygrad's PatternMatcher), and the analyzer builds one
dispatch table from the composed set: node type -> rules in order.

Integer rules only fire on integer operands; float expressions get constant folding only,
computed in the dtype's own precision, and are never reassociated.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

import numpy as np

from workbench.ir import dtype as dt
from workbench.tir import expr as E
from workbench.tir.arith.canonical import is_canonical_dtype
from workbench.tir.arith.const_bound import NEG_INF, POS_INF, dtype_bound, iv_intersect

if TYPE_CHECKING:  # pragma: no cover
    from workbench.tir.arith.analyzer import Analyzer

RuleFn = Callable[["Analyzer", E.PrimExpr], "E.PrimExpr | None"]


@dataclass(frozen=True)
class Rule:
    name: str
    types: tuple[type, ...]
    fn: RuleFn
    doc: str = ""


@dataclass(frozen=True)
class RuleSet:
    """An ordered, named collection of rules; ``a + b`` keeps a's rules first."""

    name: str
    rules: tuple[Rule, ...]

    def __add__(self, other: "RuleSet") -> "RuleSet":
        return RuleSet(f"{self.name}+{other.name}", self.rules + other.rules)

    def table(self) -> dict[type, tuple[Rule, ...]]:
        """Node type -> its rules, filled lazily per type and shared by every analyzer that
        uses this rule set (building it eagerly would cost each ``Analyzer()`` ~0.5 ms)."""
        t = _TABLES.get(self)
        if t is None:
            t = _TABLES[self] = _LazyTable(self.rules)
        return t

    def names(self) -> list[str]:
        return [r.name for r in self.rules]


class _LazyTable(dict):
    """Rules by exact node type, following each class's MRO (a CmpOp rule covers LT)."""

    def __init__(self, rules: tuple[Rule, ...]):
        super().__init__()
        self.rules = rules

    def __missing__(self, cls: type) -> tuple[Rule, ...]:
        found = tuple(r for r in self.rules if issubclass(cls, r.types))
        self[cls] = found
        return found

    def get(self, cls, default=None):  # type: ignore[override]
        return self[cls]


_TABLES: dict[RuleSet, _LazyTable] = {}


def rule(types: type | tuple[type, ...], doc: str = "") -> Callable[[RuleFn], Rule]:
    """Decorator: turn ``fn`` into a :class:`Rule` named after it."""
    tys = types if isinstance(types, tuple) else (types,)
    return lambda fn: Rule(fn.__name__, tys, fn, doc or (fn.__doc__ or "").strip())


def _is_int(e: E.PrimExpr) -> bool:
    return is_canonical_dtype(e.dtype)


def _true(e: E.PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value != 0


def _false(e: E.PrimExpr) -> bool:
    return isinstance(e, E.IntImm) and e.value == 0


def _bool(v: bool, like: E.PrimExpr) -> E.PrimExpr:
    return E.IntImm("bool", int(bool(v))) if dt.lanes_of(like.dtype) == 1 else None  # type: ignore


# ---- constant folding ---------------------------------------------------------------------

def _np_float(v: float, dtype: str):
    return np.dtype(dtype).type(v)


_FLOAT_OPS = {E.Add: operator.add, E.Sub: operator.sub, E.Mul: operator.mul,
              E.Min: min, E.Max: max}
_INT_OPS = {E.Add: operator.add, E.Sub: operator.sub, E.Mul: operator.mul,
            E.Min: min, E.Max: max}


@rule((E.Add, E.Sub, E.Mul, E.Min, E.Max, E.Div))
def fold_float_binary(an: "Analyzer", e: E.BinaryOp):
    """Two float constants: compute in the dtype's precision (float32 stays float32)."""
    if not (isinstance(e.a, E.FloatImm) and isinstance(e.b, E.FloatImm)):
        return None
    a, b = _np_float(e.a.value, e.dtype), _np_float(e.b.value, e.dtype)
    if type(e) in (E.Min, E.Max) and (np.isnan(a) or np.isnan(b)):
        return None  # NaN handling of min/max is the target's business
    if type(e) is E.Div:
        if b == 0:
            return None  # keep the inf/nan producing division visible
        with np.errstate(all="ignore"):
            return E.FloatImm(e.dtype, float(a / b))
    with np.errstate(all="ignore"):
        return E.FloatImm(e.dtype, float(_FLOAT_OPS[type(e)](a, b)))


@rule((E.Add, E.Sub, E.Mul, E.Min, E.Max))
def fold_int_binary(an: "Analyzer", e: E.BinaryOp):
    """Two integer constants (unsigned and narrow types wrap like the hardware)."""
    if isinstance(e.a, E.IntImm) and isinstance(e.b, E.IntImm) and e.a.dtype != "bool":
        return _int_const(_INT_OPS[type(e)](e.a.value, e.b.value), e.dtype)
    return None


@rule((E.Div, E.Mod, E.FloorDiv, E.FloorMod))
def fold_int_division(an: "Analyzer", e: E.BinaryOp):
    """Integer division of constants with the node's rounding; never folds a division by 0."""
    if isinstance(e.a, E.IntImm) and isinstance(e.b, E.IntImm) and e.b.value != 0:
        from workbench.tir.arith.canonical import _FOLD_DIV
        return _int_const(_FOLD_DIV[type(e)](e.a.value, e.b.value), e.dtype)
    return None


def _int_const(v: int, dtype: str) -> E.PrimExpr:
    t = dt.parse(dtype)
    if t.is_uint or (t.is_int and t.bits < 64):
        mask = (1 << t.bits) - 1
        v &= mask
        if t.is_int and v >= 1 << (t.bits - 1):
            v -= 1 << t.bits
    return E.IntImm(dtype, v)


_CMP = {E.EQ: operator.eq, E.NE: operator.ne, E.LT: operator.lt, E.LE: operator.le,
        E.GT: operator.gt, E.GE: operator.ge}


@rule(E.CmpOp)
def fold_compare(an: "Analyzer", e: E.CmpOp):
    """Comparisons of two constants (floats compared in their own precision)."""
    a, b = e.a, e.b
    if isinstance(a, E.IntImm) and isinstance(b, E.IntImm):
        return _bool(_CMP[type(e)](a.value, b.value), e)
    if isinstance(a, E.FloatImm) and isinstance(b, E.FloatImm):
        return _bool(_CMP[type(e)](_np_float(a.value, a.dtype), _np_float(b.value, b.dtype)), e)
    return None


@rule(E.Cast)
def fold_cast(an: "Analyzer", e: E.Cast):
    """Casts of constants: the source value is first rounded to its own dtype, then converted
    (float -> int truncates toward zero; int -> narrower int wraps)."""
    v, t = e.value, dt.parse(e.dtype)
    if e.value.dtype == e.dtype:
        return v
    if t.lanes != 1 or not isinstance(v, (E.IntImm, E.FloatImm)):
        return None
    x = _np_float(v.value, v.dtype) if isinstance(v, E.FloatImm) else v.value
    if t.is_float:
        with np.errstate(all="ignore"):
            return E.FloatImm(e.dtype, float(np.dtype(e.dtype).type(x)))
    if t.is_bool:
        return E.IntImm("bool", int(x != 0))
    if isinstance(v, E.FloatImm):
        if not np.isfinite(x):
            return None
        x = int(x)  # truncation toward zero, like C
    return _int_const(int(x), e.dtype)


def _symbolic_multiple(x: E.PrimExpr, d: E.PrimExpr) -> E.PrimExpr | None:
    """``q`` when ``x`` is ``q * d`` or ``d * q`` (``d`` the very same expression)."""
    from workbench.ir.structural import structural_equal
    if isinstance(x, E.Mul):
        if structural_equal(x.b, d):
            return x.a
        if structural_equal(x.a, d):
            return x.b
    return None


@rule((E.FloorDiv, E.FloorMod))
def floor_by_symbolic_divisor(an: "Analyzer", e: E.BinaryOp):
    """A symbolic divisor ``s`` (a dynamic length; constant divisors are the canonical
    form's job): ``(q * s + r) // s`` is ``q`` and ``(q * s + r) % s`` is ``r`` (``r`` alone:
    0 and ``r``) when ``0 <= r < s`` is provable (a row-major index over ``s`` split back into its parts);
    ``q * s`` divides exactly. Integer division goes to the canonical form, which takes
    constant divisors apart itself and tries this rule for the others (``_opaque``)."""
    d, x = e.b, e.a
    # d >= 0 suffices: a division by 0 has no value to keep
    if isinstance(d, E.IntImm) or not _is_int(x) or \
            not an.can_prove(E.GE(d, E.IntImm(d.dtype, 0), "bool")):
        return None
    q = _symbolic_multiple(x, d)
    if q is not None:
        return q if isinstance(e, E.FloorDiv) else E.IntImm(e.dtype, 0)
    if an.can_prove(E.GE(x, E.IntImm(x.dtype, 0), "bool")) and \
            an.can_prove(E.LT(x, d, "bool")):
        return E.IntImm(e.dtype, 0) if isinstance(e, E.FloorDiv) else x
    if not isinstance(x, E.Add):
        return None
    for m, r in ((x.a, x.b), (x.b, x.a)):
        q = _symbolic_multiple(m, d)
        if q is not None and an.can_prove(E.GE(r, E.IntImm(r.dtype, 0), "bool")) and \
                an.can_prove(E.LT(r, d, "bool")):
            return q if isinstance(e, E.FloorDiv) else r
    return None


CONST_FOLD = RuleSet("const_fold", (fold_float_binary, fold_int_binary, fold_int_division,
                                     fold_compare, fold_cast))


# ---- comparisons --------------------------------------------------------------------------

@rule(E.CmpOp)
def compare_by_bounds(an: "Analyzer", e: E.CmpOp):
    """Decide an integer comparison from the bounds (and known facts) of ``a - b``."""
    if not _is_int(e.a):
        return None
    lo, hi = an._diff_bound(e.a, e.b)
    verdict = _CMP_DECIDE[type(e)](lo, hi)
    return None if verdict is None else E.IntImm("bool", int(verdict))


_CMP_DECIDE: dict[type, Callable[[int, int], bool | None]] = {
    E.LT: lambda lo, hi: True if hi < 0 else False if lo >= 0 else None,
    E.LE: lambda lo, hi: True if hi <= 0 else False if lo > 0 else None,
    E.GT: lambda lo, hi: True if lo > 0 else False if hi <= 0 else None,
    E.GE: lambda lo, hi: True if lo >= 0 else False if hi < 0 else None,
    E.EQ: lambda lo, hi: True if lo == hi == 0 else False if lo > 0 or hi < 0 else None,
    E.NE: lambda lo, hi: False if lo == hi == 0 else True if lo > 0 or hi < 0 else None,
}


@rule((E.CmpOp, E.And, E.Or, E.Not))
def known_condition(an: "Analyzer", e: E.PrimExpr):
    """A condition assumed by an enclosing constraint scope (or its negation)."""
    return an._known_truth(e)


COMPARE = RuleSet("compare", (compare_by_bounds, known_condition))


# ---- logic --------------------------------------------------------------------------------

@rule(E.And)
def and_identity(an: "Analyzer", e: E.And):
    """``true && x -> x``, ``false && x -> false``, ``x && x -> x``, ``x && !x -> false``."""
    a, b = e.a, e.b
    if _true(a):
        return b
    if _true(b):
        return a
    if _false(a) or _false(b):
        return E.IntImm("bool", 0) if dt.lanes_of(e.dtype) == 1 else None
    if an._key(a) == an._key(b):
        return a
    if _negates(an, a, b) and dt.lanes_of(e.dtype) == 1:
        return E.IntImm("bool", 0)
    return None


@rule(E.Or)
def or_identity(an: "Analyzer", e: E.Or):
    """``false || x -> x``, ``true || x -> true``, ``x || x -> x``, ``x || !x -> true``."""
    a, b = e.a, e.b
    if _false(a):
        return b
    if _false(b):
        return a
    if _true(a) or _true(b):
        return E.IntImm("bool", 1) if dt.lanes_of(e.dtype) == 1 else None
    if an._key(a) == an._key(b):
        return a
    if _negates(an, a, b) and dt.lanes_of(e.dtype) == 1:
        return E.IntImm("bool", 1)
    return None


def _negates(an: "Analyzer", a: E.PrimExpr, b: E.PrimExpr) -> bool:
    return ((isinstance(a, E.Not) and an._key(a.a) == an._key(b))
            or (isinstance(b, E.Not) and an._key(b.a) == an._key(a)))


@rule((E.And, E.Or))
def merge_intervals(an: "Analyzer", e: E.BinaryOp):
    """Two integer comparisons of the same linear form: ``i < 10 && i < 12 -> i < 10``,
    ``i < 4 && i >= 4 -> false``, ``i < 10 || i < 12 -> i < 12``."""
    fa, fb = an._as_interval(e.a), an._as_interval(e.b)
    if fa is None or fb is None or fa[0] != fb[0]:
        return None
    ia, ib = fa[1], fb[1]
    if isinstance(e, E.And):
        both = iv_intersect(ia, ib)
        if both[0] > both[1]:
            return E.IntImm("bool", 0)
        return e.a if both == ia else e.b if both == ib else None
    lo_first, hi_first = (ia, ib) if ia[0] <= ib[0] else (ib, ia)
    if (lo_first[0] <= NEG_INF and hi_first[1] >= POS_INF
            and hi_first[0] <= lo_first[1] + 1):
        return E.IntImm("bool", 1)  # the two intervals cover every integer
    if ia[0] <= ib[0] and ib[1] <= ia[1]:
        return e.a
    if ib[0] <= ia[0] and ia[1] <= ib[1]:
        return e.b
    return None


_NEGATED_CMP = {E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT}


@rule(E.Not)
def not_rules(an: "Analyzer", e: E.Not):
    """``!const``, ``!!x -> x``, ``!(a == b) -> a != b`` and, for integers only (floats have
    NaN), ``!(a < b) -> a >= b``; De Morgan is left alone."""
    a = e.a
    if isinstance(a, E.IntImm):
        return E.IntImm("bool", int(not a.value))
    if isinstance(a, E.Not):
        return a.a
    if isinstance(a, E.EQ):
        return E.NE(a.a, a.b, a.dtype)
    if isinstance(a, E.NE):
        return E.EQ(a.a, a.b, a.dtype)
    neg = _NEGATED_CMP.get(type(a))
    if neg is not None and dt.parse(a.a.dtype).is_integer:
        return neg(a.a, a.b, a.dtype)
    return None


LOGIC = RuleSet("logic", (and_identity, or_identity, merge_intervals, not_rules))


# ---- min / max ----------------------------------------------------------------------------

@rule((E.Min, E.Max))
def minmax_by_bounds(an: "Analyzer", e: E.BinaryOp):
    """``min(a, b) -> a`` when ``a - b <= 0`` is known (``min(x, x+1) -> x``,
    ``max(i, 0) -> i`` for ``i >= 0``), and the mirror cases."""
    if not _is_int(e):
        return None
    lo, hi = an._diff_bound(e.a, e.b)
    if isinstance(e, E.Min):
        return e.a if hi <= 0 else e.b if lo >= 0 else None
    return e.a if lo >= 0 else e.b if hi <= 0 else None


@rule((E.Min, E.Max))
def minmax_nested_const(an: "Analyzer", e: E.BinaryOp):
    """``min(min(x, c1), c2) -> min(x, min(c1, c2))``; clamps that cancel:
    ``min(max(x, c1), c2) -> c2`` when ``c1 >= c2`` (and the mirror for max)."""
    if not _is_int(e) or not isinstance(e.b, E.IntImm) or not isinstance(e.a, (E.Min, E.Max)):
        return None
    inner, c2 = e.a, e.b.value
    if not isinstance(inner.b, E.IntImm):
        return None
    c1 = inner.b.value
    if type(inner) is type(e):
        best = min(c1, c2) if isinstance(e, E.Min) else max(c1, c2)
        return type(e)(inner.a, E.IntImm(e.dtype, best), e.dtype)
    if isinstance(e, E.Min) and c1 >= c2:
        return e.b
    if isinstance(e, E.Max) and c1 <= c2:
        return e.b
    return None


@rule((E.Min, E.Max))
def minmax_absorb(an: "Analyzer", e: E.BinaryOp):
    """``min(min(x, y), y) -> min(x, y)`` (any operand order, and the same for max): a
    bound clamped twice by the same value (symbolic tiles: ``min(min(t*4+3, n-1), n-1)``)."""
    if not _is_int(e):
        return None
    from workbench.ir.structural import structural_equal
    for inner, other in ((e.a, e.b), (e.b, e.a)):
        if type(inner) is type(e) and (structural_equal(inner.a, other)
                                       or structural_equal(inner.b, other)):
            return inner
    return None


@rule((E.Min, E.Max))
def minmax_lattice_absorb(an: "Analyzer", e: E.BinaryOp):
    """``min(max(x, y), x) -> x`` and ``max(min(x, y), x) -> x`` (any operand order): the
    absorption law, true for all integers. Symbolic row tiles produce it as
    ``min(max(s - 1, 0), s - 1)``; reduced, ``row < min(...) + 1`` becomes ``row < s``, which
    predicate merging recognises as the row check."""
    if not _is_int(e):
        return None
    from workbench.ir.structural import structural_equal
    dual = E.Max if isinstance(e, E.Min) else E.Min
    for inner, other in ((e.a, e.b), (e.b, e.a)):
        if type(inner) is dual and (structural_equal(inner.a, other)
                                    or structural_equal(inner.b, other)):
            return other
    return None


MINMAX = RuleSet("minmax", (minmax_by_bounds, minmax_nested_const, minmax_absorb,
                            minmax_lattice_absorb))


# ---- select and casts ---------------------------------------------------------------------

@rule(E.Select)
def select_rules(an: "Analyzer", e: E.Select):
    """A known condition picks a branch; equal branches make the condition irrelevant."""
    if isinstance(e.condition, E.IntImm):
        return e.true_value if e.condition.value else e.false_value
    if an._key(e.true_value) == an._key(e.false_value):
        return e.true_value
    return None


@rule(E.Call)
def if_then_else_rules(an: "Analyzer", e: E.Call):
    """``if_then_else`` like Select (only the taken branch would run, so dropping the other
    is always safe)."""
    if e.op != "if_then_else":
        return None
    c, t, f = e.args
    if isinstance(c, E.IntImm):
        return t if c.value else f
    if an._key(t) == an._key(f):
        return t
    return None


@rule(E.Cast)
def cast_roundtrip(an: "Analyzer", e: E.Cast):
    """``int32(int64(x)) -> x``: widening then narrowing back to x's own dtype keeps x."""
    inner = e.value
    if not isinstance(inner, E.Cast) or inner.value.dtype != e.dtype:
        return None
    t, mid = dt.parse(e.dtype), dt.parse(inner.dtype)
    if t.is_integer and mid.is_integer and mid.bits >= t.bits and t.lanes == 1:
        return inner.value
    return None


_DISTRIBUTE = (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max)


def _holds(an: "Analyzer", x: E.PrimExpr, dtype: str) -> bool:
    """Are ``x``'s values strictly inside ``dtype``'s range? Strictly: an op's bound is clipped
    to its dtype's range, so a bound that reaches an end may hide a wrap."""
    lo, hi = an._bound(x)
    dlo, dhi = dtype_bound(dtype)
    return dlo < lo and hi < dhi


@rule(E.Cast)
def cast_distribute(an: "Analyzer", e: E.Cast):
    """``int64(a + b) -> int64(a) + int64(b)`` (and ``- * // % min max``; narrowing casts
    alike) when the bounds show that nothing wraps in either dtype, and ``int64(int32(y)) -> y``
    for an int64 ``y`` that fits int32. Casts of index arithmetic sink to its leaves, so the
    affine form sees one dtype: inlined reshape chains mix int32 loop variables with int64
    shapes, and their indices only fold to a plain ramp once the casts are out of the way."""
    t = dt.parse(e.dtype)
    x = e.value
    s = dt.parse(x.dtype)
    if t.lanes != 1 or s.lanes != 1 or not (t.is_int and s.is_int):
        return None
    if isinstance(x, E.Cast):
        y = x.value
        ys = dt.parse(y.dtype)
        if ys.lanes == 1 and ys.is_int and _holds(an, y, x.dtype):
            return y if y.dtype == e.dtype else E.Cast(e.dtype, y)
        return None
    if not isinstance(x, _DISTRIBUTE) or not (_holds(an, x, x.dtype) and
                                               _holds(an, x, e.dtype)):
        return None
    if not (_holds(an, x.a, e.dtype) and _holds(an, x.b, e.dtype)):
        return None
    return type(x)(E.Cast(e.dtype, x.a), E.Cast(e.dtype, x.b), e.dtype)


SELECT = RuleSet("select", (select_rules, if_then_else_rules))
CAST = RuleSet("cast", (cast_roundtrip, cast_distribute))


# ---- vectors (what vectorizing produces) ------------------------------------------------------

_LANEWISE = (E.Add, E.Sub, E.Mul, E.Min, E.Max, E.Div, E.Mod, E.FloorDiv, E.FloorMod)


@rule(_LANEWISE)
def broadcast_lanewise(an: "Analyzer", e: E.BinaryOp):
    """``op(broadcast(a), broadcast(b)) -> broadcast(op(a, b))``."""
    a, b = e.a, e.b
    if isinstance(a, E.Broadcast) and isinstance(b, E.Broadcast) and a.lanes == b.lanes:
        return E.Broadcast(type(e)(a.value, b.value, a.value.dtype), a.lanes, e.dtype)
    return None


@rule((E.Add, E.Sub, E.Mul))
def ramp_arith(an: "Analyzer", e: E.BinaryOp):
    """Ramps stay ramps: ``ramp(b, s) + broadcast(x) -> ramp(b + x, s)``,
    ``ramp(b1, s1) - ramp(b2, s2) -> ramp(b1 - b2, s1 - s2)``, ``ramp(b, s) * broadcast(c) ->
    ramp(b*c, s*c)`` (integer lanes only)."""
    a, b, cls = e.a, e.b, type(e)
    if not dt.parse(e.dtype).is_integer:
        return None
    sd = dt.element_of(e.dtype)
    if cls is E.Mul:
        if isinstance(a, E.Broadcast) and isinstance(b, E.Ramp):
            a, b = b, a
        if isinstance(a, E.Ramp) and isinstance(b, E.Broadcast) and a.lanes == b.lanes:
            return E.Ramp(E.Mul(a.base, b.value, sd), E.Mul(a.stride, b.value, sd), a.lanes,
                          e.dtype)
        return None
    if isinstance(a, E.Ramp) and isinstance(b, E.Ramp) and a.lanes == b.lanes:
        return E.Ramp(cls(a.base, b.base, sd), cls(a.stride, b.stride, sd), a.lanes, e.dtype)
    if isinstance(a, E.Ramp) and isinstance(b, E.Broadcast) and a.lanes == b.lanes:
        return E.Ramp(cls(a.base, b.value, sd), a.stride, a.lanes, e.dtype)
    if isinstance(a, E.Broadcast) and isinstance(b, E.Ramp) and a.lanes == b.lanes:
        stride = b.stride if cls is E.Add else E.Sub(E.IntImm(sd, 0), b.stride, sd)
        return E.Ramp(cls(a.value, b.base, sd), stride, a.lanes, e.dtype)
    return None


@rule(E.Ramp)
def ramp_zero_stride(an: "Analyzer", e: E.Ramp):
    """``ramp(b, 0, n) -> broadcast(b, n)``."""
    if isinstance(e.stride, E.IntImm) and e.stride.value == 0:
        return E.Broadcast(e.base, e.lanes, e.dtype)
    return None


VECTOR = RuleSet("vector", (broadcast_lanewise, ramp_arith, ramp_zero_stride))

# The analyzer's default: folding first, then the structural rules.
DEFAULT_RULES = CONST_FOLD + COMPARE + LOGIC + MINMAX + SELECT + CAST + VECTOR
