"""Shapes read from tensors at run time: ``tensor_to_shape`` (TVM's ``R.tensor_to_shape``).

The result is a shape value of known rank (the tensor's length) and unknown dims; a
``match_cast`` to ``R.Shape([a, b, ...])`` names its dims as symbolic variables, which then
size the ops that use them (``broadcast_to``, ``reshape``, ...). Legalized to the VM builtin
``vm.builtin.tensor_to_shape``.
"""
from __future__ import annotations

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


__all__ = ["tensor_to_shape"]
