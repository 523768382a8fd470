"""Reductions: sum, mean, max, min, prod over ``axis`` (None: all), with ``keepdims``."""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo
from workbench.tir.expr import IntImm


def _axes_attr(axis: int | Sequence[int] | None) -> tuple[int, ...] | None:
    if axis is None:
        return None
    return (int(axis),) if isinstance(axis, int) else tuple(int(a) for a in axis)


def reduce_sinfo(call: Call, x: TensorStructInfo, axis: Any, keepdims: bool,
                 dtype: str | None = None) -> TensorStructInfo:
    """The struct info of reducing ``x`` over ``axis`` (shared with argmax/argmin)."""
    dtype = x.dtype if dtype is None else dtype
    if x.ndim < 0:
        return TensorStructInfo(None, dtype)
    axes = I.norm_axes(call, axis, x.ndim)
    if x.shape is None:
        return TensorStructInfo(None, dtype, x.ndim if keepdims else x.ndim - len(axes))
    out = []
    for d, s in enumerate(x.values):
        if d not in axes:
            out.append(s)
        elif keepdims:
            out.append(IntImm("int64", 1))
    return TensorStructInfo(tuple(out), dtype)


_REDUCE: dict[str, Callable] = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min,
                                "prod": np.prod}


def _define(name: str, np_fn: Callable) -> Callable:
    full = f"relax.{name}"

    def constructor(x: Expr, axis: int | Sequence[int] | None = None,
                    keepdims: bool = False) -> Call:
        return make_call(full, (x,), {"axis": _axes_attr(axis), "keepdims": bool(keepdims)})
    constructor.__name__ = constructor.__qualname__ = name
    constructor.__doc__ = f"``{name}`` of ``x`` over ``axis`` (all axes when None)."

    @def_infer(full)
    def infer(call: Call, ctx: Any) -> StructInfo:
        x = I.tensor_arg(call, 0, "x")
        return reduce_sinfo(call, x, call.attrs["axis"], call.attrs["keepdims"])

    @def_legalize(full)
    def legalize(bb: Any, call: Call) -> Expr:
        from workbench.topi import reduction
        axis = call.attrs["axis"]
        axis = None if axis is None else list(axis)
        return bb.call_te(getattr(reduction, name), call.args[0], axis, call.attrs["keepdims"],
                          primfunc_name_hint=name)

    @def_numpy(full)
    def numpy_impl(x: np.ndarray, axis: Any = None, keepdims: bool = False) -> np.ndarray:
        return np.asarray(np_fn(x, axis=axis, keepdims=keepdims), dtype=x.dtype)

    return constructor


sum = _define("sum", np.sum)  # noqa: A001 - TVM's name
mean = _define("mean", np.mean)
max = _define("max", np.max)  # noqa: A001
min = _define("min", np.min)  # noqa: A001
prod = _define("prod", np.prod)

__all__ = ["sum", "mean", "max", "min", "prod", "reduce_sinfo"]
