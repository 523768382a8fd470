"""Gathers and scatters by index tensors (TVM's ``topi.gather``, ``gather_nd``,
``scatter_elements``, ``scatter_nd``).

Indices may be negative (counting from the end of their dimension, as in ONNX). A scatter is
written as a gather over the updates: each output element reduces over the update positions
that land on it (``O(output x updates along the axis)`` work, no write conflicts), so it stays
one pure ``te.compute`` per stage. With ``reduction="none"`` the last update landing on an
element wins (the position's order), as onnxruntime does.
"""
from __future__ import annotations

from typing import Any, Sequence

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.utils import normalize_axis

REDUCTIONS = ("none", "add", "mul", "max", "min")


def _wrap(k: PrimExpr, extent: PrimExpr) -> PrimExpr:
    k = op.cast(extent.dtype, k)
    return op.if_then_else(k < 0, k + extent, k)


def gather(data: Tensor, axis: int, indices: Tensor) -> Tensor:
    """``out[i] = data[i with i[axis] = indices[i]]`` (ONNX ``GatherElements``,
    ``np.take_along_axis``); ``out`` has the indices' shape."""
    axis = normalize_axis(axis, data.ndim, "gather")
    if indices.ndim != data.ndim:
        raise ValueError(f"gather: indices are {indices.ndim}-d, data {data.ndim}-d")

    def f(*i: PrimExpr) -> PrimExpr:
        k = _wrap(indices[i], data.shape[axis])
        return data[i[:axis] + (k,) + i[axis + 1:]]
    return te.compute(indices.shape, f, name="T_gather", tag="injective")


def gather_nd(data: Tensor, indices: Tensor, batch_dims: int = 0) -> Tensor:
    """ONNX ``GatherND``: ``indices`` of shape ``(B..., M..., K)`` pick the slices
    ``data[b..., indices[b..., m..., :], ...]``; the output is ``(B..., M..., data.shape[b +
    K:])``."""
    k = indices.shape[-1]
    k = int(getattr(k, "value", k))
    b = batch_dims
    if b + k > data.ndim:
        raise ValueError(f"gather_nd: {k} index components after {b} batch dims for a "
                         f"{data.ndim}-d tensor")
    mid = indices.ndim - 1 - b
    out_shape = tuple(indices.shape[:-1]) + tuple(data.shape[b + k:])

    def f(*i: PrimExpr) -> PrimExpr:
        head = i[:b + mid]
        picked = [_wrap(indices[head + (op.const(c, "int64"),)], data.shape[b + c])
                  for c in range(k)]
        return data[tuple(i[:b]) + tuple(picked) + tuple(i[b + mid:])]
    return te.compute(out_shape, f, name="T_gather_nd", tag="injective")


def _identity(reduction: str, dtype: str) -> PrimExpr:
    if reduction == "mul":
        return op.const(1, dtype)
    if reduction == "max":
        return op.min_value(dtype)
    if reduction == "min":
        return op.max_value(dtype)
    return op.const(0, dtype)


def _combine(reduction: str, a: PrimExpr, b: PrimExpr) -> PrimExpr:
    return {"add": lambda: a + b, "mul": lambda: a * b, "max": lambda: op.max(a, b),
            "min": lambda: op.min(a, b)}[reduction]()


_prod = te.comm_reducer(lambda a, b: a * b, lambda dtype: op.const(1, dtype), name="prod")


def _reducer(reduction: str) -> Any:
    return {"add": te.sum, "mul": _prod, "max": te.max, "min": te.min}[reduction]


def _scatter(data: Tensor, updates: Tensor, positions: Sequence[te.AxisIterVar],
             match: Any, update_at: Any, last_key: Any, reduction: str, name: str) -> Tensor:
    """The shared scatter: ``match(i)`` says whether update position ``positions`` lands on
    output ``i``; ``update_at(i)`` reads that update; ``last_key`` orders positions."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"{name}: reduction must be one of {REDUCTIONS}, got {reduction!r}")
    idx_dtype = "int64"
    hits = te.compute(data.shape, lambda *i: te.max(
        op.if_then_else(match(i), op.cast(idx_dtype, last_key()), op.const(-1, idx_dtype)),
        axis=list(positions)), name=f"{name}_last")
    if reduction == "none":
        return te.compute(data.shape, lambda *i: op.if_then_else(
            hits[i] >= 0, update_at(i, hits[i]), data[i]), name=name, tag="injective")
    folded = te.compute(data.shape, lambda *i: _reducer(reduction)(
        op.if_then_else(match(i), update_at(i, None), _identity(reduction, data.dtype)),
        axis=list(positions)), name=f"{name}_{reduction}")
    return te.compute(data.shape, lambda *i: op.if_then_else(
        hits[i] >= 0, _combine(reduction, data[i], folded[i]), data[i]), name=name,
        tag="injective")


def scatter_elements(data: Tensor, indices: Tensor, updates: Tensor, axis: int = 0,
                     reduction: str = "none") -> Tensor:
    """ONNX ``ScatterElements``: ``out = data`` with ``out[j with j[axis] = indices[j]]``
    set to (or combined by ``reduction`` with) ``updates[j]`` for every position ``j`` of
    the indices."""
    axis = normalize_axis(axis, data.ndim, "scatter_elements")
    r = te.reduce_axis((0, indices.shape[axis]), name="r")

    def position(i: tuple) -> tuple:
        return tuple(i[:axis]) + (r,) + tuple(i[axis + 1:])

    def match(i: tuple) -> PrimExpr:
        inside = [i[d] < indices.shape[d] for d in range(data.ndim) if d != axis]
        hit = op.if_then_else(op.all(*inside) if inside else op.const(True),
                              _wrap(indices[position(i)], data.shape[axis]) == i[axis],
                              op.const(False))
        return hit

    def update_at(i: tuple, at: PrimExpr | None) -> PrimExpr:
        j = position(i) if at is None else tuple(i[:axis]) + (at,) + tuple(i[axis + 1:])
        return updates[j]
    return _scatter(data, updates, [r], match, update_at, lambda: r, reduction,
                    "T_scatter_elements")


def scatter_nd(data: Tensor, indices: Tensor, updates: Tensor,
               reduction: str = "none") -> Tensor:
    """ONNX ``ScatterND``: ``indices`` of shape ``(M..., K)`` address slices
    ``data[indices[m, :]]`` that are set to (or combined with) ``updates[m, ...]``."""
    k = indices.shape[-1]
    k = int(getattr(k, "value", k))
    lead = indices.shape[:-1]
    rs = [te.reduce_axis((0, n), name=f"r{d}") for d, n in enumerate(lead)]

    def match(i: tuple) -> PrimExpr:
        conds = [_wrap(indices[tuple(rs) + (op.const(c, "int64"),)],
                       data.shape[c]) == i[c] for c in range(k)]
        return op.all(*conds)

    def flat() -> PrimExpr:
        out: PrimExpr = op.const(0, "int64")
        for r, n in zip(rs, lead):
            out = out * op.cast("int64", n) + op.cast("int64", r)
        return out

    def update_at(i: tuple, at: PrimExpr | None) -> PrimExpr:
        if at is None:
            return updates[tuple(rs) + tuple(i[k:])]
        pos, rest = [], at
        for n in reversed(lead):
            pos.append(op.floormod(rest, op.cast("int64", n)))
            rest = op.floordiv(rest, op.cast("int64", n))
        return updates[tuple(reversed(pos)) + tuple(i[k:])]
    return _scatter(data, updates, rs, match, update_at, flat, reduction, "T_scatter_nd")


__all__ = ["gather", "gather_nd", "scatter_elements", "scatter_nd", "REDUCTIONS"]
