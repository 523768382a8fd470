"""``where`` (select with broadcasting) and ``argmax`` / ``argmin`` (int64 indices)."""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.op.statistical import reduce_sinfo
from workbench.relax.struct_info import StructInfo


def where(condition: Expr, x1: Expr, x2: Expr) -> Call:
    """``x1`` where ``condition`` is true, else ``x2``; the three broadcast together."""
    return make_call("relax.where", (condition, x1, x2))


@def_infer("relax.where")
def _infer_where(call: Call, ctx: Any) -> StructInfo:
    c = I.tensor_arg(call, 0, "condition")
    a, b = I.tensor_arg(call, 1, "x1"), I.tensor_arg(call, 2, "x2")
    if c.dtype and c.dtype != "bool":
        raise I.error(call, f"condition must be a bool tensor, got dtype {c.dtype}")
    named = [("condition", c), ("x1", a), ("x2", b)]
    dtype = I.same_dtype(call, named[1:])
    shape = I.broadcast_shapes(call, named)
    ndim = -1 if min(s.ndim for _, s in named) < 0 else max(s.ndim for _, s in named)
    return I.tensor(shape, dtype, ndim)


@def_legalize("relax.where")
def _legalize_where(bb: Any, call: Call) -> Expr:
    from workbench.topi.broadcast import where as te_where
    return bb.call_te(te_where, *call.args, primfunc_name_hint="where")


@def_numpy("relax.where")
def _numpy_where(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(c, a, b).astype(a.dtype)


def _define(name: str) -> Any:
    full = f"relax.{name}"

    def constructor(x: Expr, axis: int | None = None, keepdims: bool = False) -> Call:
        return make_call(full, (x,), {"axis": None if axis is None else int(axis),
                                      "keepdims": bool(keepdims)})
    constructor.__name__ = constructor.__qualname__ = name
    constructor.__doc__ = (f"int64 index of the first {name[3:]}imum of ``x`` along ``axis`` "
                           "(of the flattened ``x`` when None).")

    @def_infer(full)
    def infer(call: Call, ctx: Any) -> StructInfo:
        x = I.tensor_arg(call, 0, "x")
        return reduce_sinfo(call, x, call.attrs["axis"], call.attrs["keepdims"], "int64")

    @def_legalize(full)
    def legalize(bb: Any, call: Call) -> Expr:
        from workbench.topi import reduction
        from workbench.topi.math import cast

        def te_arg(x: Any, axis: Any, keepdims: bool) -> Any:
            return cast(getattr(reduction, name)(x, axis, keepdims), "int64")
        return bb.call_te(te_arg, call.args[0], call.attrs["axis"], call.attrs["keepdims"],
                          primfunc_name_hint=name)

    @def_numpy(full)
    def numpy_impl(x: np.ndarray, axis: Any = None, keepdims: bool = False) -> np.ndarray:
        fn = np.argmax if name == "argmax" else np.argmin
        out = fn(x, axis=axis)
        if keepdims:
            out = np.expand_dims(out, axis) if axis is not None else out.reshape((1,) * x.ndim)
        return np.asarray(out, dtype="int64")

    return constructor


argmax = _define("argmax")
argmin = _define("argmin")

__all__ = ["where", "argmax", "argmin"]
