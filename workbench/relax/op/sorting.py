"""Ordering along an axis: ``cumsum``, ``cumprod`` and ``topk`` (TVM's ``relax.op`` names;
the kernels are reductions, see :mod:`workbench.topi.sort`)."""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from workbench.tir.expr import IntImm


def cumsum(data: Expr, axis: int = 0, exclusive: bool = False, reverse: bool = False) -> Call:
    """Running sums along ``axis`` (``exclusive``: without the element itself; ``reverse``:
    from the end -- ONNX CumSum's attributes)."""
    return make_call("relax.cumsum", (data,), {"axis": int(axis), "exclusive": bool(exclusive),
                                               "reverse": bool(reverse)})


def cumprod(data: Expr, axis: int = 0, exclusive: bool = False, reverse: bool = False) -> Call:
    """Running products along ``axis`` (see :func:`cumsum`)."""
    return make_call("relax.cumprod", (data,), {"axis": int(axis),
                                                "exclusive": bool(exclusive),
                                                "reverse": bool(reverse)})


def topk(data: Expr, k: int = 1, axis: int = -1, ret_type: str = "both",
         largest: bool = True, dtype: str = "int64") -> Call:
    """The ``k`` largest (``largest=False``: smallest) elements along ``axis``, in order, ties
    to the lower index: ``(values, indices)`` for ``ret_type="both"``, else one of them."""
    if ret_type not in ("both", "values", "indices"):
        raise ValueError(f"topk: ret_type must be 'both', 'values' or 'indices', got "
                         f"{ret_type!r}")
    return make_call("relax.topk", (data,), {"k": int(k), "axis": int(axis),
                                             "ret_type": ret_type, "largest": bool(largest),
                                             "dtype": dtype})


def _infer_scan(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "data")
    if x.ndim != -1:
        I.norm_axis(call, call.attrs["axis"], x.ndim)
    return x


def_infer("relax.cumsum")(_infer_scan)
def_infer("relax.cumprod")(_infer_scan)


@def_infer("relax.topk")
def _infer_topk(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "data")
    a = call.attrs
    if x.shape is None:
        values = TensorStructInfo(None, x.dtype, x.ndim)
        indices = TensorStructInfo(None, a["dtype"], x.ndim)
    else:
        axis = I.norm_axis(call, a["axis"], x.ndim)
        n = I.const_int(x.values[axis])
        if n is not None and a["k"] > n:
            raise I.error(call, f"k={a['k']} is larger than axis {axis} of data "
                                f"{I.dims_text(x.values)}")
        shape = tuple(x.values[:axis]) + (IntImm("int64", a["k"]),) + tuple(x.values[axis + 1:])
        values, indices = TensorStructInfo(shape, x.dtype), TensorStructInfo(shape, a["dtype"])
    if a["ret_type"] == "values":
        return values
    if a["ret_type"] == "indices":
        return indices
    return TupleStructInfo((values, indices))


def _legalize_scan(kind: str):
    def legalize(bb: Any, call: Call) -> Expr:
        from workbench.topi import sort
        a = call.attrs
        return bb.call_te(getattr(sort, kind), call.args[0], a["axis"], a["exclusive"],
                          a["reverse"], primfunc_name_hint=kind)
    return legalize


def_legalize("relax.cumsum")(_legalize_scan("cumsum"))
def_legalize("relax.cumprod")(_legalize_scan("cumprod"))


@def_legalize("relax.topk")
def _legalize_topk(bb: Any, call: Call) -> Expr:
    from workbench.relax.expr import TupleGetItem
    from workbench.topi.sort import topk as te_topk
    a = call.attrs
    both = bb.call_te(te_topk, call.args[0], a["k"], a["axis"], a["largest"], a["dtype"],
                      primfunc_name_hint="topk")
    if a["ret_type"] == "both":
        return both
    return TupleGetItem(bb.emit(both), 0 if a["ret_type"] == "values" else 1)


def _np_scan(ufunc: Any):
    def impl(x: np.ndarray, axis: int, exclusive: bool, reverse: bool) -> np.ndarray:
        y = np.flip(x, axis) if reverse else x
        out = ufunc.accumulate(y, axis=axis, dtype=x.dtype)
        if exclusive:
            unit = np.full_like(np.take(out, [0], axis=axis), ufunc.identity)
            out = np.concatenate([unit, np.delete(out, -1, axis=axis)], axis=axis)
        return np.flip(out, axis) if reverse else out
    return impl


def_numpy("relax.cumsum")(_np_scan(np.add))
def_numpy("relax.cumprod")(_np_scan(np.multiply))


@def_numpy("relax.topk")
def _numpy_topk(x: np.ndarray, k: int, axis: int, ret_type: str, largest: bool,
                dtype: str) -> Any:
    order = np.argsort(-x if largest else x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    values = np.take_along_axis(x, idx, axis=axis)
    idx = idx.astype(dtype)
    if ret_type == "values":
        return values
    if ret_type == "indices":
        return idx
    return values, idx


__all__ = ["cumsum", "cumprod", "topk"]
