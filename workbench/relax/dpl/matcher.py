"""Matching dataflow patterns against Relax expressions (TVM's ``DFPatternMatcher``).

Contract: ``extract_matched_expr(pattern, expr, var2val)`` returns ``{sub-pattern: expr}`` for
every sub-pattern that took part in a successful match, or None. Semantics follow TVM's:

- Before a sub-pattern is tried, the expression is *unwrapped*: a variable found in
  ``var2val`` stands for its bound value (repeatedly), and a SeqExpr without blocks for its
  body. So ``wildcard()`` matching the argument ``lv`` records lv's bound call, and a call
  pattern follows its arguments into their bindings.
- A sub-pattern object that already matched must match the very same expression again (the
  memo), which is how one pattern used twice ties two places together. A failed alternative
  (``|``, a commuted ``add``/``multiply``) rolls back what it recorded.
- ``R.add`` and ``R.multiply`` calls also match with their two arguments swapped.
- ``has_dtype`` / ``has_shape`` look at the struct info of the expression itself (a variable's
  struct info is its value's).

Not supported (TVM has them for its rewriter): used-by constraints between patterns,
struct-info patterns with symbolic conditions, and the associative multiply/divide rewrites.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from workbench.ir.dispatch import TypeTable
from workbench.ir.module import GlobalVar
from workbench.ir.structural import structural_equal
from workbench.relax.dpl.pattern import (
    AndPattern, AttrPattern, CallPattern, ConstantPattern, DataflowVarPattern, DataTypePattern,
    DFPattern, ExprPattern, ExternFuncPattern, GlobalVarPattern, NotPattern, OrPattern,
    PrimArrPattern, ShapePattern, TupleGetItemPattern, TuplePattern, UnorderedTuplePattern,
    VarPattern, WildcardPattern,
)
from workbench.relax.expr import (
    Call, Constant, DataflowVar, Expr, ExternFunc, Function, Op, SeqExpr, ShapeExpr, Tuple,
    TupleGetItem, Var,
)
from workbench.relax.struct_info import TensorStructInfo, as_dims

_COMMUTATIVE = frozenset({"relax.add", "relax.multiply"})


class DFPatternMatcher:
    """One match at a time: ``matcher.match(pattern, expr)``; ``memo`` holds what matched."""

    def __init__(self, var2val: Optional[Mapping[Any, Expr]] = None):
        self.var2val = dict(var2val or {})
        self.memo: dict[DFPattern, Expr] = {}
        self._order: list[DFPattern] = []  # memo keys in the order they matched (rollback)
        self._analyzer = None

    def match(self, pattern: DFPattern, expr: Expr) -> bool:
        self.memo.clear()
        self._order.clear()
        return self.visit(pattern, expr)

    # ---- the core -------------------------------------------------------------------------------

    def unwrap(self, expr: Any) -> Any:
        while True:
            if isinstance(expr, Var) and expr in self.var2val:
                expr = self.var2val[expr]
            elif isinstance(expr, SeqExpr) and not expr.blocks:
                expr = expr.body
            else:
                return expr

    def visit(self, pattern: DFPattern, expr0: Any) -> bool:
        if not isinstance(pattern, DFPattern):
            raise TypeError(f"pattern matching: expected a DFPattern, got {pattern!r}")
        expr = self.unwrap(expr0)
        if pattern in self.memo:
            return self.memo[pattern] is expr
        watermark = len(self._order)
        rule = _RULES.lookup(type(pattern))
        if rule is None:
            raise TypeError(f"pattern matching: no rule for {type(pattern).__name__}")
        if rule(self, pattern, expr):
            self.memo[pattern] = expr
            self._order.append(pattern)
            return True
        self.rollback(watermark)
        return False

    def rollback(self, watermark: int) -> None:
        for p in self._order[watermark:]:
            self.memo.pop(p, None)
        del self._order[watermark:]

    @property
    def analyzer(self) -> Any:
        if self._analyzer is None:
            from workbench.tir.arith.analyzer import Analyzer
            self._analyzer = Analyzer()
        return self._analyzer

    def dims_equal(self, want: tuple, have: tuple) -> bool:
        if len(want) != len(have):
            return False
        # Shapes hold int64 dims; a pattern's Python ints become int64 too, so that the
        # analyzer compares like with like.
        want, have = as_dims(want, "has_shape"), as_dims(have, "shape")
        return all(self.analyzer.can_prove_equal(a, b) for a, b in zip(want, have))


# ---- one rule per pattern kind ------------------------------------------------------------------

def _call(m: DFPatternMatcher, p: CallPattern, e: Any) -> bool:
    if not isinstance(e, Call) or not m.visit(p.op, e.op):
        return False
    n_pat, n_arg = len(p.args), len(e.args)
    if (n_arg < n_pat) if p.varg_default_wildcard else (n_arg != n_pat):
        return False
    orders = [e.args]
    if isinstance(e.op, Op) and e.op.name in _COMMUTATIVE:
        orders.append(tuple(reversed(e.args)))
    for args in orders:
        watermark = len(m._order)
        if all(m.visit(pa, a) for pa, a in zip(p.args, args)):
            return True
        m.rollback(watermark)
    return False


def _expr(m: DFPatternMatcher, p: ExprPattern, e: Any) -> bool:
    if isinstance(p.expr, Op):
        return isinstance(e, Op) and e.name == p.expr.name
    return p.expr is e or structural_equal(p.expr, e)


def _var(m: DFPatternMatcher, p: VarPattern, e: Any) -> bool:
    return isinstance(e, Var) and p.name_hint in ("", e.name_hint)


def _dataflow_var(m: DFPatternMatcher, p: DataflowVarPattern, e: Any) -> bool:
    return isinstance(e, DataflowVar) and p.name_hint in ("", e.name_hint)


def _global_var(m: DFPatternMatcher, p: GlobalVarPattern, e: Any) -> bool:
    return isinstance(e, GlobalVar) and p.name_hint in e.name_hint


def _extern_func(m: DFPatternMatcher, p: ExternFuncPattern, e: Any) -> bool:
    return isinstance(e, ExternFunc) and p.global_symbol in ("", e.global_symbol)


def _tuple(m: DFPatternMatcher, p: TuplePattern, e: Any) -> bool:
    return isinstance(e, Tuple) and len(e.fields) == len(p.fields) and \
        all(m.visit(pf, f) for pf, f in zip(p.fields, e.fields))


def _unordered_tuple(m: DFPatternMatcher, p: UnorderedTuplePattern, e: Any) -> bool:
    if not isinstance(e, Tuple) or len(e.fields) != len(p.fields):
        return False

    def assign(k: int, used: frozenset[int]) -> bool:
        if k == len(p.fields):
            return True
        for i, f in enumerate(e.fields):
            if i in used:
                continue
            watermark = len(m._order)
            if m.visit(p.fields[k], f) and assign(k + 1, used | {i}):
                return True
            m.rollback(watermark)
        return False
    return assign(0, frozenset())


def _tuple_get_item(m: DFPatternMatcher, p: TupleGetItemPattern, e: Any) -> bool:
    return isinstance(e, TupleGetItem) and p.index in (-1, e.index) and \
        m.visit(p.tuple_value, e.tuple_value)


def _or(m: DFPatternMatcher, p: OrPattern, e: Any) -> bool:
    return m.visit(p.left, e) or m.visit(p.right, e)


def _and(m: DFPatternMatcher, p: AndPattern, e: Any) -> bool:
    return m.visit(p.left, e) and m.visit(p.right, e)


def _not(m: DFPatternMatcher, p: NotPattern, e: Any) -> bool:
    watermark = len(m._order)
    matched = m.visit(p.reject, e)
    m.rollback(watermark)  # what the rejected pattern matched is not part of the match
    return not matched


def _dtype(m: DFPatternMatcher, p: DataTypePattern, e: Any) -> bool:
    si = getattr(e, "struct_info", None)
    return isinstance(si, TensorStructInfo) and si.dtype == p.dtype and m.visit(p.pattern, e)


def _shape(m: DFPatternMatcher, p: ShapePattern, e: Any) -> bool:
    si = getattr(e, "struct_info", None)
    if not isinstance(si, TensorStructInfo) or si.shape is None:
        return False
    return m.dims_equal(tuple(p.shape), tuple(si.shape)) and m.visit(p.pattern, e)


def _prim_arr(m: DFPatternMatcher, p: PrimArrPattern, e: Any) -> bool:
    return isinstance(e, ShapeExpr) and m.dims_equal(tuple(p.fields), tuple(e.values))


def _attr(m: DFPatternMatcher, p: AttrPattern, e: Any) -> bool:
    if not m.visit(p.pattern, e):
        return False
    if isinstance(e, (Call, Function)):
        have = e.attrs
    else:
        return False  # TVM also reads per-op attribute maps; Workbench ops have none
    return all(k in have and _attr_equal(v, have[k]) for k, v in p.attrs.items())


def _attr_equal(want: Any, have: Any) -> bool:
    if isinstance(want, (list, tuple)) and isinstance(have, (list, tuple)):
        return len(want) == len(have) and all(_attr_equal(a, b) for a, b in zip(want, have))
    if hasattr(have, "value") and not hasattr(want, "value"):
        have = have.value  # an IntImm / StringImm attribute against a Python value
    return want == have or structural_equal(want, have)


_RULES: TypeTable[Callable[[DFPatternMatcher, Any, Any], bool]] = TypeTable({
    CallPattern: _call,
    ExprPattern: _expr,
    VarPattern: _var,
    DataflowVarPattern: _dataflow_var,
    GlobalVarPattern: _global_var,
    ExternFuncPattern: _extern_func,
    ConstantPattern: lambda m, p, e: isinstance(e, Constant),
    WildcardPattern: lambda m, p, e: True,
    TuplePattern: _tuple,
    UnorderedTuplePattern: _unordered_tuple,
    TupleGetItemPattern: _tuple_get_item,
    OrPattern: _or,
    AndPattern: _and,
    NotPattern: _not,
    DataTypePattern: _dtype,
    ShapePattern: _shape,
    PrimArrPattern: _prim_arr,
    AttrPattern: _attr,
})


def extract_matched_expr(pattern: DFPattern, expr: Expr,
                         var2val: Optional[Mapping[Any, Expr]] = None
                         ) -> Optional[dict[DFPattern, Expr]]:
    """``{sub-pattern: matched expression}`` when ``expr`` matches ``pattern``, else None
    (TVM's ``extract_matched_expr``; see the module docstring for the rules)."""
    if not isinstance(pattern, DFPattern):
        raise TypeError(f"extract_matched_expr: expected a DFPattern, got "
                        f"{type(pattern).__name__}")
    if var2val is not None and not isinstance(var2val, Mapping):
        raise TypeError(f"extract_matched_expr: var2val must map Vars to Exprs, got "
                        f"{type(var2val).__name__}")
    matcher = DFPatternMatcher(var2val)
    if not matcher.match(pattern, expr):
        return None
    return dict(matcher.memo)


def match_expr(pattern: DFPattern, expr: Expr,
               var2val: Optional[Mapping[Any, Expr]] = None) -> bool:
    """Whether ``expr`` matches ``pattern`` (TVM's ``match_expr``)."""
    return extract_matched_expr(pattern, expr, var2val) is not None


__all__ = ["DFPatternMatcher", "extract_matched_expr", "match_expr"]
