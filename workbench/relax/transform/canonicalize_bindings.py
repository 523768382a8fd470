"""``CanonicalizeBindings``: forward trivial bindings (TVM's pass of that name, its core rules).

Contract: ``CanonicalizeBindings()(mod)`` returns a module where, in every Relax function,

- ``y = x`` (a variable bound to another variable) and
- ``y = t[i]`` where ``t`` is bound to a tuple literal ``(a, b, ...)``

are removed and later uses of ``y`` read the forwarded value directly, when that keeps the
code valid: a binding of a non-dataflow variable (a block output) is only forwarded to another
non-dataflow variable. Fusion sees through such bindings afterwards (batch norm's
``(out, mean, var)[0]`` becomes ``out``); the tuple itself is left for DeadCodeElimination.
"""
from __future__ import annotations

from typing import Any

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import DataflowVar, Expr, Tuple, TupleGetItem, Var, VarBinding
from workbench.relax.expr_functor import ExprMutator
from workbench.relax.transform._util import is_primitive, relax_functions


class _Canonicalizer(ExprMutator):
    def __init__(self, mod: IRModule):
        super().__init__(mod)
        self.tuples: dict[int, Tuple] = {}

    def visit_var_binding(self, b: VarBinding) -> None:
        value = self.visit_expr(b.value)
        target = self._forward(value)
        if target is not None and (isinstance(b.var, DataflowVar) or
                                   not isinstance(target, DataflowVar)):
            self.var_remap_[id(b.var)] = target
            return
        if isinstance(value, Tuple):
            self.tuples[id(b.var)] = value
        self.reemit_binding(b, value)

    def _forward(self, value: Expr) -> Any:
        if isinstance(value, Var):
            return value
        if isinstance(value, TupleGetItem) and id(value.tuple_value) in self.tuples:
            field = self.tuples[id(value.tuple_value)].fields[value.index]
            return field if isinstance(field, Var) else None
        return None


class CanonicalizeBindings(Pass):
    """The pass object: ``mod = CanonicalizeBindings()(mod)`` (see the module docstring)."""

    name = "CanonicalizeBindings"

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        out = mod.copy()
        for name, func in relax_functions(mod):
            if not is_primitive(func):
                new = _Canonicalizer(out).visit_expr(func)
                out[name] = new
        return out


__all__ = ["CanonicalizeBindings"]
