"""``ToNonDataflow`` and ``CallTIRRewrite``: from pure ``call_tir`` values to explicit
allocation plus kernel calls in destination-passing style (TVM's passes of those names).

``ToNonDataflow()(mod)``: every dataflow block becomes a plain binding block (the code after
this point has effects: it allocates and writes memory), and its DataflowVars become Vars (a
DataflowVar outside a dataflow block is malformed: the text would read it back as a Var).

``CallTIRRewrite()(mod)``: in every Relax function, each binding ::

    lv = R.call_tir(cls.f, (x, w), out_sinfo=R.Tensor((n, 16), "float32"))

becomes ::

    alloc = R.builtin.alloc_tensor(R.shape([n, 16]), dtype="float32", runtime_device_index=0)
    _ = cls.f(x, w, alloc)                 # the kernel writes its output into alloc
    lv = alloc

(one ``alloc`` per output; several outputs make ``lv = (alloc, alloc1)``; the kernel call
keeps the ``call_tir``'s ``span``). ``R.call_dps_packed("f", (x,), out_sinfo=...)`` becomes the
same allocation and a call of the packed function ``R.ExternFunc("f")(x, alloc)``. A call with
``tir_vars`` calls ``R.call_packed("vm.builtin.call_tir_dyn", cls.f, x, w, alloc,
R.shape([...]))`` so the kernel receives the extra int64 scalars after its buffers. Bindings
inside If branches are rewritten too.

``lv = R.call_tir_inplace(cls.f, (cache, x), inplace_indices=0, out_sinfo=...)`` allocates
nothing for its in-place outputs: ``_ = cls.f(cache, x)`` then ``lv = cache`` (fresh outputs,
index -1, are allocated and passed after the inputs as above).
"""
from __future__ import annotations

from typing import Any

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import (
    Binding, BindingBlock, Call, DataflowBlock, DataflowVar, ExternFunc, SeqExpr, Tuple, Var,
    VarBinding,
)
from workbench.relax.op.base import (
    call_tir_parts, is_call_dps_packed, is_call_tir, is_call_tir_inplace,
)
from workbench.relax.transform._util import (
    map_bindings, relax_functions, rewrite_nodes, with_body,
)
from workbench.relax.transform.lowered_ops import VOID_SINFO, builtin_alloc_tensor


def _to_plain(seq: SeqExpr) -> SeqExpr:
    blocks = tuple(BindingBlock(b.bindings) if isinstance(b, DataflowBlock) else b
                   for b in seq.blocks)
    if all(a is b for a, b in zip(blocks, seq.blocks)):
        return seq
    return SeqExpr(blocks, seq.body, seq.struct_info)


def _plain_var(n: Any) -> Var | None:
    return Var(n.name_hint, n.struct_info) if type(n) is DataflowVar else None


class ToNonDataflow(Pass):
    """The pass object: ``mod = ToNonDataflow()(mod)`` (see the module docstring)."""

    name = "ToNonDataflow"

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        out = mod.copy()
        for name, func in relax_functions(mod):
            if isinstance(func.body, SeqExpr):
                # Dataflow blocks cannot hold Ifs, so branches need no visit.
                plain = with_body(func, _to_plain(func.body))
                out[name] = rewrite_nodes(plain, _plain_var) if plain is not func else func
        return out


def _rewrite(b: Binding) -> list[Binding]:
    if not (isinstance(b, VarBinding) and (is_call_tir(b.value) or is_call_dps_packed(b.value)
                                           or is_call_tir_inplace(b.value))):
        return [b]
    gvar, inputs, tir_vars, outs = call_tir_parts(b.value)
    inplace = b.value.attrs.get("inplace_indices", (-1,) * len(outs))
    allocs: list[Var] = []      # the kernel's output buffers (fresh ones only)
    results: list[Any] = []     # the call's outputs, in order
    out: list[Binding] = []
    for si, i in zip(outs, inplace):
        if i >= 0:
            results.append(inputs[i])
            continue
        alloc = Var("alloc", si)
        out.append(VarBinding(alloc, builtin_alloc_tensor(si.shape, si.dtype)))
        allocs.append(alloc)
        results.append(alloc)
    span = b.value.span  # the kernel call implements what the call_tir did
    if tir_vars:
        call = Call(ExternFunc("vm.builtin.call_tir_dyn"),
                    (gvar, *inputs, *allocs, b.value.args[2]), {}, (VOID_SINFO,), VOID_SINFO,
                    span=span)
    else:
        # No sinfo_args, as TVM: a call of a module function takes its result from the callee
        # (and TVMScript has no place for them in ``cls.f(...)``).
        call = Call(gvar, (*inputs, *allocs), {}, (), VOID_SINFO, span=span)
    out.append(VarBinding(Var("_", VOID_SINFO), call))
    result = results[0] if len(results) == 1 else Tuple(tuple(results), b.var.struct_info)
    out.append(VarBinding(b.var, result))
    return out


class CallTIRRewrite(Pass):
    """The pass object: ``mod = CallTIRRewrite()(mod)`` (see the module docstring)."""

    name = "CallTIRRewrite"

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        out = mod.copy()
        for name, func in relax_functions(mod):
            if isinstance(func.body, SeqExpr):
                out[name] = with_body(func, map_bindings(func.body, _rewrite))
        return out


__all__ = ["ToNonDataflow", "CallTIRRewrite"]
