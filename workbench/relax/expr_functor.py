"""Visitors and mutators over Relax functions (TVM's ``PyExprVisitor`` / ``PyExprMutator``).

Override TVM's names -- ``visit_call_``, ``visit_var_``, ``visit_function_``,
``visit_var_binding_``, ``visit_dataflow_block_``, ... (see :data:`TVM_NAMES`) -- or
Workbench's class-name spelling (``visit_Call_``, ``visit_Var_``; ``visit_var_binding``,
``visit_match_cast``): each pair names one method, and whichever a class defines overrides
both. Dispatch follows the node's MRO, so a ``visit_var_`` also handles DataflowVars unless
``visit_dataflow_var_`` exists. A class defining a ``visit_..._`` method that nothing
dispatches to (``visit_Cal_``, ``visit_calls_``) is a TypeError when the class is made,
naming the closest valid name -- such a method would otherwise never run.

:class:`ExprMutator` rebuilds through a :class:`BlockBuilder` (``self.builder_``), the way TVM's
mutators do: each binding's new value is normalised and re-emitted, keeping the original Var
when its struct info is unchanged, so untouched code keeps its names and identities. A mutator
returns the very same object when nothing below it changed.
"""
from __future__ import annotations

import difflib
from typing import Any

from workbench.ir.dispatch import MethodTable
from workbench.ir.module import GlobalVar, IRModule
from workbench.ir.structural import structural_equal
from workbench.relax.block_builder import BlockBuilder
from workbench.relax.expr import (
    BindingBlock, Call, Constant, DataflowBlock, DataflowVar, Expr, ExternFunc, Function, If,
    MatchCast, Op, PrimValue, SeqExpr, ShapeExpr, StringImm, Tuple, TupleGetItem, Var,
    VarBinding, is_leaf,
)

# TVM's override names for node types -> Workbench's class-name spelling of the same method.
TVM_NAMES: dict[str, str | None] = {
    "visit_constant_": "visit_Constant_", "visit_tuple_": "visit_Tuple_",
    "visit_var_": "visit_Var_", "visit_dataflow_var_": "visit_DataflowVar_",
    "visit_shape_expr_": "visit_ShapeExpr_", "visit_extern_func_": "visit_ExternFunc_",
    "visit_global_var_": "visit_GlobalVar_", "visit_function_": "visit_Function_",
    "visit_call_": "visit_Call_", "visit_seq_expr_": "visit_SeqExpr_", "visit_if_": "visit_If_",
    "visit_op_": "visit_Op_", "visit_tuple_getitem_": "visit_TupleGetItem_",
    "visit_prim_value_": "visit_PrimValue_", "visit_string_imm_": "visit_StringImm_",
    "visit_data_type_imm_": "visit_DataTypeImm_",
    # bindings, blocks and definitions (dispatched by visit_binding / visit_binding_block /
    # visit_var_def); the last four have TVM's name only
    "visit_var_binding_": "visit_var_binding", "visit_match_cast_": "visit_match_cast",
    "visit_var_def_": None, "visit_dataflow_var_def_": None,
    "visit_binding_block_": None, "visit_dataflow_block_": None,
}
# Names that are not overrides of a node type but are part of the visitor's interface.
_INTERFACE = {"visit_expr", "visit_binding", "visit_binding_block", "visit_var_def",
              "visit_with_new_scope", "visit_expr_post_order", "visit_span"}
# The node classes every class-name method may name (their subclasses too, see _node_names).
_NODE_ROOTS = (Expr, GlobalVar, Constant, DataflowVar, ExternFunc, Op, PrimValue, ShapeExpr,
               StringImm)


def _node_names() -> set[str]:
    """``visit_<Class>_`` for every Relax node class defined so far."""
    seen: set[type] = set()
    todo = list(_NODE_ROOTS)
    while todo:
        t = todo.pop()
        if t not in seen:
            seen.add(t)
            todo.extend(t.__subclasses__())
    return {f"visit_{t.__name__}_" for t in seen}


def _check_overrides(cls: type) -> None:
    """Raise TypeError for a ``visit_..._`` method of ``cls`` that nothing dispatches to."""
    valid = _node_names() | set(TVM_NAMES) | _INTERFACE | \
        {n for n in TVM_NAMES.values() if n is not None}
    for attr in vars(cls):
        if not attr.startswith("visit_") or attr in valid or not callable(vars(cls)[attr]):
            continue
        # ``visit_x_`` is the shape of an override; a name without the underscore is one only
        # if it is a near miss of an interface name (``visit_bindng``): helpers stay allowed.
        plain = sorted(n for n in valid if not n.endswith("_"))
        close = difflib.get_close_matches(attr, sorted(valid), n=1, cutoff=0.6)
        near = difflib.get_close_matches(attr, plain, n=1, cutoff=0.9)
        if attr.endswith("_") or near:
            close = close if attr.endswith("_") else near
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"{cls.__qualname__}.{attr} looks like a visitor override but no "
                            f"node type dispatches to it, so it would never be called{hint} "
                            f"(TVM's names: {', '.join(sorted(TVM_NAMES))})")


def _join_aliases(cls: type) -> None:
    """Make each TVM name and its Workbench spelling the same method on ``cls``: the one the
    most derived class defines (the TVM name when a class defines both)."""
    for tvm_name, wb_name in TVM_NAMES.items():
        if wb_name is None:
            continue
        for klass in cls.__mro__:
            found = vars(klass).get(tvm_name, vars(klass).get(wb_name))
            if found is not None:
                for n in (tvm_name, wb_name):
                    if vars(cls).get(n) is not found:
                        setattr(cls, n, found)
                break


class _Dispatching:
    """Gives each visitor class its ``visit_<Class>_`` lookup, resolved along each node's MRO
    and cached per node type (:class:`workbench.ir.dispatch.MethodTable`), after checking its
    override names and joining TVM's names to Workbench's."""

    _methods: MethodTable

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _check_overrides(cls)
        _join_aliases(cls)
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
        """Dispatch to ``visit_dataflow_block_`` / ``visit_binding_block_``."""
        if isinstance(block, DataflowBlock):
            self.visit_dataflow_block_(block)
        else:
            self.visit_binding_block_(block)

    def visit_binding_block_(self, block: BindingBlock) -> None:
        for b in block.bindings:
            self.visit_binding(b)

    def visit_dataflow_block_(self, block: DataflowBlock) -> None:
        self.visit_binding_block_(block)

    def visit_binding(self, b: Any) -> None:
        """Dispatch to ``visit_match_cast_`` / ``visit_var_binding_``."""
        if isinstance(b, MatchCast):
            self.visit_match_cast_(b)
        else:
            self.visit_var_binding_(b)

    def visit_var_binding_(self, b: VarBinding) -> None:
        self.visit_expr(b.value)
        self.visit_var_def(b.var)

    def visit_match_cast_(self, b: MatchCast) -> None:
        self.visit_expr(b.value)
        self.visit_var_def(b.var)

    def visit_var_def(self, v: Var) -> None:
        """Called where a Var is defined (parameters, bindings); dispatches to
        ``visit_dataflow_var_def_`` / ``visit_var_def_``."""
        if isinstance(v, DataflowVar):
            self.visit_dataflow_var_def_(v)
        else:
            self.visit_var_def_(v)

    def visit_var_def_(self, v: Var) -> None:
        """A Var's definition (nothing to do by default)."""

    def visit_dataflow_var_def_(self, v: DataflowVar) -> None:
        self.visit_var_def_(v)


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
        """Dispatch to ``visit_dataflow_block_`` / ``visit_binding_block_`` (which emit the
        block's bindings into ``self.builder_``)."""
        if isinstance(block, DataflowBlock):
            self.visit_dataflow_block_(block)
        else:
            self.visit_binding_block_(block)

    def visit_binding_block_(self, block: BindingBlock) -> None:
        self.builder_.begin_binding_block()
        for b in block.bindings:
            self.visit_binding(b)
        self.builder_.end_block()

    def visit_dataflow_block_(self, block: DataflowBlock) -> None:
        self.builder_.begin_dataflow_block()
        for b in block.bindings:
            self.visit_binding(b)
        self.builder_.end_block()

    def visit_binding(self, b: Any) -> None:
        """Dispatch to ``visit_match_cast_`` / ``visit_var_binding_``."""
        if isinstance(b, MatchCast):
            self.visit_match_cast_(b)
        else:
            self.visit_var_binding_(b)

    def visit_var_binding_(self, b: VarBinding) -> None:
        value = self.visit_expr(b.value)
        self.reemit_binding(b, value)

    def visit_match_cast_(self, b: MatchCast) -> None:
        value = self.visit_expr(b.value)
        if value is b.value:
            self.builder_.emit_normalized(b)
            return
        self.builder_.emit_normalized(MatchCast(b.var, self.builder_.normalize(value),
                                                b.struct_info))

    def visit_var_def(self, v: Var) -> Var:
        """A Var where it is defined; dispatches to ``visit_dataflow_var_def_`` /
        ``visit_var_def_`` (both return it unchanged by default)."""
        if isinstance(v, DataflowVar):
            return self.visit_dataflow_var_def_(v)
        return self.visit_var_def_(v)

    def visit_var_def_(self, v: Var) -> Var:
        return v

    def visit_dataflow_var_def_(self, v: DataflowVar) -> Var:
        return self.visit_var_def_(v)

    # ---- TVM's helpers ------------------------------------------------------------------------

    def lookup_binding(self, var: Var) -> Expr | None:
        """The value bound to ``var`` in the function being rebuilt (None if unbound)."""
        return self.builder_.lookup_binding(var)

    def set_var_remap(self, vid: Any, var: Var) -> None:
        """Make later uses of the Var ``vid`` (a Var, or its id) read ``var``."""
        self.var_remap_[vid if isinstance(vid, int) else id(vid)] = var

    def get_var_remap(self, vid: Any) -> Var | None:
        return self.var_remap_.get(vid if isinstance(vid, int) else id(vid))

    def with_struct_info(self, var: Var, struct_info: Any) -> Var:
        """``var`` if it already has ``struct_info``, else a new Var of the same name and kind
        with it."""
        if var.struct_info is not None and structural_equal(var.struct_info, struct_info):
            return var
        return type(var)(var.name_hint, struct_info)

    def visit_expr_post_order(self, e: Any) -> Any:
        """Rebuild ``e``'s children, not ``e`` itself (TVM's ``visit_expr_post_order``)."""
        m = ExprMutator._methods.lookup(type(e))
        return m(self, e) if m is not None else e

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


# TVM's class names and registration decorators. In TVM the decorators register the Python
# overrides with the C++ functor; here every subclass is checked and dispatched when it is made
# (``_Dispatching``), so they only check that the class is a visitor / mutator.
PyExprVisitor = ExprVisitor
PyExprMutator = ExprMutator


def visitor(cls: type) -> type:
    """``@relax.expr_functor.visitor`` on a ``PyExprVisitor`` subclass (TVM's spelling)."""
    if not (isinstance(cls, type) and issubclass(cls, ExprVisitor)):
        raise TypeError(f"@visitor expects a subclass of PyExprVisitor, got {cls!r}")
    return cls


def mutator(cls: type) -> type:
    """``@relax.expr_functor.mutator`` on a ``PyExprMutator`` subclass (TVM's spelling)."""
    if not (isinstance(cls, type) and issubclass(cls, ExprMutator)):
        raise TypeError(f"@mutator expects a subclass of PyExprMutator, got {cls!r}")
    return cls


__all__ = ["ExprVisitor", "ExprMutator", "PyExprVisitor", "PyExprMutator", "visitor",
           "mutator", "var_names", "TVM_NAMES"]
