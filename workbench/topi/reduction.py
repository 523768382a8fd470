"""Reductions along axes: sum / max / min / prod / mean / argmax / argmin (TVM's topi names).

``axis`` is ``None`` (all axes), an int or a sequence of ints (negative counts from the end);
``keepdims`` keeps reduced axes with extent 1. A full reduction without keepdims gives a 0-d
tensor. Outputs are named ``<input>_red`` with tag ``comm_reduce``; argmax/argmin first compute
an (index, value) pair with a two-value reducer (``<input>_red_temp``), then keep the index.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.utils import normalize_axes, prod as _prod

Axis = int | Sequence[int] | None


def _reduce_plan(data: Tensor, axis: Axis, keepdims: bool, what: str):
    axes = normalize_axes(axis, data.ndim, what)
    out_shape = []
    for d, s in enumerate(data.shape):
        if d not in axes:
            out_shape.append(s)
        elif keepdims:
            out_shape.append(op.const(1, s.dtype))
    return axes, tuple(out_shape)


def _input_index(data: Tensor, axes: list[int], keepdims: bool, out_idx: Sequence[PrimExpr],
                 red: Sequence[Any]) -> tuple:
    """The element of ``data`` for output index ``out_idx`` and reduce axes ``red``."""
    idx, k, o = [], 0, 0
    for d in range(data.ndim):
        if d in axes:
            idx.append(red[k])
            k += 1
            o += int(keepdims)
        else:
            idx.append(out_idx[o])
            o += 1
    return tuple(idx)


def _comm_reduce(data: Tensor, axis: Axis, keepdims: bool, reducer: Callable, what: str,
                 name: str | None = None) -> Tensor:
    axes, out_shape = _reduce_plan(data, axis, keepdims, what)
    red = [te.reduce_axis((0, data.shape[d]), name=f"k{d}") for d in axes]

    def f(*i: PrimExpr) -> PrimExpr:
        src = data[_input_index(data, axes, keepdims, i, red)]
        return reducer(src, axis=red) if red else src
    return te.compute(out_shape, f, name=name or f"{data.name}_red", tag="comm_reduce")


def sum(data: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Sum over ``axis``."""
    return _comm_reduce(data, axis, keepdims, te.sum, "sum")


def max(data: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Maximum over ``axis``."""
    return _comm_reduce(data, axis, keepdims, te.max, "max")


def min(data: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Minimum over ``axis``."""
    return _comm_reduce(data, axis, keepdims, te.min, "min")


_prod_reducer = te.comm_reducer(lambda x, y: x * y, lambda t: op.const(1, t), name="prod")


def prod(data: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Product over ``axis``."""
    return _comm_reduce(data, axis, keepdims, _prod_reducer, "prod")


def all(data: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Logical and over ``axis`` (a bool tensor)."""
    r = te.comm_reducer(op.logical_and, lambda t: op.const(True, t), name="all")
    return _comm_reduce(data, axis, keepdims, r, "all")


def any(data: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Logical or over ``axis`` (a bool tensor)."""
    r = te.comm_reducer(op.logical_or, lambda t: op.const(False, t), name="any")
    return _comm_reduce(data, axis, keepdims, r, "any")


def mean(data: Tensor, axis: Axis = None, keepdims: bool = False) -> Tensor:
    """Arithmetic mean over ``axis``: a sum stage then a divide stage (as TVM legalizes it)."""
    axes = normalize_axes(axis, data.ndim, "mean")
    total = sum(data, axis, keepdims)
    count = _prod([data.shape[d] for d in axes])
    return te.compute(total.shape, lambda *i: op.div(total[i], op.cast(data.dtype, count)),
                      name="T_divide", tag="elemwise")


def _idx_reducer(bigger: Callable[[PrimExpr, PrimExpr], PrimExpr], name: str,
                 extreme: Callable[[str], PrimExpr]):
    """A two-value reducer over (index, value); ties keep the smaller index (numpy's rule)."""
    def fcombine(x, y):
        lhs_idx, lhs_val = x
        rhs_idx, rhs_val = y
        keep_lhs = op.logical_or(bigger(lhs_val, rhs_val),
                                 op.logical_and(op.eq(lhs_val, rhs_val), lhs_idx < rhs_idx))
        return (op.select(keep_lhs, lhs_idx, rhs_idx),
                op.select(keep_lhs, lhs_val, rhs_val))

    def fidentity(idx_t: str, val_t: str):
        return op.const(-1, idx_t), extreme(val_t)
    return te.comm_reducer(fcombine, fidentity, name=name)


_argmax = _idx_reducer(op.gt, "argmax", op.min_value)
_argmin = _idx_reducer(op.lt, "argmin", op.max_value)


def _arg_reduce(data: Tensor, axis: Axis, keepdims: bool, reducer: Callable, what: str) -> Tensor:
    axes, out_shape = _reduce_plan(data, axis, keepdims, what)
    red = [te.reduce_axis((0, data.shape[d]), name=f"k{d}") for d in axes]

    def f(*i: PrimExpr):
        src = data[_input_index(data, axes, keepdims, i, red)]
        # The index over several reduced axes is the row-major flat index (numpy's axis=None).
        flat: PrimExpr = op.const(0, "int32")
        for d, k in zip(axes, red):
            flat = op.add(op.mul(flat, op.cast("int32", data.shape[d])), op.cast("int32", k.var))
        return reducer((flat, src), axis=red)
    temp = te.compute(out_shape, f, name=f"{data.name}_red_temp", tag="comm_reduce_idx")
    idx = temp[0]
    return te.compute(out_shape, lambda *i: idx[i], name=f"{data.name}_red",
                      tag="comm_reduce_idx")


def argmax(data: Tensor, axis: Axis = None, keepdims: bool = False,
           select_last_index: bool = False) -> Tensor:
    """int32 index of the first maximum over ``axis`` (flat index over several axes)."""
    if select_last_index:
        raise NotImplementedError("argmax: select_last_index=True is not supported")
    return _arg_reduce(data, axis, keepdims, _argmax, "argmax")


def argmin(data: Tensor, axis: Axis = None, keepdims: bool = False,
           select_last_index: bool = False) -> Tensor:
    """int32 index of the first minimum over ``axis`` (flat index over several axes)."""
    if select_last_index:
        raise NotImplementedError("argmin: select_last_index=True is not supported")
    return _arg_reduce(data, axis, keepdims, _argmin, "argmin")
