"""``Analyzer``: what is known about variables, and the simplifier that uses it.

The analyzer holds the context (variable ranges from ``bind``/``update``, substitutions from
``bind(var, expr)``, and facts assumed inside ``constraint_scope``) and answers questions in it:
``simplify``, ``const_int_bound``, ``int_set``, ``can_prove``.

How ``simplify`` works: children first, then by node type (a dispatch table)

- scalar signed-integer ``+ - * // % truncdiv truncmod`` go through the affine canonical form
  (:mod:`.canonical`), which merges like terms and takes divisions apart using bounds;
- every other node gets the named rule sets of :mod:`.rewrite_rules` (constant folding,
  comparisons decided by bounds and facts, logic, min/max, select, casts, vectors);
- ``Select``/``if_then_else`` simplify each branch assuming its condition.

Every result is memoised per context (a fresh memo inside each constraint scope, restored on
exit), so re-simplifying shared or unchanged subtrees costs a dict lookup. Simplification never
changes an expression's dtype or its value for any assignment of variables inside their known
ranges (no overflow is assumed, as in TVM).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping

from workbench.ir import dtype as dt
from workbench.ir.dispatch import TypeTable
from workbench.ir.node import field_names
from workbench.tir import expr as E
from workbench.tir import op
from workbench.tir.arith import const_bound as cb
from workbench.tir.arith.canonical import Canonicalizer, Sum, is_canonical_dtype
from workbench.tir.arith.const_bound import BoundEvaluator, ConstIntBound, Interval
from workbench.tir.arith.expr_key import KeyMaker
from workbench.tir.arith.int_set import IntervalSet, IntSetEvaluator, as_interval_set
from workbench.tir.arith.rewrite_rules import DEFAULT_RULES, RuleSet
from workbench.tir.buffer import Range

_MAX_RULE_DEPTH = 64


class _Memo:
    """Results valid in one context: simplified exprs, canonical forms, constant bounds."""

    __slots__ = ("simp", "canon", "bound")

    def __init__(self) -> None:
        self.simp: dict[E.PrimExpr, E.PrimExpr] = {}
        self.canon: dict[E.PrimExpr, Sum] = {}
        self.bound: dict[E.PrimExpr, Interval] = {}


class Analyzer:
    """Integer arithmetic analysis and simplification (TVM's ``tvm.arith.Analyzer``)."""

    def __init__(self, rules: RuleSet = DEFAULT_RULES):
        self.rules = rules
        self._rule_table = rules.table()
        self._keys = KeyMaker()
        self._canon = Canonicalizer(self)
        self._bound_eval = BoundEvaluator(self._var_bound, self._bound)
        # Persistent knowledge (bind / update).
        self._var_bounds: dict[E.Var, Interval] = {}
        self._subst: dict[E.Var, E.PrimExpr] = {}
        self._range_facts: dict[E.Var, list[tuple[tuple, Interval]]] = {}
        self._base_facts: dict[tuple, Interval] = {}
        # Scoped knowledge (constraint_scope), replaced on entry and restored on exit.
        self._cons_bounds: dict[E.Var, Interval] = {}
        self._facts: dict[tuple, Interval] = {}
        self._truths: dict[tuple, bool] = {}
        self._override: dict[E.Var, Interval] = {}
        self._memo = _Memo()
        self._epoch = 0
        self._seen_unbound: set[E.Var] = set()
        self._depth = 0

    # ---- public API ---------------------------------------------------------------------------

    def bind(self, var: E.Var, value: "Range | E.PrimExpr | int", allow_override: bool = False
             ) -> None:
        """Bind ``var`` to a range (its values lie in ``[min, min + extent)``) or to an expression
        (``var`` is replaced by it when simplifying). Rebinding to something different needs
        ``allow_override=True``."""
        if not isinstance(var, E.Var):
            raise TypeError(f"Analyzer.bind expects a Var, got {var!r}")
        if isinstance(value, Range):
            self._bind_range(var, value, allow_override)
            return
        expr = self.simplify(op.convert(value))
        old = self._subst.get(var)
        if old is not None and self._key(old) != self._key(expr) and not allow_override:
            raise ValueError(f"Analyzer.bind: {var.name} is already bound to {old!r}; pass "
                             "allow_override=True to rebind it")
        self._forget(var)
        self._subst[var] = expr
        if is_canonical_dtype(var.dtype) or dt.parse(var.dtype).is_integer:
            self._var_bounds[var] = self._bound(expr)

    def update(self, var: E.Var, info: ConstIntBound, allow_override: bool = False) -> None:
        """Set the constant bound of ``var`` (TVM's ``analyzer.update``)."""
        new = (info.min_value, info.max_value)
        old = self._var_bounds.get(var)
        if old is not None and old != new and not allow_override:
            raise ValueError(f"Analyzer.update: {var.name} already has bound {old}, not {new}; "
                             "pass allow_override=True to replace it")
        if old != new:
            self._forget(var)
            self._var_bounds[var] = new

    def simplify(self, expr: "E.PrimExpr | int | float") -> E.PrimExpr:
        """An equivalent, simpler expression of the same dtype (see the module docstring)."""
        return self._simplify(op.convert(expr))

    # Our simplifier does both TVM passes at once; the names are kept for ported code.
    def rewrite_simplify(self, expr: "E.PrimExpr | int") -> E.PrimExpr:
        return self.simplify(expr)

    def canonical_simplify(self, expr: "E.PrimExpr | int") -> E.PrimExpr:
        return self.simplify(expr)

    def const_int_bound(self, expr: "E.PrimExpr | int") -> ConstIntBound:
        """Constant bounds of an integer expression; ends may be ``ConstIntBound.POS_INF`` etc."""
        lo, hi = self._bound(op.convert(expr))
        return ConstIntBound(lo, hi)

    def int_set(self, expr: "E.PrimExpr | int",
                dom_map: Mapping[E.Var, "IntervalSet | Range"] | None = None) -> IntervalSet:
        """The interval of values of ``expr`` when each var in ``dom_map`` ranges over its domain
        (default: the vars bound to ranges in this analyzer); other vars stay symbolic."""
        if dom_map is None:
            dom = {v: IntervalSet(E.IntImm(v.dtype, lo), E.IntImm(v.dtype, hi))
                   for v, (lo, hi) in self._var_bounds.items()
                   if v not in self._subst and not cb.is_inf(lo) and not cb.is_inf(hi)}
        else:
            dom = {v: as_interval_set(s) for v, s in dom_map.items()}
        return IntSetEvaluator(self, dom).eval(op.convert(expr))

    def can_prove(self, cond: "E.PrimExpr | bool") -> bool:
        """True when ``cond`` holds for every value of the vars in their known ranges."""
        c = self.simplify(cond)
        return isinstance(c, E.IntImm) and c.value != 0

    def can_prove_equal(self, a: "E.PrimExpr | int", b: "E.PrimExpr | int") -> bool:
        a, b = op.convert(a), op.convert(b)
        if is_canonical_dtype(a.dtype) and a.dtype == b.dtype:
            d = self._canon.add(self._canon.canon(a), self._canon.canon(b), -1)
            return d.is_const and d.const == 0
        return self._key(self.simplify(a)) == self._key(self.simplify(b))

    def can_prove_greater_equal(self, expr: "E.PrimExpr | int", lower_bound: int) -> bool:
        return self.const_int_bound(expr).min_value >= lower_bound

    def can_prove_less(self, expr: "E.PrimExpr | int", upper_bound: int) -> bool:
        return self.const_int_bound(expr).max_value < upper_bound

    @contextmanager
    def constraint_scope(self, cond: "E.PrimExpr | bool") -> Iterator[None]:
        """Inside the ``with`` block, ``cond`` is assumed true (an ``if`` branch, a block
        predicate). Bindings made inside the block stay; the assumption is dropped on exit."""
        c = self.simplify(cond)
        with self._scope():
            self._assume_fresh(c, negate=False)
            yield

    # ---- context and memo -------------------------------------------------------------------

    @contextmanager
    def _scope(self) -> Iterator[None]:
        saved = (self._memo, self._cons_bounds, self._facts, self._truths, self._override,
                 self._epoch)
        self._memo = _Memo()
        self._cons_bounds = dict(self._cons_bounds)
        self._facts = dict(self._facts)
        self._truths = dict(self._truths)
        try:
            yield
        finally:
            memo, self._cons_bounds, self._facts, self._truths, self._override, epoch = saved
            # A rebinding inside the scope invalidated every memo, the saved one included.
            self._memo = memo if epoch == self._epoch else _Memo()

    @contextmanager
    def _negated_scope(self, cond: E.PrimExpr) -> Iterator[None]:
        with self._scope():
            self._assume_fresh(cond, negate=True)
            yield

    @contextmanager
    def _temporary_bounds(self, bounds: dict[E.Var, Interval]) -> Iterator[None]:
        """Pretend ``bounds`` are the vars' bounds (int_set relaxes vars over its own domains)."""
        with self._scope():
            self._override = {**self._override, **bounds}
            yield

    def _forget(self, var: E.Var) -> None:
        """Before (re)binding ``var``: drop what the memo and the facts knew about it."""
        stale = (var in self._seen_unbound or var in self._var_bounds or var in self._subst)
        self._subst.pop(var, None)
        if self._range_facts.pop(var, None) is not None:
            self._rebuild_base_facts()
            stale = True
        if stale:
            self._epoch += 1
            self._memo = _Memo()
            self._seen_unbound = set()

    def _bind_range(self, var: E.Var, r: Range, allow_override: bool) -> None:
        mn, ext = self.simplify(r.min), self.simplify(r.extent)
        if not is_canonical_dtype(mn.dtype) or mn.dtype != ext.dtype:
            lo, hi = self._bound(mn)[0], cb.add_end(self._bound(mn)[1],
                                                    cb.add_end(self._bound(ext)[1], -1))
            facts: list = []
        else:
            smin, sext = self._canon.canon(mn), self._canon.canon(ext)
            last = self._canon.add(smin, sext)
            last = Sum(last.terms, last.const - 1, last.dtype)
            lo, hi = self._canon.bound(smin)[0], self._canon.bound(last)[1]
            facts = []
            if not (smin.is_const and sext.is_const):
                # Symbolic ranges: remember min <= var < min + extent as linear facts.
                sv = self._canon.atom_sum(var)
                facts.append(self._normalize(self._canon.add(sv, smin, -1), (0, cb.POS_INF)))
                facts.append(self._normalize(self._canon.add(sv, last, -1), (cb.NEG_INF, 0)))
        old = self._var_bounds.get(var)
        if old is not None and old != (lo, hi) and not allow_override:
            raise ValueError(f"Analyzer.bind: {var.name} is already bound to {old}, not "
                             f"[{lo}, {hi}]; pass allow_override=True to rebind it")
        self._forget(var)
        self._var_bounds[var] = (lo, hi)
        facts = [f for f in facts if f is not None]
        if facts:
            self._range_facts[var] = facts
            for k, iv in facts:
                self._base_facts[k] = cb.iv_intersect(self._base_facts.get(k, cb.EVERYTHING), iv)

    def _rebuild_base_facts(self) -> None:
        self._base_facts = {}
        for facts in self._range_facts.values():
            for k, iv in facts:
                self._base_facts[k] = cb.iv_intersect(self._base_facts.get(k, cb.EVERYTHING), iv)

    # ---- facts ------------------------------------------------------------------------------

    def _normalize(self, s: Sum, interval: Interval) -> tuple[tuple, Interval] | None:
        """``s in interval`` as ``(linear key, interval of the normalised linear part)``."""
        lk = s.linear_key()
        if lk is None:
            return None
        key, scale = lk
        lo = cb.add_end(interval[0], -s.const) if not cb.is_inf(interval[0]) else interval[0]
        hi = cb.add_end(interval[1], -s.const) if not cb.is_inf(interval[1]) else interval[1]
        if scale < 0:
            lo, hi, scale = cb.neg_end(hi), cb.neg_end(lo), -scale
        lo = lo if cb.is_inf(lo) else -((-lo) // scale)  # ceil
        hi = hi if cb.is_inf(hi) else hi // scale
        return key, (lo, hi)

    _CMP_INTERVAL: dict[type, Interval] = {
        E.LT: (cb.NEG_INF, -1), E.LE: (cb.NEG_INF, 0), E.GT: (1, cb.POS_INF),
        E.GE: (0, cb.POS_INF), E.EQ: (0, 0),
    }
    _CMP_NEGATE: dict[type, type] = {E.LT: E.GE, E.LE: E.GT, E.GT: E.LE, E.GE: E.LT,
                                     E.EQ: E.NE, E.NE: E.EQ}

    def _as_interval(self, cond: E.PrimExpr, negate: bool = False
                     ) -> tuple[tuple, Interval] | None:
        """An integer comparison as ``(linear key, interval)``, or ``None``."""
        if not isinstance(cond, E.CmpOp) or not is_canonical_dtype(cond.a.dtype):
            return None
        cls = self._CMP_NEGATE[type(cond)] if negate else type(cond)
        iv = self._CMP_INTERVAL.get(cls)
        if iv is None:
            return None
        d = self._canon.add(self._canon.canon(cond.a), self._canon.canon(cond.b), -1)
        return self._normalize(d, iv)

    def _assume_fresh(self, cond: E.PrimExpr, negate: bool) -> None:
        """Assume ``cond`` in the current (new) scope; bounds computed while working out the
        facts predate them, so the scope's memo starts over afterwards."""
        self._assume(cond, negate)
        self._memo = _Memo()

    def _assume(self, cond: E.PrimExpr, negate: bool) -> None:
        if isinstance(cond, E.IntImm) or dt.lanes_of(cond.dtype) != 1:
            return  # vector conditions hold lane by lane, never as a whole
        if isinstance(cond, E.Not):
            self._assume(cond.a, not negate)
            return
        if isinstance(cond, E.And if not negate else E.Or):
            self._assume(cond.a, negate)
            self._assume(cond.b, negate)
            return
        self._truths[self._key(cond)] = not negate
        fact = self._as_interval(cond, negate)
        if fact is None:
            return
        key, iv = fact
        iv = cb.iv_intersect(self._facts.get(key, cb.EVERYTHING), iv)
        self._facts[key] = iv
        # A fact on one plain variable also tightens that variable's bound.
        if len(key) == 1:
            (ikey, lower, upper), _ = key[0]
            if lower == 1 and upper == 0 and ikey[0] == "Var":
                var = self._keys.var_of(ikey)
                self._cons_bounds[var] = cb.iv_intersect(
                    self._cons_bounds.get(var, cb.EVERYTHING), iv)

    def _has_facts(self) -> bool:
        return bool(self._facts) or bool(self._base_facts)

    def _fact_interval(self, key: tuple) -> Interval | None:
        a, b = self._facts.get(key), self._base_facts.get(key)
        if a is None:
            return b
        return a if b is None else cb.iv_intersect(a, b)

    def _known_truth(self, e: E.PrimExpr) -> E.PrimExpr | None:
        if not self._truths:
            return None
        v = self._truths.get(self._key(e))
        if v is None and isinstance(e, E.Not):
            v = self._truths.get(self._key(e.a))
            v = None if v is None else not v
        return None if v is None else E.IntImm("bool", int(v))

    # ---- bounds -----------------------------------------------------------------------------

    def _key(self, e: Any) -> tuple:
        return self._keys.key(e)

    def _bound(self, e: E.PrimExpr) -> Interval:
        memo = self._memo.bound
        b = memo.get(e)
        if b is None:
            if isinstance(e, E.Let):
                self._var_bounds.setdefault(e.var, self._bound(e.value))
            b = self._bound_eval(e)
            memo[e] = b
        return b

    def _var_bound(self, v: E.Var) -> Interval:
        o = self._override.get(v)
        if o is not None:
            return o
        b = self._var_bounds.get(v)
        if b is None:
            if v not in self._subst:
                self._seen_unbound.add(v)
            b = cb.dtype_bound(v.dtype)
            if isinstance(v, E.SizeVar):
                b = (0, b[1])
        c = self._cons_bounds.get(v)
        return b if c is None else cb.iv_intersect(b, c)

    def _diff_bound(self, a: E.PrimExpr, b: E.PrimExpr) -> Interval:
        """Bounds of ``a - b`` through the canonical form (so ``x+1`` vs ``x`` is exact)."""
        c = self._canon
        return c.bound(c.add(c.canon(a), c.canon(b), -1))

    # ---- simplification ---------------------------------------------------------------------

    def _simplify(self, e: E.PrimExpr) -> E.PrimExpr:
        memo = self._memo.simp
        r = memo.get(e)
        if r is not None:
            return r
        r = _SIMPLIFY.lookup(type(e))(self, e)
        memo = self._memo.simp
        memo[e] = r
        if r is not e:
            memo.setdefault(r, r)
        return r

    def _simp_leaf(self, e: E.PrimExpr) -> E.PrimExpr:
        return e

    def _simp_var(self, v: E.Var) -> E.PrimExpr:
        s = self._subst.get(v)
        if s is not None:
            return s
        if is_canonical_dtype(v.dtype):
            lo, hi = self._var_bound(v)
            if lo == hi and not cb.is_inf(lo):
                return E.IntImm(v.dtype, lo)  # a one-value range, e.g. a loop of extent 1
        return v

    def _simp_affine(self, e: E.BinaryOp) -> E.PrimExpr:
        if not is_canonical_dtype(e.dtype):
            return self._simp_generic(e)
        out = self._canon.to_expr(self._canon.canon(e))
        if type(out) is type(e) and self._key(out) == self._key(e):
            return e  # already canonical: keep the caller's object
        return out

    def _simp_generic(self, e: E.PrimExpr) -> E.PrimExpr:
        changes = None
        for name in field_names(type(e)):
            v = getattr(e, name)
            if isinstance(v, E.PrimExpr):
                nv = self._simplify(v)
            elif isinstance(v, tuple) and v and isinstance(v[0], E.PrimExpr):
                nv = tuple(self._simplify(x) for x in v)
                if all(a is b for a, b in zip(nv, v)):
                    continue
            else:
                continue
            if nv is not v:
                if changes is None:
                    changes = {}
                changes[name] = nv
        if changes is not None:
            e = e.replace(**changes)
        return self._apply_rules(e)

    def _apply_rules(self, e: E.PrimExpr) -> E.PrimExpr:
        for r in self._rule_table.get(type(e), ()):
            out = r.fn(self, e)
            if out is not None and out is not e:
                if self._depth >= _MAX_RULE_DEPTH:
                    return out
                self._depth += 1
                try:
                    return self._simplify(out)
                finally:
                    self._depth -= 1
        return e

    def _simp_select(self, e: E.PrimExpr) -> E.PrimExpr:
        """Select / if_then_else: each branch is simplified assuming its condition."""
        is_call = isinstance(e, E.Call)
        if is_call and e.op != "if_then_else":
            return self._simp_generic(e)
        cond, t, f = e.args if is_call else (e.condition, e.true_value, e.false_value)
        c = self._simplify(cond)
        if isinstance(c, E.IntImm) and dt.lanes_of(e.dtype) == 1:
            return self._simplify(t if c.value else f)
        with self._scope():
            self._assume_fresh(c, negate=False)
            nt = self._simplify(t)
        with self._negated_scope(c):
            nf = self._simplify(f)
        if c is cond and nt is t and nf is f:
            return self._apply_rules(e)
        if is_call:
            return self._apply_rules(e.replace(args=(c, nt, nf)))
        return self._apply_rules(e.replace(condition=c, true_value=nt, false_value=nf))

    def _simp_let(self, e: E.Let) -> E.PrimExpr:
        value = self._simplify(e.value)
        if isinstance(value, (E.IntImm, E.FloatImm, E.Var)):
            self.bind(e.var, value, allow_override=True)  # cheap to inline: substitute it
            return self._simplify(e.body)
        if dt.parse(value.dtype).is_integer:
            self.update(e.var, self.const_int_bound(value), allow_override=True)
        body = self._simplify(e.body)
        return e.replace(value=value, body=body)


# Node type -> simplifier method; subclasses resolve along the MRO on first use, types
# without one get the generic simplifier.
_SIMPLIFY: TypeTable[Callable[[Analyzer, Any], E.PrimExpr]] = TypeTable({
    E.IntImm: Analyzer._simp_leaf, E.FloatImm: Analyzer._simp_leaf,
    E.StringImm: Analyzer._simp_leaf, E.Reduce: Analyzer._simp_leaf,
    E.Var: Analyzer._simp_var,
    E.Add: Analyzer._simp_affine, E.Sub: Analyzer._simp_affine, E.Mul: Analyzer._simp_affine,
    E.FloorDiv: Analyzer._simp_affine, E.FloorMod: Analyzer._simp_affine,
    E.Div: Analyzer._simp_affine, E.Mod: Analyzer._simp_affine,
    E.Select: Analyzer._simp_select, E.Call: Analyzer._simp_select,
    E.Let: Analyzer._simp_let,
}, default=Analyzer._simp_generic)
