"""Shapes known only at run time: ``tensor_to_shape`` (TVM's ``R.tensor_to_shape``) and
``arange`` over symbolic bounds.

The result is a shape value of known rank (the tensor's length) and unknown dims; a
``match_cast`` to ``R.Shape([a, b, ...])`` names its dims as symbolic variables, which then
size the ops that use them (``broadcast_to``, ``reshape``, ...). Legalized to the VM builtin
``vm.builtin.tensor_to_shape``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import ShapeStructInfo, StructInfo


def tensor_to_shape(x: Expr) -> Call:
    """The values of the 1-d integer tensor ``x`` as a shape."""
    return make_call("relax.tensor_to_shape", (x,))


@def_infer("relax.tensor_to_shape")
def _infer_tensor_to_shape(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "x")
    if x.ndim not in (-1, 1) or (x.dtype and not x.dtype.startswith(("int", "uint"))):
        raise I.error(call, f"x must be a 1-d integer tensor, got {I.sinfo_text(x)}")
    n = I.const_int(x.values[0]) if x.shape is not None else None
    return ShapeStructInfo(ndim=-1 if n is None else n)


@def_legalize("relax.tensor_to_shape")
def _legalize_tensor_to_shape(bb: Any, call: Call) -> Expr:
    from workbench.relax.transform.lowered_ops import call_packed
    return call_packed("vm.builtin.tensor_to_shape", [call.args[0]], call.struct_info)


@def_numpy("relax.tensor_to_shape")
def _numpy_tensor_to_shape(x: np.ndarray) -> tuple:
    return tuple(int(v) for v in x.reshape(-1))




# ---- arange ---------------------------------------------------------------------------------------

def arange(start: Any, end: Any = None, step: Any = 1, dtype: str = "int64") -> Call:
    """``[start, start + step, ...)`` up to ``end`` (TVM's ``relax.op.arange``): the bounds
    are numbers or (integer) PrimExprs over the function's symbolic dims, so the length may
    be symbolic (``arange(0, n)`` has ``n`` elements)."""
    from workbench.relax.expr import PrimValue
    if end is None:
        start, end = 0, start
    args = tuple(PrimValue(v if not isinstance(v, np.generic) else v.item())
                 for v in (start, end, step))
    return make_call("relax.arange", args, {"dtype": dtype})


def _arange_length(start: Any, end: Any, step: Any) -> Any:
    from workbench.tir import op as tir_op
    from workbench.tir.arith.analyzer import Analyzer
    from workbench.tir.expr import FloatImm, IntImm
    vals = (start, end, step)
    if any(isinstance(v, FloatImm) for v in vals):
        s, e, d = (float(v.value) for v in vals)  # float bounds must be constants
        return IntImm("int64", max(int(math.ceil((e - s) / d)), 0))
    d = I.const_int(step)
    if d is None or d == 0:
        raise ValueError("arange: step must be a non-zero constant")
    span = tir_op.sub(end, start) if d > 0 else tir_op.sub(start, end)
    size = tir_op.floordiv(tir_op.add(span, IntImm("int64", abs(d) - 1)), IntImm("int64", abs(d)))
    size = Analyzer().simplify(size)
    if I.const_int(size) is not None and I.const_int(size) < 0:
        size = IntImm("int64", 0)
    return size


@def_infer("relax.arange")
def _infer_arange(call: Call, ctx: Any) -> StructInfo:
    from workbench.relax.struct_info import TensorStructInfo
    start, end, step = (a.value for a in call.args)
    try:
        n = _arange_length(start, end, step)
    except ValueError as err:
        raise I.error(call, str(err)) from None
    return TensorStructInfo((n,), call.attrs["dtype"])


def _te_arange(start: Any, end: Any, step: Any, n: Any, dtype: str) -> Any:
    from workbench import te
    from workbench.tir import op as tir_op
    return te.compute((n,), lambda i: tir_op.cast(dtype, tir_op.add(
        tir_op.cast(dtype, start), tir_op.mul(tir_op.cast(dtype, i), tir_op.cast(dtype, step)))),
        name="T_arange", tag="injective")


@def_legalize("relax.arange")
def _legalize_arange(bb: Any, call: Call) -> Expr:
    start, end, step = (a.value for a in call.args)
    n = call.struct_info.values[0]
    return bb.call_te(_te_arange, start, end, step, n, call.attrs["dtype"],
                      primfunc_name_hint="arange")


@def_numpy("relax.arange")
def _numpy_arange(start: Any, end: Any, step: Any, dtype: str) -> np.ndarray:
    return np.arange(start, end, step).astype(dtype)


__all__ = ["tensor_to_shape", "arange"]
