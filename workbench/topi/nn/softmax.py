"""Softmax and log-softmax along one axis, in TVM's stage form.

``softmax``: ``T_softmax_maxelem`` (max over the axis), ``T_softmax_exp`` (exp(x - max)),
``T_softmax_expsum`` (sum of those), ``T_softmax_norm`` (exp / sum). Subtracting the max
keeps exp from overflowing. ``log_softmax``: max, sum of exp(x - max), then
``x - max - log(sum)``.
"""
from __future__ import annotations

from typing import Sequence

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.utils import normalize_axis


def _reduced(x: Tensor, axis: int) -> tuple:
    return x.shape[:axis] + x.shape[axis + 1:]


def _insert(i: Sequence[PrimExpr], axis: int, k) -> tuple:
    return tuple(i[:axis]) + (k,) + tuple(i[axis:])


def _drop(i: Sequence[PrimExpr], axis: int) -> tuple:
    return tuple(i[:axis]) + tuple(i[axis + 1:])


def _max_elem(x: Tensor, axis: int) -> Tensor:
    k = te.reduce_axis((0, x.shape[axis]), name="k")
    return te.compute(_reduced(x, axis), lambda *i: te.max(x[_insert(i, axis, k)], axis=k),
                      name="T_softmax_maxelem")


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``."""
    axis = normalize_axis(axis, x.ndim, "softmax")
    max_elem = _max_elem(x, axis)
    exp = te.compute(x.shape, lambda *i: op.exp(x[i] - max_elem[_drop(i, axis)]),
                     name="T_softmax_exp")
    k = te.reduce_axis((0, x.shape[axis]), name="k")
    expsum = te.compute(_reduced(x, axis), lambda *i: te.sum(exp[_insert(i, axis, k)], axis=k),
                        name="T_softmax_expsum")
    return te.compute(x.shape, lambda *i: exp[i] / expsum[_drop(i, axis)],
                      name="T_softmax_norm", tag="softmax_output", attrs={"axis": axis})


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``axis``."""
    axis = normalize_axis(axis, x.ndim, "log_softmax")
    max_elem = _max_elem(x, axis)
    k = te.reduce_axis((0, x.shape[axis]), name="k")

    def expsum_f(*i: PrimExpr) -> PrimExpr:
        return te.sum(op.exp(x[_insert(i, axis, k)] - max_elem[i]), axis=k)
    expsum = te.compute(_reduced(x, axis), expsum_f, name="T_softmax_expsum")
    return te.compute(x.shape,
                      lambda *i: x[i] - max_elem[_drop(i, axis)] - op.log(expsum[_drop(i, axis)]),
                      name="T_log_softmax", tag="log_softmax_output", attrs={"axis": axis})
