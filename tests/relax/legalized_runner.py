"""A tiny test-only executor for legalized Relax modules (the real VM comes from runtime).

Compiles every PrimFunc of the module with ``workbench.build`` (one runtime Module), then runs
a Relax function binding by binding: ``call_tir`` allocates the outputs as NDArrays (shapes
from the out struct info, symbolic dims bound from the arguments) and calls the kernel; Tuple,
TupleGetItem, Constant, ShapeExpr and calls of other Relax functions are handled directly.
Anything else (an op call that was not legalized) is an error.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import workbench as wb
from workbench.ir.module import GlobalVar, IRModule
from workbench.relax import analysis
from workbench.relax.expr import (
    Call, Constant, Function, MatchCast, SeqExpr, ShapeExpr, Tuple, TupleGetItem, Var,
)
from workbench.relax.op.base import call_tir_parts, is_call_tir
from workbench.tir.function import PrimFunc


class LegalizedRunner:
    def __init__(self, mod: IRModule):
        self.mod = mod
        prims = IRModule({name: f for name, f in mod.items() if isinstance(f, PrimFunc)})
        self.lib = wb.build(prims, "llvm") if len(prims) else None
        self.kernel_calls: list[str] = []

    def run(self, func_name: str, *args: Any, record: dict | None = None) -> Any:
        func = self.mod[func_name]
        nd_args = [wb.nd.array(np.ascontiguousarray(a)) for a in args]
        return _to_numpy(self._call(func, nd_args, record))

    def _call(self, func: Function, args: list, record: dict | None) -> Any:
        env: dict[int, Any] = {}
        dims: dict = {}
        for p, a in zip(func.params, args):
            analysis.match_value(p.struct_info, a, dims, f"argument {p.name_hint}")
            env[id(p)] = a
        body = func.body
        assert isinstance(body, SeqExpr)
        for block in body.blocks:
            for b in block.bindings:
                value = self._eval(b.value, env, dims)
                si = b.struct_info if isinstance(b, MatchCast) else b.var.struct_info
                analysis.match_value(si, value, dims, f"binding {b.var.name_hint}")
                env[id(b.var)] = value
                if record is not None:
                    record[b.var] = _to_numpy(value)
        return self._eval(body.body, env, dims)

    def _eval(self, e: Any, env: dict, dims: dict) -> Any:
        if isinstance(e, Var):
            return env[id(e)]
        if isinstance(e, Constant):
            return wb.nd.array(e.data.numpy())
        if isinstance(e, ShapeExpr):
            return analysis.eval_dims(e.values, dims)
        if isinstance(e, Tuple):
            return tuple(self._eval(f, env, dims) for f in e.fields)
        if isinstance(e, TupleGetItem):
            return self._eval(e.tuple_value, env, dims)[e.index]
        if is_call_tir(e):
            return self._call_tir(e, env, dims)
        if isinstance(e, Call) and isinstance(e.op, GlobalVar):
            callee = self.mod[e.op]
            return self._call(callee, [self._eval(a, env, dims) for a in e.args], None)
        raise NotImplementedError(f"LegalizedRunner: cannot run {e}")

    def _call_tir(self, call: Call, env: dict, dims: dict) -> Any:
        gvar, inputs, tir_vars, outs = call_tir_parts(call)
        ins = [self._eval(a, env, dims) for a in inputs]
        results = [wb.nd.empty(analysis.eval_dims(o.values, dims), o.dtype) for o in outs]
        scalars = list(analysis.eval_dims(tir_vars, dims))
        self.kernel_calls.append(gvar.name_hint)
        self.lib[gvar.name_hint](*ins, *results, *scalars)
        return results[0] if len(results) == 1 else tuple(results)


def _to_numpy(v: Any) -> Any:
    if isinstance(v, tuple):
        return tuple(_to_numpy(x) for x in v)
    return v.numpy() if hasattr(v, "numpy") else v
