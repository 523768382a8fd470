"""Simplify: simplify every expression in a statement with what its context knows.

Contract: the result computes the same thing as the input. Walking down, the pass tells one
:class:`~workbench.tir.arith.Analyzer` what holds at each point:

- ``For``: the loop variable lies in ``[min, min + extent)``;
- ``BlockRealize``/``Block``: each block iteration variable lies in its domain, and the block
  predicate holds inside the block;
- ``LetStmt``: a constant or variable value is substituted (the let disappears when its
  variable is no longer used); any other integer value bounds the variable;
- ``IfThenElse``/``AssertStmt``: the condition holds in the then-branch / after the assert,
  and fails in the else-branch (only for conditions that read no buffers: a store in the
  branch could change what a load reads).

An ``IfThenElse`` whose condition is decided is replaced by the branch taken (``Evaluate(0)``
when nothing is left). Loops of extent 1 stay (``RemoveUnitLoops`` is another pass's job), but
their variable folds to its single value inside. Buffer definitions are left alone. When
nothing changes, the very same object is returned.
"""
from __future__ import annotations

from contextlib import nullcontext
from typing import Any

from workbench.ir.module import IRModule
from workbench.tir import expr as E
from workbench.tir import stmt as S
from workbench.tir.arith import Analyzer
from workbench.tir.buffer import Buffer, Range
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, IRVisitor


class _Simplifier(IRMutator):
    def __init__(self, analyzer: Analyzer):
        super().__init__()
        self.an = analyzer
        self._pure: dict[E.PrimExpr, bool] = {}

    # Every expression reached generically (indices, values, regions, extents) is simplified.
    def visit_PrimExpr(self, e: E.PrimExpr) -> E.PrimExpr:
        return self.an.simplify(e)

    def visit_Buffer(self, buf: Buffer) -> Buffer:
        return buf  # a buffer's shape is defined once, outside any loop's context

    def visit_IterVar(self, iv: S.IterVar) -> S.IterVar:
        return iv.replace(dom=self.visit(iv.dom))

    def visit_For(self, s: S.For) -> S.Stmt:
        mn, ext = self.an.simplify(s.min), self.an.simplify(s.extent)
        self.an.bind(s.loop_var, Range(mn, ext), allow_override=True)
        return s.replace(min=mn, extent=ext, body=self.visit(s.body))

    def visit_BlockRealize(self, s: S.BlockRealize) -> S.Stmt:
        values = self.visit_field(s.iter_values)
        pred = self.an.simplify(s.predicate)
        with self._assuming(pred):
            block = self.visit(s.block)
        return s.replace(iter_values=values, predicate=pred, block=block)

    def visit_Block(self, b: S.Block) -> S.Stmt:
        iter_vars = tuple(self.visit_IterVar(iv) for iv in b.iter_vars)
        if all(x is y for x, y in zip(iter_vars, b.iter_vars)):
            iter_vars = b.iter_vars
        for iv in iter_vars:
            self.an.bind(iv.var, iv.dom, allow_override=True)
        return b.replace(
            iter_vars=iter_vars,
            reads=self.visit_field(b.reads), writes=self.visit_field(b.writes),
            match_buffers=self.visit_field(b.match_buffers),
            init=None if b.init is None else self.visit(b.init),
            body=self.visit(b.body))

    def visit_LetStmt(self, s: S.LetStmt) -> S.Stmt:
        value = self.an.simplify(s.value)
        if isinstance(value, (E.IntImm, E.FloatImm, E.Var)):
            self.an.bind(s.var, value, allow_override=True)
            body = self.visit(s.body)
            if not _uses(body, s.var):
                return body
            return s.replace(value=value, body=body)
        if value.dtype.startswith("int"):
            self.an.update(s.var, self.an.const_int_bound(value), allow_override=True)
        return s.replace(value=value, body=self.visit(s.body))

    def visit_IfThenElse(self, s: S.IfThenElse) -> S.Stmt:
        cond = self.an.simplify(s.condition)
        if isinstance(cond, E.IntImm):
            if cond.value:
                return self.visit(s.then_case)
            return self.visit(s.else_case) if s.else_case is not None else S.Evaluate(
                E.IntImm("int32", 0))
        with self._assuming(cond):
            then_case = self.visit(s.then_case)
        else_case = s.else_case
        if else_case is not None:
            with self._assuming(cond, negate=True):
                else_case = self.visit(else_case)
        return s.replace(condition=cond, then_case=then_case, else_case=else_case)

    def visit_AssertStmt(self, s: S.AssertStmt) -> S.Stmt:
        cond = self.an.simplify(s.condition)
        with self._assuming(cond):
            body = self.visit(s.body)
        return s.replace(condition=cond, body=body)

    def visit_Allocate(self, s: S.Allocate) -> S.Stmt:
        return s.replace(extents=self.visit_field(s.extents),
                         condition=self.an.simplify(s.condition), body=self.visit(s.body))

    def visit_AttrStmt(self, s: S.AttrStmt) -> S.Stmt:
        value = self.an.simplify(s.value) if isinstance(s.value, E.PrimExpr) else s.value
        return s.replace(value=value, body=self.visit(s.body))

    def visit_DeclBuffer(self, s: S.DeclBuffer) -> S.Stmt:
        return s.replace(body=self.visit(s.body))

    def _assuming(self, cond: E.PrimExpr, negate: bool = False):
        if isinstance(cond, E.IntImm) or not self._is_pure(cond):
            return nullcontext()
        if negate:
            return self.an._negated_scope(cond)
        return self.an.constraint_scope(cond)

    def _is_pure(self, e: E.PrimExpr) -> bool:
        got = self._pure.get(e)
        if got is None:
            got = not _reads_memory(e)
            self._pure[e] = got
        return got


class _Finder(IRVisitor):
    def __init__(self, want: Any):
        self.want = want
        self.found = False

    def visit(self, node: Any) -> None:
        if self.found:
            return
        if node is self.want or isinstance(node, E.BufferLoad) and self.want is E.BufferLoad:
            self.found = True
            return
        if isinstance(node, E.Call) and self.want is E.BufferLoad and node.op != "if_then_else":
            self.found = True  # an opaque call may read memory too
            return
        super().visit(node)


def _uses(node: Any, var: E.Var) -> bool:
    f = _Finder(var)
    f.visit(node)
    return f.found


def _reads_memory(e: E.PrimExpr) -> bool:
    f = _Finder(E.BufferLoad)
    f.visit(e)
    return f.found


def simplify_stmt(stmt: S.Stmt, analyzer: Analyzer | None = None) -> S.Stmt:
    """``stmt`` with every expression simplified in its context (see the module docstring)."""
    return _Simplifier(analyzer or Analyzer()).visit(stmt)


def simplify_func(func: PrimFunc) -> PrimFunc:
    """The PrimFunc with its body simplified; the same object when nothing changed."""
    return func.with_body(simplify_stmt(func.body))


class Simplify:
    """TVM's ``tir.transform.Simplify()``: a pass over an IRModule (or a single PrimFunc)."""

    name = "Simplify"

    def __call__(self, obj: IRModule | PrimFunc) -> IRModule | PrimFunc:
        if isinstance(obj, PrimFunc):
            return simplify_func(obj)
        out, changed = obj.copy(), False
        for name, func in obj.items():
            if isinstance(func, PrimFunc):
                new = simplify_func(func)
                if new is not func:
                    out[name], changed = new, True
        return out if changed else obj
