"""``FoldConstant``: compute at compile time every kernel call whose inputs are all constants
(TVM's ``relax.transform.FoldConstant``, for ``call_tir``).

Contract: after ``LegalizeOps``, a binding ``y = call_tir(f, (c1, c2, ...), out_sinfo)`` whose
inputs are ``Constant``s (or variables bound to constants earlier in the same function), with
no symbolic dimension in its output and one tensor output, becomes ``y = Constant(value)``:
the PrimFunc ``f`` is compiled (with its default schedule: a folded weight transpose is a big
copy) and run once on the constants. Folds cascade in program order. Calls over non-constant
inputs, tuple outputs, ``tir_vars`` and calls of anything other than a PrimFunc of the module
are left alone; the PrimFuncs that are no longer called are dropped later by
DeadCodeElimination. ``pass.folded`` lists the folded bindings' variable names.

Why it matters: with weights bound as parameters (``relax.build(params=...)``, the importers'
default) ``nn.Linear``'s ``permute_dims(weight)`` and a conv bias ``reshape`` would otherwise
run on every call, and the matmul after them would see a computed tensor rather than a
constant weight, so ``PrepackConstantWeights`` could not pack it ahead of time.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.ir.module import IRModule
from workbench.relax.expr import Constant, Function, VarBinding
from workbench.relax.expr_functor import ExprMutator
from workbench.relax.op.base import call_tir_parts, is_call_tir
from workbench.relax.struct_info import TensorStructInfo
from workbench.relax.transform._util import is_primitive, relax_functions
from workbench.tir.function import PrimFunc

__all__ = ["FoldConstant"]


class _Folder(ExprMutator):
    def __init__(self, mod: IRModule, fold: "FoldConstant"):
        super().__init__(mod)
        self.mod = mod
        self.fold = fold
        self.constants: dict[int, Constant] = {}

    def _constant(self, e: Any) -> Constant | None:
        if isinstance(e, Constant):
            return e
        return self.constants.get(id(e))

    def visit_var_binding(self, b: VarBinding) -> None:
        value = self.visit_expr(b.value)
        if isinstance(value, Constant):
            self.constants[id(b.var)] = value
        folded = self._try_fold(value) if is_call_tir(value) else None
        if folded is None:
            self.reemit_binding(b, value)
            return
        self.fold.folded.append(b.var.name_hint)
        self.constants[id(b.var)] = folded
        self.reemit_binding(b, folded)

    def _try_fold(self, call: Any) -> Constant | None:
        gvar, inputs, tir_vars, outs = call_tir_parts(call)
        if tir_vars or len(outs) != 1 or not isinstance(outs[0], TensorStructInfo):
            return None
        consts = [self._constant(a) for a in inputs]
        if any(c is None for c in consts):
            return None
        shape = _static_shape(outs[0])
        name = getattr(gvar, "name_hint", None)
        func = self.mod[name] if name is not None and name in self.mod else None
        if shape is None or not isinstance(func, PrimFunc):
            return None
        return Constant(self.fold.run(name, func, [c.data.numpy() for c in consts],
                                      shape, outs[0].dtype))


def _static_shape(si: TensorStructInfo) -> tuple[int, ...] | None:
    if si.values is None:
        return None
    dims = []
    for d in si.values:
        if not hasattr(d, "value"):
            return None
        dims.append(int(d.value))
    return tuple(dims)


class FoldConstant:
    """The pass object: ``mod = FoldConstant(target)(mod)`` (see the module docstring)."""

    name = "FoldConstant"

    def __init__(self, target: Any = None) -> None:
        self.target = target
        self.folded: list[str] = []
        self._compiled: dict[str, Any] = {}

    def run(self, name: str, func: PrimFunc, inputs: list[np.ndarray], shape: tuple[int, ...],
            dtype: str) -> np.ndarray:
        """Run PrimFunc ``func`` (compiled once per name) on ``inputs``."""
        import workbench as wb
        from workbench.driver import build
        kernel = self._compiled.get(name)
        if kernel is None:
            target = self.target if self.target is not None else "llvm"
            kernel = build(func.with_attr("global_symbol", name), target, name=name,
                           default_schedule=True)[name]
            self._compiled[name] = kernel
        out = wb.nd.empty(shape, dtype)
        kernel(*[wb.nd.array(np.ascontiguousarray(a)) for a in inputs], out)
        return out.numpy()

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"FoldConstant expects an IRModule, got {type(mod).__name__}")
        self.folded = []
        self._compiled = {}
        out = mod.copy()
        for name, func in relax_functions(mod):
            if is_primitive(func) or not isinstance(func, Function):
                continue
            new = _Folder(out, self).visit_expr(func)
            if new is not func:
                out[name] = new
        return out
