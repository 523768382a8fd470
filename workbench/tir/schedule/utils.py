"""Helpers shared by the primitives: binding simplification and loop-nest queries."""
from __future__ import annotations

from typing import Any

from workbench.tir import op
from workbench.tir.analysis.blocks import blocks_under, realizes_under  # noqa: F401 (re-exported)
from workbench.tir.arith import Analyzer
from workbench.tir.buffer import Range
from workbench.tir.expr import Add, IntImm, Mul, PrimExpr, Sub, Var
from workbench.tir.functor import IRMutator, IRVisitor
from workbench.tir.stmt import (
    Block, BlockRealize, BufferStore, Evaluate, For, IterType, Stmt,
)


class _SimplifyBindings(IRMutator):
    """Simplify block bindings and predicates knowing the ranges of the loops around them."""

    def __init__(self, analyzer: Analyzer, changed: frozenset | None = None) -> None:
        super().__init__()
        self.analyzer = analyzer
        # When given, only expressions that use one of these vars are re-simplified: the
        # others did not change, and their simplification does not depend on the new loops.
        self.changed = changed

    def _simplify(self, e: PrimExpr) -> PrimExpr:
        if self.changed is not None and not _uses_any(e, self.changed):
            return e
        return self.analyzer.simplify(e)

    def visit_For(self, loop: For) -> Stmt:
        self.analyzer.bind(loop.loop_var, Range(loop.min, loop.extent))
        return loop.replace(body=self.visit(loop.body))

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        values = tuple(self._simplify(v) for v in realize.iter_values)
        if all(a is b for a, b in zip(values, realize.iter_values)):
            values = realize.iter_values
        pred = self._simplify(realize.predicate)
        block = self.visit(realize.block)
        return realize.replace(iter_values=values, predicate=pred, block=block)

    def visit_Block(self, block: Block) -> Stmt:
        # Inner blocks have their own iteration space; bind it for nested realizes. Only the
        # statements can hold realizes: regions, buffers and annotations are kept as they are.
        for iv in block.iter_vars:
            self.analyzer.bind(iv.var, iv.dom)
        body = self.visit(block.body)
        init = None if block.init is None else self.visit(block.init)
        if body is block.body and init is block.init:
            return block
        return block.replace(body=body, init=init)

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        return store  # no realize below a store

    def visit_Evaluate(self, stmt: Evaluate) -> Stmt:
        return stmt


def simplify_bindings(stmt: Stmt, outer_loops: list[For],
                      changed_vars: Any = None) -> Stmt:
    """``stmt`` with block bindings/predicates simplified under ``outer_loops``' ranges.

    ``changed_vars`` (optional): only bindings/predicates that use one of these vars are
    simplified (the ones a primitive just rewrote); the rest are left as they are."""
    ana = Analyzer()
    for loop in outer_loops:
        ana.bind(loop.loop_var, Range(loop.min, loop.extent))
    changed = frozenset(changed_vars) if changed_vars is not None else None
    return _SimplifyBindings(ana, changed).visit(stmt)


class _UsesAny(IRVisitor):
    def __init__(self, vars_: frozenset) -> None:
        super().__init__()
        self.vars = vars_
        self.hit = False

    def visit(self, node: Any) -> Any:
        if self.hit:
            return None
        return super().visit(node)

    def visit_Var(self, v: Var) -> None:
        if v in self.vars:
            self.hit = True


def _uses_any(expr: Any, vars_: frozenset) -> bool:
    if isinstance(expr, Var):
        return expr in vars_
    if isinstance(expr, IntImm):
        return False
    v = _UsesAny(vars_)
    v.visit(expr)
    return v.hit


class _UsesVar(IRVisitor):
    def __init__(self, var: Var) -> None:
        self.var = var
        self.hit = False

    def visit_Var(self, v: Var) -> None:
        if v is self.var:
            self.hit = True


def uses_var(expr: Any, var: Var) -> bool:
    v = _UsesVar(var)
    v.visit(expr)
    return v.hit


def loop_binds_reduction(loop: For) -> bool:
    """True if the loop variable feeds a reduction (or opaque) iter var of a block below it."""
    for r in realizes_under(loop.body):
        for iv, value in zip(r.block.iter_vars, r.iter_values):
            if iv.iter_type != IterType.DATA_PAR and uses_var(value, loop.loop_var):
                return True
    return False


def and_predicate(pred: PrimExpr, extra: PrimExpr) -> PrimExpr:
    return op.logical_and(pred, extra)


def unique_name(base: str, taken: set[str]) -> str:
    """``base``, or ``base_1``, ``base_2``... when taken (our block names must be unique)."""
    if base not in taken:
        return base
    k = 1
    while f"{base}_{k}" in taken:
        k += 1
    return f"{base}_{k}"


def linear_form(e: PrimExpr) -> tuple[dict[Var, int], int] | None:
    """``e`` as ``sum(c_v * v) + c`` with integer constants (``({v: c_v}, c)``), or None."""
    if isinstance(e, IntImm):
        return {}, e.value
    if isinstance(e, Var):
        return {e: 1}, 0
    if isinstance(e, (Add, Sub)):
        a, b = linear_form(e.a), linear_form(e.b)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e, Add) else -1
        coef = dict(a[0])
        for v, c in b[0].items():
            coef[v] = coef.get(v, 0) + sign * c
        return {v: c for v, c in coef.items() if c}, a[1] + sign * b[1]
    if isinstance(e, Mul):
        for x, k in ((e.a, e.b), (e.b, e.a)):
            if isinstance(k, IntImm):
                inner = linear_form(x)
                if inner is None:
                    return None
                return {v: c * k.value for v, c in inner[0].items() if c * k.value}, \
                    inner[1] * k.value
    return None
