"""``BindParams``: turn parameters into constants (TVM's ``relax.transform.BindParams``).

Contract: ``BindParams(func_name, params)(mod)`` returns a module where, in function
``func_name``, every parameter named in ``params`` (by name, or by the relax Var itself) is
removed from the signature and its uses are replaced by ``relax.const(value)``. The value must
match the parameter's dtype, rank and constant dims. Unknown names raise ``ValueError`` listing
the parameters. (Symbolic dims of a bound parameter must also appear in a remaining parameter,
where they are checked at run time.)
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.analysis import ShapeMismatch, match_value
from workbench.relax.expr import Constant, Function, Var
from workbench.relax.struct_info import TensorStructInfo


def _as_numpy(value: Any) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "numpy"):
        return value.numpy()
    return np.asarray(value)


class BindParams(Pass):
    """The pass object: ``mod = BindParams("main", {"w": w_np})(mod)``."""

    name = "BindParams"

    def __init__(self, func_name: str, params: Mapping[Any, Any]):
        self.func_name = func_name
        self.params = dict(params)

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        func = mod[self.func_name]
        if not isinstance(func, Function):
            raise TypeError(f"BindParams: {self.func_name!r} is not a Relax function")
        by_name = {p.name_hint: p for p in func.params}
        bound: dict[int, Constant] = {}
        env: dict = {}
        for key, value in self.params.items():
            var = key if isinstance(key, Var) else by_name.get(key)
            if var is None or all(var is not p for p in func.params):
                raise ValueError(f"BindParams: function {self.func_name!r} has no parameter "
                                 f"{key!r}; its parameters are {list(by_name)}")
            arr = _as_numpy(value)
            si = var.struct_info
            if isinstance(si, TensorStructInfo):
                try:
                    match_value(si, arr, env, f"parameter {var.name_hint}")
                except ShapeMismatch as err:
                    raise ValueError(f"BindParams: {err}") from None
            bound[id(var)] = Constant(arr)
        from workbench.relax.expr_functor import ExprMutator

        class _Bind(ExprMutator):
            def visit_Var_(self, v: Var) -> Any:
                return bound.get(id(v), v)

        out = mod.copy()
        mutator = _Bind(out)
        body = mutator.visit_with_new_scope(func.body)
        params = tuple(p for p in func.params if id(p) not in bound)
        out[self.func_name] = Function(params, body, func.ret_struct_info, func.is_pure,
                                       func.attrs)
        return out


__all__ = ["BindParams"]
