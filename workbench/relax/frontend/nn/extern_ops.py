"""Escape hatches of ``relax.frontend.nn`` (TVM's ``nn.op`` names): call code the op library
does not have, while tracing a module.

- ``tensor_expr_op(te_func, name_hint, args)``: a te compute function, emitted as a PrimFunc
  and a ``call_tir`` (``BlockBuilder.emit_te``);
- ``tensor_ir_op(prim_func, name_hint, args, out)``: a PrimFunc written by hand, called with
  ``call_tir``; PrimExpr / ShapeExpr arguments become its trailing int64 scalars;
- ``extern(name, args, out)``: a packed function registered by name (``register_func``),
  called in destination-passing style (``call_dps_packed``) when the VM runs.

``out`` describes the outputs: ``nn.Tensor.placeholder(shape, dtype)`` or a list of them.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from workbench.relax.expr import Expr, PrimValue, ShapeExpr, StringImm, Tuple
from workbench.relax.frontend.nn.core import Tensor, _builder, wrap
from workbench.relax.op.base import call_dps_packed, call_tir, call_tir_inplace
from workbench.relax.struct_info import TensorStructInfo
from workbench.relax.te_bridge import call_te
from workbench.tir.expr import FloatImm, IntImm, PrimExpr
from workbench.tir.function import PrimFunc

__all__ = ["tensor_expr_op", "tensor_ir_op", "extern"]


def tensor_expr_op(tensor_expr_func: Callable, name_hint: str,
                   args: Sequence[Any], *, attrs: dict[str, Any] | None = None) -> Any:
    """Emit ``tensor_expr_func(*args)`` (te tensors in, a te tensor or list out) as a PrimFunc
    named ``name_hint`` (with ``attrs`` set on it) and a call of it; returns nn Tensor(s)."""
    if not callable(tensor_expr_func):
        raise TypeError(f"tensor_expr_op: tensor_expr_func must be callable, got "
                        f"{tensor_expr_func!r}")
    bb = _builder("tensor_expr_op")
    te_args = tuple(a.expr if isinstance(a, Tensor) else a for a in args)
    call = call_te(bb, tensor_expr_func, te_args,
                   {"primfunc_name_hint": name_hint, "primfunc_attrs": attrs})
    return wrap(call, name_hint)


def tensor_ir_op(func: PrimFunc, name_hint: str, args: Any, out: Any) -> Any:
    """Add ``func`` to the module (as ``name_hint``) and call it on ``args`` with
    ``call_tir``; ``out`` (a placeholder Tensor or a list) gives the outputs' shapes and
    dtypes. Returns nn Tensor(s) shaped like ``out``."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"tensor_ir_op: func must be a tir.PrimFunc, got {type(func).__name__}")
    tensors, tir_vars = _tir_args(args, "tensor_ir_op", name_hint)
    bb = _builder("tensor_ir_op")
    gvar = bb.add_func(func, name_hint)
    outs = _out_sinfos(out, "tensor_ir_op")
    call = call_tir(gvar, tensors, outs if len(outs) > 1 else outs[0],
                    tir_vars=tir_vars or None)
    return _shaped_like(wrap(call, name_hint), out)


def tensor_ir_inplace_op(func: PrimFunc, name_hint: str, args: Any, inplace_indices: Any,
                         out: Any) -> Any:
    """:func:`tensor_ir_op` with ``call_tir_inplace``: output ``i`` is input
    ``inplace_indices[i]`` written in place (-1: a fresh output); TVM's name."""
    if not isinstance(func, PrimFunc):
        raise TypeError(f"tensor_ir_inplace_op: func must be a tir.PrimFunc, got "
                        f"{type(func).__name__}")
    tensors, tir_vars = _tir_args(args, "tensor_ir_inplace_op", name_hint)
    gvar = _builder("tensor_ir_inplace_op").add_func(func, name_hint)
    outs = _out_sinfos(out, "tensor_ir_inplace_op")
    call = call_tir_inplace(gvar, tensors, inplace_indices, outs if len(outs) > 1 else outs[0],
                            tir_vars=tir_vars or None)
    return _shaped_like(wrap(call, name_hint), out)


def extern(name: str, args: Sequence[Any], out: Any) -> Any:
    """Call the packed function registered as ``name`` on ``args`` (Tensors, ints, floats,
    strings, PrimExprs, nested lists) in destination-passing style: it receives the inputs,
    then one output tensor per entry of ``out``, and must fill them. Returns nn Tensor(s)."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"nn.extern: name must be a registered function's name, got {name!r}")
    inputs = [_extern_arg(a, f"nn.extern({name!r}) argument {i}") for i, a in enumerate(args)]
    outs = _out_sinfos(out, "nn.extern")
    call = call_dps_packed(name, inputs, outs if len(outs) > 1 else outs[0])
    return _shaped_like(wrap(call, name.replace(".", "_")), out)


# ---- helpers ----------------------------------------------------------------------------------

def _extern_arg(a: Any, where: str) -> Expr:
    if isinstance(a, Tensor):
        return a.expr
    if isinstance(a, bool):
        return PrimValue(IntImm("bool", int(a)))
    if isinstance(a, int):
        return PrimValue(IntImm("int64", a))
    if isinstance(a, float):
        return PrimValue(FloatImm("float64", a))
    if isinstance(a, str):
        return StringImm(a)
    if isinstance(a, PrimExpr):
        return PrimValue(a)
    if isinstance(a, (list, tuple)):
        return Tuple(tuple(_extern_arg(x, f"{where}[{j}]") for j, x in enumerate(a)))
    raise TypeError(f"{where}: expected an nn.Tensor, int, float, str, PrimExpr or a list of "
                    f"them, got {type(a).__name__}")


def _tir_args(args: Any, what: str, name_hint: str) -> tuple[list[Expr], list[Any]]:
    """The tensors and the trailing integer arguments (PrimExprs, a ShapeExpr) of a
    ``call_tir``."""
    tensors: list[Expr] = []
    tir_vars: list[Any] = []
    for i, a in enumerate(args if isinstance(args, (list, tuple)) else [args]):
        if isinstance(a, Tensor):
            tensors.append(a.expr)
        elif isinstance(a, ShapeExpr):
            tir_vars.extend(a.values)
        elif isinstance(a, PrimExpr):
            tir_vars.append(a)
        else:
            raise TypeError(f"{what}({name_hint!r}): argument {i} must be an nn.Tensor, "
                            f"a ShapeExpr or a PrimExpr, got {type(a).__name__}")
    return tensors, tir_vars


def _out_sinfos(out: Any, where: str) -> list[TensorStructInfo]:
    from workbench.relax.frontend.nn import spec as _spec
    outs = out if isinstance(out, (list, tuple)) else [out]
    if not outs:
        raise ValueError(f"{where}: out is empty; give nn.Tensor.placeholder(shape, dtype)")
    sinfos = []
    for o in outs:
        if isinstance(o, Tensor):
            sinfos.append(o._sinfo)
        elif isinstance(o, _spec.Tensor):
            sinfos.append(TensorStructInfo(o.shape, o.dtype))
        elif isinstance(o, TensorStructInfo):
            sinfos.append(o)
        else:
            raise TypeError(f"{where}: out must be nn.Tensor placeholders "
                            f"(nn.Tensor.placeholder(shape, dtype)), nn.spec.Tensor or "
                            f"TensorStructInfo, got {type(o).__name__}")
    return sinfos


def _shaped_like(result: Any, out: Any) -> Any:
    # One output comes back as a Tensor, a list ``out`` as a list (TVM's wrap_nested).
    if isinstance(out, (list, tuple)):
        return list(result) if isinstance(result, tuple) else [result]
    return result



class ExternModule:
    """TVM's ``nn.ExternModule`` (C/C++ source or object code linked into the compiled model,
    with ``ObjectModule`` and ``SourceModule``). Workbench cannot link such code into a VM
    executable: the names exist so that code naming the type (annotations such as
    ``List[nn.ExternModule]``, ``isinstance`` checks) runs; making one raises. Packed functions
    registered from Python (``nn.extern``) are the supported route."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            f"nn.{type(self).__name__}: external C/C++ modules cannot be linked into a "
            "Workbench VM executable; register a Python packed function "
            "(workbench.register_func) and call it with nn.extern instead")


class ObjectModule(ExternModule):
    """TVM's ``nn.ObjectModule`` (an object file): not supported, see :class:`ExternModule`."""


class SourceModule(ExternModule):
    """TVM's ``nn.SourceModule`` (C/C++/CUDA source): not supported, see
    :class:`ExternModule`."""


__all__ += ["ExternModule", "ObjectModule", "SourceModule"]
