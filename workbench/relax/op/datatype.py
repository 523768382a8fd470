"""``astype``: elementwise dtype conversion."""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.ir import dtype as dt
from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo


def astype(x: Expr, dtype: str) -> Call:
    """``x`` converted to ``dtype``."""
    return make_call("relax.astype", (x,), {"dtype": dt.normalize(dtype)})


@def_infer("relax.astype")
def _infer_astype(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "x")
    return TensorStructInfo(x.shape, call.attrs["dtype"], x.ndim)


@def_legalize("relax.astype")
def _legalize_astype(bb: Any, call: Call) -> Expr:
    from workbench.topi.math import cast
    return bb.call_te(cast, call.args[0], call.attrs["dtype"], primfunc_name_hint="cast")


@def_numpy("relax.astype")
def _numpy_astype(x: np.ndarray, dtype: str) -> np.ndarray:
    return x.astype(dtype)


__all__ = ["astype"]
