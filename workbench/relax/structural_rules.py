"""How Relax nodes take part in structural equality and hashing (see workbench.ir.structural).

Relax Vars are mapped like TIR Vars (names ignored). A symbolic dimension (a tir Var) is defined
where it first appears in a *defining* struct info: a function parameter's annotation or a
MatchCast's target. So the defining fields of parameters and bindings pass their "definition"
flag down through struct info and shape expressions to the bare tir Vars inside them.
"""
from __future__ import annotations

from workbench.ir.structural import VAR, register_opaque_value, register_structural
from workbench.relax.expr import Call, Function, MatchCast, ShapeExpr, Var, VarBinding
from workbench.relax.struct_info import (
    PrimStructInfo, ShapeStructInfo, TensorStructInfo, TupleStructInfo,
)
from workbench.runtime.module import Module


def register() -> None:
    register_structural(Var, kind=VAR, ignore=("name_hint",), inherit_defs=("struct_info",))
    register_structural(TensorStructInfo, inherit_defs=("shape",))
    register_structural(ShapeExpr, inherit_defs=("values", "struct_info"))
    register_structural(ShapeStructInfo, inherit_defs=("values",))
    register_structural(PrimStructInfo, inherit_defs=("value",))
    register_structural(TupleStructInfo, inherit_defs=("fields",))
    register_structural(Function, order=("params",), defs=("params",))
    # Where a call came from (importers' source locations) does not change what it computes.
    register_structural(Call, ignore=("span",))
    # The value is computed from earlier definitions; then the binding defines its var.
    register_structural(VarBinding, order=("value", "var"), defs=("var",))
    register_structural(MatchCast, order=("value", "struct_info", "var"),
                        defs=("struct_info", "var"))
    # Compiled modules a backend codegen attached (RunCodegen's external_mods): equal when
    # their code is, so a module read back from its printout equals the original.
    register_opaque_value(Module, lambda m: m.serialize()[0].encode() + m.serialize()[1])


register()
