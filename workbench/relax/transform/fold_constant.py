"""``FoldConstant``: compute at compile time every kernel call whose inputs are all constants
(TVM's ``relax.transform.FoldConstant``, for ``call_tir``).

Contract: after ``LegalizeOps``, a binding ``y = call_tir(f, (c1, c2, ...), out_sinfo)`` whose
inputs are ``Constant``s (or variables bound to constants earlier in the same function), with
no symbolic dimension in its output, one tensor output, and no more output elements than its
inputs have (or 65536), becomes ``y = Constant(value)``:
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
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import Constant, Function, VarBinding
from workbench.relax.expr_functor import ExprMutator, ExprVisitor
from workbench.relax.op.base import call_tir_parts, is_call_tir
from workbench.relax.struct_info import TensorStructInfo
from workbench.relax.transform._util import is_primitive, relax_functions
from workbench.tir.function import PrimFunc

__all__ = ["FoldConstant"]


#: A fold may not make a constant with more elements than its inputs have together (or this
#: many, for small ones): a broadcast of a bias to a whole activation stays a kernel.
MIN_GROWTH_LIMIT = 1 << 16


def _foldable(mod: IRModule, call: Any) -> tuple[str, tuple, tuple[int, ...], str] | None:
    """``(PrimFunc name, inputs, output shape, dtype)`` of a call_tir that could be folded
    (whether its inputs are constants is not checked here)."""
    gvar, inputs, tir_vars, outs = call_tir_parts(call)
    if tir_vars or len(outs) != 1 or not isinstance(outs[0], TensorStructInfo):
        return None
    shape = _static_shape(outs[0])
    name = getattr(gvar, "name_hint", None)
    if shape is None or name is None or name not in mod or not isinstance(mod[name], PrimFunc):
        return None
    in_elems = 0
    for a in inputs:
        si = getattr(a, "struct_info", None)
        dims = _static_shape(si) if isinstance(si, TensorStructInfo) else None
        if dims is None:
            return None
        in_elems += int(np.prod(dims)) if dims else 1
    if int(np.prod(shape)) > max(in_elems, MIN_GROWTH_LIMIT):
        return None
    return name, inputs, shape, outs[0].dtype


class _Planner(ExprVisitor):
    """A dry run: the PrimFuncs of the calls that will fold (inputs constant, or results of
    calls that fold), so they are compiled together in one build."""

    def __init__(self, mod: IRModule):
        super().__init__()
        self.mod = mod
        self.known: set[int] = set()
        self.names: list[str] = []

    def visit_binding(self, b: Any) -> None:
        super().visit_binding(b)
        if not isinstance(b, VarBinding):
            return
        value = b.value
        if isinstance(value, Constant):
            self.known.add(id(b.var))
        elif is_call_tir(value):
            parts = _foldable(self.mod, value)
            if parts is not None and all(isinstance(a, Constant) or id(a) in self.known
                                         for a in parts[1]):
                self.known.add(id(b.var))
                if parts[0] not in self.names:
                    self.names.append(parts[0])


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
        parts = _foldable(self.mod, call)
        if parts is None:
            return None
        name, inputs, shape, dtype = parts
        consts = [self._constant(a) for a in inputs]
        if any(c is None for c in consts):
            return None
        return Constant(self.fold.run(name, [c.data.numpy() for c in consts], shape, dtype))


def _static_shape(si: TensorStructInfo) -> tuple[int, ...] | None:
    if si.values is None:
        return None
    dims = []
    for d in si.values:
        if not hasattr(d, "value"):
            return None
        dims.append(int(d.value))
    return tuple(dims)


class FoldConstant(Pass):
    """The pass object: ``mod = FoldConstant(target)(mod)`` (see the module docstring). The
    folded kernels are built for this host, whatever ``target`` the module is for."""

    name = "FoldConstant"

    def __init__(self, target: Any = None) -> None:
        self.target = target
        self.folded: list[str] = []
        self._compiled: dict[str, Any] = {}

    def run(self, name: str, inputs: list[np.ndarray], shape: tuple[int, ...],
            dtype: str) -> np.ndarray:
        """Run the compiled PrimFunc ``name`` on ``inputs``."""
        import workbench as wb
        out = wb.nd.empty(shape, dtype)
        # reshape: np.ascontiguousarray makes a 0-d constant 1-d
        args = [wb.nd.array(np.ascontiguousarray(a).reshape(np.shape(a))) for a in inputs]
        self._compiled[name](*args, out)
        return out.numpy()

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"FoldConstant expects an IRModule, got {type(mod).__name__}")
        self.folded = []
        funcs = [(name, func) for name, func in relax_functions(mod)
                 if isinstance(func, Function) and not is_primitive(func)]
        names: list[str] = []
        for _, func in funcs:
            planner = _Planner(mod)
            planner.visit_expr(func)
            names += [n for n in planner.names if n not in names]
        if not names:
            return mod
        # One build for every kernel to run (each one compiled alone costs a build each),
        # through codegen, not the driver (floor 6, which runs this pass's pipeline): the
        # default schedules first, as ``workbench.build(default_schedule=True)`` does.
        from workbench.codegen.build import build
        from workbench.dlight import default_schedule
        # The kernels run here, at compile time: built for this host ("llvm"), whatever the
        # module is built for -- code for the build target may not run on this machine
        # (AVX-512 code on an AVX2-only host dies of SIGILL).
        target = "llvm"
        kernels = IRModule({n: mod[n].with_attr("global_symbol", n) for n in names})
        lib = build(default_schedule(kernels, target), target)
        self._compiled = {n: lib[n] for n in names}
        out = mod.copy()
        for name, func in funcs:
            new = _Folder(out, self).visit_expr(func)
            if new is not func:
                out[name] = new
        self._compiled = {}
        return out
