"""``AnnotateConstantParams``: tell each kernel which of its parameters are compile-time
constants, so its default schedule may repack them for free.

Contract: ``AnnotateConstantParams()(mod)`` returns a new module where every PrimFunc that is
called by ``call_tir`` at least once, and whose parameter ``i`` receives a Relax ``Constant``
(directly, or a Var bound to one in the same function) at *every* call site, carries the attr
``constant_params`` (``workbench.dlight.analysis.CONSTANT_PARAMS_ATTR``): the sorted tuple of
those indices. Functions with no such parameter, or not called, are unchanged (an attr set
earlier is kept as it is). The module is otherwise unchanged.

Why: the default matmul schedule packs a weight into contiguous panels only when each element
is used often enough to pay for packing it on every call; a constant weight is packed once at
compile time (``PrepackConstantWeights``), so for a constant, panels are free even in a
product of one row -- where they matter most (a decode step's matrix-vector products walk a
row-major weight a whole row apart per element). The default pipeline runs this pass right
before ``ApplyDefaultSchedule``.
"""
from __future__ import annotations

from typing import Any

from workbench.dlight.analysis import CONSTANT_PARAMS_ATTR
from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import Constant, Var, VarBinding
from workbench.relax.expr_functor import ExprVisitor
from workbench.relax.op.base import call_tir_parts, is_call_tir, is_call_tir_inplace
from workbench.relax.transform._util import relax_functions
from workbench.tir.function import PrimFunc

__all__ = ["AnnotateConstantParams"]


class _Calls(ExprVisitor):
    """Per PrimFunc name: for each call site, which argument positions are constants."""

    def __init__(self) -> None:
        self.bound: dict[int, Any] = {}
        self.sites: dict[str, list[set[int]]] = {}

    def visit_binding(self, b: Any) -> None:
        if isinstance(b, VarBinding):
            self.bound[id(b.var)] = b.value
        value = b.value
        if is_call_tir(value) or is_call_tir_inplace(value):
            gvar, inputs, _, _ = call_tir_parts(value)
            consts = {i for i, a in enumerate(inputs) if self._constant(a)}
            self.sites.setdefault(gvar.name_hint, []).append(consts)
        super().visit_binding(b)

    def _constant(self, e: Any) -> bool:
        if isinstance(e, Var):
            e = self.bound.get(id(e), e)
        return isinstance(e, Constant)


class AnnotateConstantParams(Pass):
    """The pass object: ``mod = AnnotateConstantParams()(mod)`` (see the module docstring)."""

    name = "AnnotateConstantParams"

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        calls = _Calls()
        for _, func in relax_functions(mod):
            calls.visit_expr(func)
        out = mod.copy()
        for name, sites in calls.sites.items():
            func = mod[name] if name in mod else None
            if not isinstance(func, PrimFunc) or not sites:
                continue
            constant = set.intersection(*sites)
            if constant:
                out[name] = func.with_attr(CONSTANT_PARAMS_ATTR, tuple(sorted(constant)))
        return out
