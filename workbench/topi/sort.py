"""Ordering along an axis: ``cumsum`` / ``cumprod`` and ``topk`` (TVM's ``topi.cumsum``,
``topi.topk``), as pure reductions.

Each output element reduces over the axis (``O(n^2)`` work for an axis of ``n``): a running
sum is the sum of the elements at or before it, and an element's place in the order is the
number of elements that come before it (greater -- or smaller --, ties broken by the lower
index first, the order ONNX's TopK specifies). That keeps both one ``te.compute`` stage each,
which the default schedules handle, at the cost of quadratic work on long axes.
"""
from __future__ import annotations

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.utils import normalize_axis

_prod = te.comm_reducer(lambda a, b: a * b, lambda dtype: op.const(1, dtype), name="prod")


def _scan(data: Tensor, axis: int, exclusive: bool, reverse: bool, reducer: object,
          name: str) -> Tensor:
    axis = normalize_axis(axis, data.ndim, name)
    r = te.reduce_axis((0, data.shape[axis]), name="r")

    def f(*i: PrimExpr) -> PrimExpr:
        k = i[axis]
        if reverse:
            cond = r > k if exclusive else r >= k
        else:
            cond = r < k if exclusive else r <= k
        src = tuple(i[:axis]) + (r,) + tuple(i[axis + 1:])
        return reducer(data[src], axis=[r], where=cond)
    return te.compute(data.shape, f, name=f"T_{name}", tag=name)


def cumsum(data: Tensor, axis: int = 0, exclusive: bool = False,
           reverse: bool = False) -> Tensor:
    """Running sums along ``axis`` (``exclusive``: without the element itself; ``reverse``:
    from the end)."""
    return _scan(data, axis, exclusive, reverse, te.sum, "cumsum")


def cumprod(data: Tensor, axis: int = 0, exclusive: bool = False,
            reverse: bool = False) -> Tensor:
    """Running products along ``axis`` (see :func:`cumsum`)."""
    return _scan(data, axis, exclusive, reverse, _prod, "cumprod")


def topk(data: Tensor, k: int, axis: int = -1, largest: bool = True,
         index_dtype: str = "int64") -> tuple[Tensor, Tensor]:
    """The ``k`` largest (or smallest) elements along ``axis`` in order, and their indices:
    ``(values, indices)`` with ``k`` in place of the axis' extent."""
    axis = normalize_axis(axis, data.ndim, "topk")
    n = data.shape[axis]
    r = te.reduce_axis((0, n), name="r")

    def at(i: tuple, pos: PrimExpr) -> tuple:
        return tuple(i[:axis]) + (pos,) + tuple(i[axis + 1:])

    def before(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        return a > b if largest else a < b

    def rank(*i: PrimExpr) -> PrimExpr:
        mine, other = data[i], data[at(i, r)]
        ahead = op.logical_or(before(other, mine),
                              op.logical_and(other == mine, r < i[axis]))
        return te.sum(op.cast(index_dtype, ahead), axis=[r])
    place = te.compute(data.shape, rank, name="T_topk_rank")
    out_shape = tuple(data.shape[:axis]) + (op.const(int(k), n.dtype),) + \
        tuple(data.shape[axis + 1:])
    s = te.reduce_axis((0, n), name="s")

    def pick_index(*i: PrimExpr) -> PrimExpr:
        hit = place[at(i, s)] == op.cast(index_dtype, i[axis])
        return te.max(op.if_then_else(hit, op.cast(index_dtype, s),
                                      op.const(-1, index_dtype)), axis=[s])
    indices = te.compute(out_shape, pick_index, name="T_topk_indices")
    values = te.compute(out_shape, lambda *i: data[at(i, op.cast(n.dtype, indices[i]))],
                        name="T_topk_values", tag="injective")
    return values, indices


__all__ = ["cumsum", "cumprod", "topk"]
