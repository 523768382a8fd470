"""Visitors and mutators over Relax functions (TVM's ``PyExprVisitor`` / ``PyExprMutator``).

Dispatch is by class name: ``visit_Call_``, ``visit_Var_``, ... (the MRO is followed, so a
``visit_Var_`` also handles DataflowVars unless ``visit_DataflowVar_`` exists).

:class:`ExprMutator` rebuilds through a :class:`BlockBuilder` (``self.builder_``), the way TVM's
mutators do: each binding's new value is normalised and re-emitted, keeping the original Var
when its struct info is unchanged, so untouched code keeps its names and identities. A mutator
returns the very same object when nothing below it changed.
"""
from __future__ import annotations

from typing import Any

from workbench.ir.dispatch import MethodTable
from workbench.ir.module import IRModule
from workbench.ir.structural import structural_equal
from workbench.relax.block_builder import BlockBuilder
from workbench.relax.expr import (
    BindingBlock, Call, DataflowBlock, Expr, Function, If, MatchCast, SeqExpr,
    Tuple, TupleGetItem, Var, VarBinding, is_leaf,
)

class _Dispatching:
    """Gives each visitor class its ``visit_<Class>_`` lookup, resolved along each node's MRO
    and cached per node type (:class:`workbench.ir.dispatch.MethodTable`)."""

    _methods: MethodTable

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._methods = MethodTable(cls, "visit_", "_")


class ExprVisitor(_Dispatching):
    """Walks a Relax expression; override ``visit_<Class>_`` methods (call the base one to keep
    walking into children)."""

    def visit_expr(self, e: Any) -> None:
        m = self._methods.lookup(type(e))
        if m is not None:
            m(self, e)

    def visit_Call_(self, c: Call) -> None:
        if isinstance(c.op, Expr):
            self.visit_expr(c.op)
        for a in c.args:
            self.visit_expr(a)

    def visit_Tuple_(self, t: Tuple) -> None:
        for f in t.fields:
            self.visit_expr(f)

    def visit_TupleGetItem_(self, g: TupleGetItem) -> None:
        self.visit_expr(g.tuple_value)

    def visit_If_(self, e: If) -> None:
        self.visit_expr(e.cond)
        self.visit_expr(e.true_branch)
        self.visit_expr(e.false_branch)

    def visit_SeqExpr_(self, s: SeqExpr) -> None:
        for block in s.blocks:
            self.visit_binding_block(block)
        self.visit_expr(s.body)

    def visit_Function_(self, f: Function) -> None:
        for p in f.params:
            self.visit_var_def(p)
        self.visit_expr(f.body)

    def visit_binding_block(self, block: BindingBlock) -> None:
        for b in block.bindings:
            self.visit_binding(b)

    def visit_binding(self, b: Any) -> None:
        self.visit_expr(b.value)
        self.visit_var_def(b.var)

    def visit_var_def(self, v: Var) -> None:
        """Called where a Var is defined (parameters, bindings)."""


def var_names(func: Function) -> list[str]:
    """Every Var name defined in ``func`` (for choosing fresh names)."""
    names: list[str] = []

    class _Names(ExprVisitor):
        def visit_var_def(self, v: Var) -> None:
            names.append(v.name_hint)
    _Names().visit_expr(func)
    return names


class ExprMutator(_Dispatching):
    """Rebuilds Relax functions through ``self.builder_`` (see the module docstring)."""

    def __init__(self, mod: IRModule | None = None):
        self.builder_ = BlockBuilder(mod)
        self.var_remap_: dict[int, Var] = {}

    # ---- module -------------------------------------------------------------------------------

    def mutate_module(self) -> IRModule:
        """Visit every Relax function of the builder's module; returns the module."""
        mod = self.builder_.get()
        for gv, func in list(mod.functions.items()):
            if isinstance(func, Function):
                new = self.visit_expr(func)
                if new is not func:
                    self.builder_.update_func(gv, new)
        return self.builder_.get()

    # ---- dispatch -----------------------------------------------------------------------------

    def visit_expr(self, e: Any) -> Any:
        m = self._methods.lookup(type(e))
        return m(self, e) if m is not None else e

    def visit_Var_(self, v: Var) -> Expr:
        return self.var_remap_.get(id(v), v)

    def visit_Call_(self, c: Call) -> Expr:
        op = self.visit_expr(c.op) if isinstance(c.op, (Var, Function)) else c.op
        args = tuple(self.visit_expr(a) for a in c.args)
        if op is c.op and all(a is b for a, b in zip(args, c.args)):
            return c
        return self.builder_.normalize(Call(op, args, c.attrs, c.sinfo_args, span=c.span))

    def visit_Tuple_(self, t: Tuple) -> Expr:
        fields = tuple(self.visit_expr(f) for f in t.fields)
        if all(a is b for a, b in zip(fields, t.fields)):
            return t
        return self.builder_.normalize(Tuple(fields))

    def visit_TupleGetItem_(self, g: TupleGetItem) -> Expr:
        tup = self.visit_expr(g.tuple_value)
        if tup is g.tuple_value:
            return g
        return self.builder_.normalize(TupleGetItem(tup, g.index))

    def visit_If_(self, e: If) -> Expr:
        cond = self.visit_expr(e.cond)
        t = self.visit_with_new_scope(e.true_branch)
        f = self.visit_with_new_scope(e.false_branch)
        if cond is e.cond and t is e.true_branch and f is e.false_branch:
            return e
        return self.builder_.normalize(If(cond, t, f))

    def visit_Function_(self, func: Function) -> Expr:
        self._names = var_names(func)
        body = self.visit_with_new_scope(func.body)
        if body is func.body:
            return func
        return Function(func.params, body, func.ret_struct_info, func.is_pure, func.attrs)

    def visit_SeqExpr_(self, s: SeqExpr) -> Expr:
        return self.visit_with_new_scope(s)

    def visit_with_new_scope(self, e: Expr) -> Expr:
        """Rebuild ``e`` (a SeqExpr, or any expression) in a scope of its own."""
        self.builder_.begin_scope(getattr(self, "_names", ()))
        try:
            if isinstance(e, SeqExpr):
                for block in e.blocks:
                    self.visit_binding_block(block)
                body = self.visit_expr(e.body)
            else:
                body = self.visit_expr(e)
            if not is_leaf(body):
                body = self.builder_.emit(body)
        finally:
            blocks = self.builder_.end_scope()
        if isinstance(e, SeqExpr) and body is e.body and _same_blocks(blocks, e.blocks):
            return e
        return SeqExpr(blocks, body)

    def visit_binding_block(self, block: BindingBlock) -> None:
        if isinstance(block, DataflowBlock):
            self.builder_.begin_dataflow_block()
        else:
            self.builder_.begin_binding_block()
        for b in block.bindings:
            self.visit_binding(b)
        self.builder_.end_block()

    def visit_binding(self, b: Any) -> None:
        if isinstance(b, MatchCast):
            self.visit_match_cast(b)
        else:
            self.visit_var_binding(b)

    def visit_var_binding(self, b: VarBinding) -> None:
        value = self.visit_expr(b.value)
        self.reemit_binding(b, value)

    def visit_match_cast(self, b: MatchCast) -> None:
        value = self.visit_expr(b.value)
        if value is b.value:
            self.builder_.emit_normalized(b)
            return
        self.builder_.emit_normalized(MatchCast(b.var, self.builder_.normalize(value),
                                                b.struct_info))

    def reemit_binding(self, b: VarBinding, value: Expr) -> None:
        """Bind ``value`` to ``b``'s var (a new var of the same name and kind when the struct
        info changed; later uses are remapped)."""
        if value is b.value:
            self.builder_.emit_normalized(b)
            return
        value = self.builder_.normalize(value)
        var = b.var
        if value.struct_info is not None and var.struct_info is not None and \
                not structural_equal(value.struct_info, var.struct_info):
            var = type(var)(var.name_hint, value.struct_info)
            self.var_remap_[id(b.var)] = var
        self.builder_.emit_normalized(VarBinding(var, value))


def _same_blocks(new: tuple, old: tuple) -> bool:
    return len(new) == len(old) and all(
        type(a) is type(b) and len(a.bindings) == len(b.bindings)
        and all(x is y for x, y in zip(a.bindings, b.bindings)) for a, b in zip(new, old))


__all__ = ["ExprVisitor", "ExprMutator", "var_names"]
