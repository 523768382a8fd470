"""``call_tir`` and ``call_dps_packed``: calls in destination-passing style.

``call_tir(gvar, args, out_sinfo, tir_vars=None)`` is

    Call(op=Op("relax.call_tir"),
         args=(gvar, Tuple(inputs)) + ((ShapeExpr(tir_vars),) if tir_vars else ()),
         sinfo_args=(out_sinfo_0, out_sinfo_1, ...))

Its value is a new tensor (one output: ``sinfo_args[0]``) or a tuple of new tensors (several:
``TupleStructInfo(sinfo_args)``). The PrimFunc takes the inputs, then one buffer per output
(written by the kernel), then the ``tir_vars`` values as int64 scalars.

``call_tir_inplace(gvar, args, inplace_indices, out_sinfo, tir_vars=None)`` (TVM's
``R.call_tir_inplace``) is the same call with op ``relax.call_tir_inplace`` and the attribute
``inplace_indices``: one entry per output, the index of the input the kernel writes in place
(that output *is* that input's tensor afterwards), or -1 for a fresh output. The PrimFunc takes
the inputs, then one buffer per fresh output only. The caller must not read the overwritten
input again (Relax's rule for in-place calls); it reads the call's result instead, which keeps
the order of reads and writes in the data flow.
``call_dps_packed(func, args, out_sinfo)`` is the same for a packed function registered by
name (``register_func``): ``Call(Op("relax.call_dps_packed"), (ExternFunc(name),
Tuple(inputs)), sinfo_args=outs)``; the function receives the inputs and then the output
tensors, which it must fill. It is pure as far as Relax knows (it may only write its outputs).

``call_pure_packed(func, *args, sinfo_args=...)`` calls a registered packed function that
*returns* its result (described by ``sinfo_args``) and has no visible side effect:
``Call(Op("relax.call_pure_packed"), (ExternFunc(name), *args), sinfo_args=...)``.
"""
from __future__ import annotations

from typing import Any, Sequence

from workbench.ir.module import GlobalVar
from workbench.relax.expr import Call, Expr, ExternFunc, ShapeExpr, Tuple
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_numpy, register_op
from workbench.relax.struct_info import StructInfo, TensorStructInfo, TupleStructInfo


def call_tir(gvar: GlobalVar, args: Expr | Sequence[Expr],
             out_sinfo: TensorStructInfo | Sequence[TensorStructInfo],
             tir_vars: ShapeExpr | Sequence[Any] | None = None) -> Call:
    """A call of PrimFunc ``gvar`` on ``args`` producing tensors described by ``out_sinfo``."""
    if not isinstance(gvar, GlobalVar):
        raise TypeError(f"call_tir: the callee must be a GlobalVar, got {gvar!r}")
    if not isinstance(args, Expr):
        args = Tuple(tuple(args))
    elif not isinstance(args, Tuple):
        args = Tuple((args,))
    outs = [out_sinfo] if isinstance(out_sinfo, StructInfo) else list(out_sinfo)
    for o in outs:
        if not isinstance(o, TensorStructInfo):
            raise TypeError(f"call_tir: out_sinfo must be TensorStructInfo(s), got {o!r}")
    call_args: tuple = (gvar, args)
    if tir_vars is not None:
        call_args += (tir_vars if isinstance(tir_vars, ShapeExpr) else ShapeExpr(tir_vars),)
    return Call(register_op("relax.call_tir"), call_args, {}, tuple(outs))


@def_infer("relax.call_tir")
def _infer_call_tir(call: Call, ctx: Any) -> StructInfo:
    if not call.sinfo_args:
        raise I.error(call, "needs the output struct info (sinfo_args)")
    if len(call.sinfo_args) == 1:
        return call.sinfo_args[0]
    return TupleStructInfo(call.sinfo_args)


@def_numpy("relax.call_tir")
def _call_tir_numpy(*args: Any, **attrs: Any) -> Any:
    raise NotImplementedError("call_tir is evaluated by the evaluator itself (it needs the "
                              "module and the output struct info)")


def call_tir_inplace(gvar: GlobalVar, args: Expr | Sequence[Expr],
                     inplace_indices: int | Sequence[int],
                     out_sinfo: TensorStructInfo | Sequence[TensorStructInfo],
                     tir_vars: ShapeExpr | Sequence[Any] | None = None) -> Call:
    """A call of PrimFunc ``gvar`` that overwrites the inputs ``inplace_indices`` names (one
    entry per output; -1 is a fresh output) and returns them as its outputs."""
    plain = call_tir(gvar, args, out_sinfo, tir_vars)
    indices = (inplace_indices,) if isinstance(inplace_indices, int) else \
        tuple(inplace_indices)
    n_in = len(plain.args[1].fields)
    if len(indices) != len(plain.sinfo_args):
        raise ValueError(f"call_tir_inplace: {len(indices)} inplace_indices for "
                         f"{len(plain.sinfo_args)} outputs of {gvar.name_hint!r}")
    for i in indices:
        if not isinstance(i, int) or isinstance(i, bool) or not -1 <= i < n_in:
            raise ValueError(f"call_tir_inplace: inplace index {i!r} of {gvar.name_hint!r} is "
                             f"not -1 or an input index in [0, {n_in})")
    written = [i for i in indices if i >= 0]
    if not written:
        raise ValueError(f"call_tir_inplace: no output of {gvar.name_hint!r} is in place "
                         "(use call_tir)")
    if len(set(written)) != len(written):
        raise ValueError(f"call_tir_inplace: input written twice in {gvar.name_hint!r}: "
                         f"{list(indices)}")
    return Call(register_op("relax.call_tir_inplace"), plain.args,
                {"inplace_indices": indices}, plain.sinfo_args)


@def_infer("relax.call_tir_inplace")
def _infer_call_tir_inplace(call: Call, ctx: Any) -> StructInfo:
    inputs = call.args[1].fields if isinstance(call.args[1], Tuple) else (call.args[1],)
    for out, i in zip(call.sinfo_args, call.attrs["inplace_indices"]):
        if i < 0:
            continue
        si = inputs[i].struct_info
        if isinstance(si, TensorStructInfo) and si.dtype != out.dtype:
            raise I.error(call, f"input {i} is {si.dtype} but the output written into it is "
                                f"{out.dtype}")
        if isinstance(si, TensorStructInfo) and si.shape is not None and \
                out.shape is not None and len(si.values) == len(out.values) and \
                any(I.prove_equal(a, b) is False for a, b in zip(si.values, out.values)):
            raise I.error(call, f"input {i} has shape {I.dims_text(si.values)} but the "
                                f"output written into it has {I.dims_text(out.values)}")
    return _infer_call_tir(call, ctx)


def _out_sinfos(out_sinfo: Any, where: str) -> tuple[TensorStructInfo, ...]:
    outs = [out_sinfo] if isinstance(out_sinfo, StructInfo) else list(out_sinfo)
    if not outs:
        raise ValueError(f"{where}: out_sinfo is empty; give at least one TensorStructInfo")
    for o in outs:
        if not isinstance(o, TensorStructInfo):
            raise TypeError(f"{where}: out_sinfo must be TensorStructInfo(s), got {o!r}")
    return tuple(outs)


def call_dps_packed(func: str | ExternFunc, args: Expr | Sequence[Expr],
                    out_sinfo: TensorStructInfo | Sequence[TensorStructInfo]) -> Call:
    """A call of the packed function ``func`` (a registered name, or an ExternFunc) on
    ``args``, which writes the new tensors described by ``out_sinfo`` (TVM's
    ``relax.call_dps_packed``). The function is looked up when the VM is created."""
    if isinstance(func, str):
        func = ExternFunc(func)
    if not isinstance(func, ExternFunc):
        raise TypeError(f"call_dps_packed: func must be a registered function's name or an "
                        f"ExternFunc, got {func!r}")
    if not isinstance(args, Expr):
        args = Tuple(tuple(args))
    elif not isinstance(args, Tuple):
        args = Tuple((args,))
    outs = _out_sinfos(out_sinfo, "call_dps_packed")
    return Call(register_op("relax.call_dps_packed"), (func, args), {}, outs)


# No numpy or legalization rule: these are calls, not ops with a formula; the numpy
# evaluator (relax/testing.py) calls the registered function itself.
@def_infer("relax.call_dps_packed")
def _infer_call_dps_packed(call: Call, ctx: Any) -> StructInfo:
    return _infer_call_tir(call, ctx)


def call_pure_packed(func: str | ExternFunc, *args: Expr,
                     sinfo_args: StructInfo | Sequence[StructInfo] | None = None) -> Call:
    """A call of the registered packed function ``func`` on ``args`` returning a value of
    struct info ``sinfo_args`` (one; several make a tuple), declared pure so it may stay in a
    dataflow block (TVM's ``relax.call_pure_packed``)."""
    if isinstance(func, ExternFunc):
        func = func.global_symbol
    if not isinstance(func, str) or not func:
        raise TypeError(f"call_pure_packed: func must be a registered function's name or an "
                        f"ExternFunc, got {func!r}")
    if sinfo_args is None:
        raise ValueError(f"call_pure_packed({func!r}): sinfo_args (the struct info of the "
                         "result) is required")
    sinfos = (sinfo_args,) if isinstance(sinfo_args, StructInfo) else tuple(sinfo_args)
    for si in sinfos:
        if not isinstance(si, StructInfo):
            raise TypeError(f"call_pure_packed({func!r}): sinfo_args must be StructInfo, "
                            f"got {si!r}")
    for i, a in enumerate(args):
        if not isinstance(a, Expr):
            raise TypeError(f"call_pure_packed({func!r}): argument {i} must be a Relax "
                            f"expression, got {type(a).__name__}")
    return Call(register_op("relax.call_pure_packed"), (ExternFunc(func), *args), {}, sinfos)


@def_infer("relax.call_pure_packed")
def _infer_call_pure_packed(call: Call, ctx: Any) -> StructInfo:
    if len(call.sinfo_args) == 1:
        return call.sinfo_args[0]
    return TupleStructInfo(call.sinfo_args)


def dps_parts(call: Call) -> tuple[Expr, tuple[Expr, ...], tuple[Any, ...],
                                   tuple[TensorStructInfo, ...]]:
    """``(callee, input exprs, tir_vars dims, out sinfos)`` of a ``call_tir`` or a
    ``call_dps_packed`` call (the callee is a GlobalVar or an ExternFunc)."""
    callee, args = call.args[0], call.args[1]
    inputs = args.fields if isinstance(args, Tuple) else (args,)
    tir_vars = call.args[2].values if len(call.args) > 2 else ()
    return callee, tuple(inputs), tuple(tir_vars), tuple(call.sinfo_args)


def is_call_dps_packed(e: Any) -> bool:
    return isinstance(e, Call) and getattr(e.op, "name", None) == "relax.call_dps_packed"


def call_tir_parts(call: Call) -> tuple[GlobalVar, tuple[Expr, ...], tuple[Any, ...],
                                         tuple[TensorStructInfo, ...]]:
    """``(gvar, input exprs, tir_vars dims, out sinfos)`` of a ``call_tir`` call (the same
    layout as every destination-passing call: :func:`dps_parts`)."""
    return dps_parts(call)


def is_call_tir(e: Any) -> bool:
    return isinstance(e, Call) and getattr(e.op, "name", None) == "relax.call_tir"


def is_call_tir_inplace(e: Any) -> bool:
    return isinstance(e, Call) and getattr(e.op, "name", None) == "relax.call_tir_inplace"


__all__ = ["call_tir", "call_tir_inplace", "call_tir_parts", "is_call_tir",
           "is_call_tir_inplace", "call_dps_packed", "dps_parts", "is_call_dps_packed",
           "call_pure_packed"]
