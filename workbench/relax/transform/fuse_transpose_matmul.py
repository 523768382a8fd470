"""``FuseTransposeMatmul``: ``matmul(x, permute_dims(w))`` as one kernel that reads ``w`` in
place (TVM's pass, run before LegalizeOps).

A linear layer stores its weight as ``(out_features, in_features)`` and multiplies by its
transpose. Legalized as written, that is a transpose kernel writing a copy of the weight, then
a product reading the copy; the fused kernel ``NT_matmul`` reads ``w`` row by row instead.

Contract: ``FuseTransposeMatmul()(mod)`` returns a module computing the same values, where in
every Relax function each ``matmul(x, wT)`` whose ``wT`` is bound to ``permute_dims(w)`` of a
2-d ``w`` (axes ``None`` or ``[1, 0]``), with ``x`` of rank >= 2 and the same dtype and no
other ``out_dtype``, becomes ``call_tir(NT_matmul, (x, w))`` with
``out[..., i, j] = sum_k x[..., i, k] * w[j, k]``. The ``permute_dims`` binding is left for
DeadCodeElimination (another use may still read it). TVM also fuses batched weights (rank > 2)
and 1-d ``x``; those are left unchanged here (still correct, just not fused).
"""
from __future__ import annotations

from typing import Any

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import Call, Expr, Var
from workbench.relax.expr_functor import ExprMutator
from workbench.relax.struct_info import TensorStructInfo

__all__ = ["FuseTransposeMatmul"]


def _op(e: Any) -> str:
    return getattr(getattr(e, "op", None), "name", "") if isinstance(e, Call) else ""


def _tensor(e: Expr) -> TensorStructInfo | None:
    si = e.struct_info
    return si if isinstance(si, TensorStructInfo) and si.ndim >= 0 else None


def _nt_matmul(x: Any, w: Any) -> Any:
    """te: ``x @ w.T`` for a rank >= 2 ``x`` and a 2-d ``w``."""
    from workbench import te
    k = te.reduce_axis((0, x.shape[-1]), name="k")
    shape = (*x.shape[:-1], w.shape[0])
    return te.compute(shape, lambda *i: te.sum(x[(*i[:-1], k)] * w[i[-1], k], axis=k),
                      name="NT_matmul")


class _Fuser(ExprMutator):
    def __init__(self, mod: IRModule) -> None:
        super().__init__(mod)
        self.fused = 0

    def visit_call_(self, call: Call) -> Expr:
        call = super().visit_call_(call)
        if _op(call) != "relax.matmul":
            return call
        x, wt = call.args
        bound = self.builder_.lookup_binding(wt) if isinstance(wt, Var) else wt
        if _op(bound) != "relax.permute_dims":
            return call
        w = bound.args[0]
        xs, ws = _tensor(x), _tensor(w)
        axes = bound.attrs.get("axes")
        if xs is None or ws is None or ws.ndim != 2 or xs.ndim < 2 or \
                (axes is not None and [int(a) for a in axes] != [1, 0]) or \
                xs.dtype != ws.dtype or call.attrs.get("out_dtype") not in (None, "", "void",
                                                                              xs.dtype):
            return call
        self.fused += 1
        return self.builder_.call_te(_nt_matmul, x, w, primfunc_name_hint="NT_matmul")


class FuseTransposeMatmul(Pass):
    """The pass object: ``mod = FuseTransposeMatmul()(mod)``; after a call, ``fused`` counts
    the rewritten products."""

    name = "FuseTransposeMatmul"

    def __init__(self) -> None:
        self.fused = 0

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        fuser = _Fuser(mod)
        out = fuser.mutate_module()
        self.fused = fuser.fused
        return out if fuser.fused else mod
