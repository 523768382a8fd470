"""Interval sets: the values an expression takes when some variables range over domains.

``IntervalSet(min_value, max_value)`` is a closed interval whose ends are expressions (symbolic
ends are allowed: relaxing ``j`` in ``i*4 + j`` over [0, 4) gives ``[i*4, i*4 + 3]``), or the
markers :data:`POS_INF` / :data:`NEG_INF` for an unbounded end. Region analysis uses this to
find which part of a buffer a loop nest touches.

The evaluator follows TVM's IntervalSetEvaluator: interval arithmetic node by node, with
monotone cases handled exactly and everything else falling back to constant bounds.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping

from workbench.ir import dtype as dt
from workbench.ir.dispatch import TypeTable
from workbench.tir import expr as E
from workbench.tir.arith import const_bound as cb
from workbench.tir.buffer import Range

if TYPE_CHECKING:  # pragma: no cover
    from workbench.tir.arith.analyzer import Analyzer

# Markers for unbounded ends (TVM's SymbolicLimits::pos_inf_/neg_inf_): never bound, never
# used in arithmetic, only compared by identity.
POS_INF = E.Var("pos_inf", "int64")
NEG_INF = E.Var("neg_inf", "int64")


@dataclass(frozen=True, eq=False)
class IntervalSet:
    """``[min_value, max_value]`` (both inclusive); ends are PrimExprs or the infinity markers."""

    min_value: E.PrimExpr
    max_value: E.PrimExpr

    @staticmethod
    def everything() -> "IntervalSet":
        return IntervalSet(NEG_INF, POS_INF)

    @staticmethod
    def single_point(value: E.PrimExpr) -> "IntervalSet":
        return IntervalSet(value, value)

    @staticmethod
    def from_range(r: Range) -> "IntervalSet":
        """``[min, min + extent - 1]``."""
        from workbench.tir import op
        return IntervalSet(r.min, op.sub(op.add(r.min, r.extent), 1))

    def is_everything(self) -> bool:
        return self.min_value is NEG_INF and self.max_value is POS_INF

    def is_single_point(self) -> bool:
        lo, hi = self.min_value, self.max_value
        # Equal constants are one point even when they are two objects (a relaxed unit
        # dimension gives [0, 0] from separate IntImms, e.g. after transform_layout).
        return lo is hi or (isinstance(lo, E.IntImm) and isinstance(hi, E.IntImm)
                            and lo.value == hi.value and lo.dtype == hi.dtype)

    def has_lower_bound(self) -> bool:
        return self.min_value is not NEG_INF

    def has_upper_bound(self) -> bool:
        return self.max_value is not POS_INF

    def __repr__(self) -> str:
        def show(v: E.PrimExpr) -> str:
            return "+inf" if v is POS_INF else "-inf" if v is NEG_INF else _short(v)
        return f"IntervalSet[{show(self.min_value)}, {show(self.max_value)}]"


def _short(e: E.PrimExpr) -> str:
    if isinstance(e, (E.IntImm, E.FloatImm)):
        return str(e.value)
    if isinstance(e, E.Var):
        return e.name
    return repr(e)


DomMap = Mapping[E.Var, "IntervalSet | Range"]


class IntSetEvaluator:
    """Evaluates ``int_set(expr)`` with ``dom`` relaxing some variables; ``an`` simplifies the
    symbolic ends (in the analyzer's current context)."""

    def __init__(self, an: "Analyzer", dom: dict[E.Var, IntervalSet]):
        self.an = an
        self.dom = dom
        self._memo: dict[E.PrimExpr, IntervalSet] = {}
        self._uses: dict[E.PrimExpr, bool] = {}

    def eval(self, e: E.PrimExpr) -> IntervalSet:
        got = self._memo.get(e)
        if got is None:
            got = self._eval(e)
            self._memo[e] = got
        return got

    def _eval(self, e: E.PrimExpr) -> IntervalSet:
        if not self._uses_dom(e):
            return IntervalSet.single_point(self.an.simplify(e))
        h = _HANDLERS.lookup(type(e))
        out = h(self, e) if h is not None else None
        return out if out is not None else self._fallback(e)

    def _uses_dom(self, e: E.PrimExpr) -> bool:
        got = self._uses.get(e)
        if got is None:
            if isinstance(e, E.Var):
                got = e in self.dom
            else:
                got = any(self._uses_dom(c) for c in E.expr_children(e))
            self._uses[e] = got
        return got

    def _fallback(self, e: E.PrimExpr) -> IntervalSet:
        """Constant bounds with each relaxed variable bounded by its domain's constant ends."""
        if not dt.parse(e.dtype).is_integer:
            return IntervalSet.everything()
        an = self.an
        with an._temporary_bounds({v: self._const_ends(s) for v, s in self.dom.items()}):
            lo, hi = an._bound(e)
        return IntervalSet(NEG_INF if lo <= cb.NEG_INF else E.IntImm(e.dtype, lo),
                           POS_INF if hi >= cb.POS_INF else E.IntImm(e.dtype, hi))

    def _const_ends(self, s: IntervalSet) -> cb.Interval:
        lo = cb.NEG_INF if s.min_value is NEG_INF else self.an._bound(s.min_value)[0]
        hi = cb.POS_INF if s.max_value is POS_INF else self.an._bound(s.max_value)[1]
        return lo, hi

    # ---- helpers on ends -------------------------------------------------------------------

    def simp(self, e: E.PrimExpr) -> E.PrimExpr:
        return e if e is POS_INF or e is NEG_INF else self.an.simplify(e)

    def sign(self, e: E.PrimExpr) -> int:
        """1 / -1 when ``e`` is provably positive / negative, else 0."""
        lo, hi = self.an._bound(e)
        return 1 if lo > 0 else -1 if hi < 0 else 0


def _end_op(fn: Callable[[E.PrimExpr, E.PrimExpr], E.PrimExpr]):
    """Lift an arithmetic op to interval ends: an infinite end absorbs the other."""
    def f(a: E.PrimExpr, b: E.PrimExpr) -> E.PrimExpr:
        if a is POS_INF or a is NEG_INF:
            return a
        if b is POS_INF or b is NEG_INF:
            return b
        return fn(a, b)
    return f


def _neg_end(a: E.PrimExpr) -> E.PrimExpr:
    if a is POS_INF:
        return NEG_INF
    if a is NEG_INF:
        return POS_INF
    return E.Sub(E.IntImm(a.dtype, 0), a, a.dtype)


def _add(ev: IntSetEvaluator, e: E.Add) -> IntervalSet:
    a, b = ev.eval(e.a), ev.eval(e.b)
    add = _end_op(lambda x, y: E.Add(x, y, e.dtype))
    return IntervalSet(ev.simp(add(a.min_value, b.min_value)),
                       ev.simp(add(a.max_value, b.max_value)))


def _sub(ev: IntSetEvaluator, e: E.Sub) -> IntervalSet:
    a, b = ev.eval(e.a), ev.eval(e.b)
    add = _end_op(lambda x, y: E.Add(x, y, e.dtype))
    return IntervalSet(ev.simp(add(a.min_value, _neg_end(b.max_value))),
                       ev.simp(add(a.max_value, _neg_end(b.min_value))))


def _scale(ev: IntSetEvaluator, s: IntervalSet, k: E.PrimExpr, sign: int,
           cls: type, dtype: str) -> IntervalSet:
    """``s op k`` for a point ``k`` of known sign, with op monotone in s (mul / div)."""
    def apply(x: E.PrimExpr) -> E.PrimExpr:
        if _is_inf(x):
            return x if sign > 0 else _neg_end(x)
        return cls(x, k, dtype)

    lo, hi = apply(s.min_value), apply(s.max_value)
    if sign < 0:
        lo, hi = hi, lo
    return IntervalSet(ev.simp(lo), ev.simp(hi))


def _is_inf(x: E.PrimExpr) -> bool:
    return x is POS_INF or x is NEG_INF


def _mul(ev: IntSetEvaluator, e: E.Mul) -> IntervalSet | None:
    a, b = ev.eval(e.a), ev.eval(e.b)
    if b.is_single_point() and (s := ev.sign(b.min_value)) != 0:
        return _scale(ev, a, b.min_value, s, E.Mul, e.dtype)
    if a.is_single_point() and (s := ev.sign(a.min_value)) != 0:
        return _scale(ev, b, a.min_value, s, E.Mul, e.dtype)
    return None


def _div(ev: IntSetEvaluator, e: E.BinaryOp) -> IntervalSet | None:
    # floordiv and truncdiv are both monotone in the dividend for a divisor of fixed sign
    a, b = ev.eval(e.a), ev.eval(e.b)
    if b.is_single_point() and (s := ev.sign(b.min_value)) != 0:
        return _scale(ev, a, b.min_value, s, type(e), e.dtype)
    return None


def _floormod(ev: IntSetEvaluator, e: E.FloorMod) -> IntervalSet | None:
    a, b = ev.eval(e.a), ev.eval(e.b)
    if not b.is_single_point() or ev.sign(b.min_value) <= 0:
        return None
    c = b.min_value
    if a.min_value is not NEG_INF and a.max_value is not POS_INF:
        # The whole interval inside one period: shift it down by that period.
        qlo = ev.an.simplify(E.FloorDiv(a.min_value, c, e.dtype))
        qhi = ev.an.simplify(E.FloorDiv(a.max_value, c, e.dtype))
        if ev.an.can_prove_equal(qlo, qhi):
            off = E.Mul(qlo, c, e.dtype)
            return IntervalSet(ev.simp(E.Sub(a.min_value, off, e.dtype)),
                               ev.simp(E.Sub(a.max_value, off, e.dtype)))
    return IntervalSet(E.IntImm(e.dtype, 0), ev.simp(E.Sub(c, E.IntImm(e.dtype, 1), e.dtype)))


def _minmax(ev: IntSetEvaluator, e: E.BinaryOp) -> IntervalSet:
    a, b = ev.eval(e.a), ev.eval(e.b)
    cls = type(e)

    def pick(x: E.PrimExpr, y: E.PrimExpr) -> E.PrimExpr:
        # Min: -inf absorbs, +inf is neutral; Max the other way round.
        absorbing, neutral = (NEG_INF, POS_INF) if cls is E.Min else (POS_INF, NEG_INF)
        if x is absorbing or y is absorbing:
            return absorbing
        if x is neutral:
            return y
        if y is neutral:
            return x
        return ev.simp(cls(x, y, e.dtype))

    return IntervalSet(pick(a.min_value, b.min_value), pick(a.max_value, b.max_value))


def _select(ev: IntSetEvaluator, e: E.PrimExpr) -> IntervalSet:
    t, f = (e.true_value, e.false_value) if isinstance(e, E.Select) else e.args[1:]
    return union(ev, ev.eval(t), ev.eval(f), e.dtype)


def _call(ev: IntSetEvaluator, e: E.Call) -> IntervalSet | None:
    return _select(ev, e) if e.op == "if_then_else" else None


def _var(ev: IntSetEvaluator, e: E.Var) -> IntervalSet:
    return ev.dom[e]


def union(ev: IntSetEvaluator, a: IntervalSet, b: IntervalSet, dtype: str) -> IntervalSet:
    lo = NEG_INF if a.min_value is NEG_INF or b.min_value is NEG_INF else \
        ev.simp(E.Min(a.min_value, b.min_value, dtype))
    hi = POS_INF if a.max_value is POS_INF or b.max_value is POS_INF else \
        ev.simp(E.Max(a.max_value, b.max_value, dtype))
    return IntervalSet(lo, hi)


_HANDLERS: TypeTable[Callable[[IntSetEvaluator, E.PrimExpr], IntervalSet | None]] = TypeTable({
    E.Var: _var, E.Add: _add, E.Sub: _sub, E.Mul: _mul, E.FloorDiv: _div, E.Div: _div,
    E.FloorMod: _floormod, E.Min: _minmax, E.Max: _minmax, E.Select: _select, E.Call: _call,
})


def as_interval_set(value: "IntervalSet | Range") -> IntervalSet:
    if isinstance(value, IntervalSet):
        return value
    if isinstance(value, Range):
        return IntervalSet.from_range(value)
    raise TypeError(f"a domain must be an IntervalSet or a Range, got {value!r}")
