"""Layer normalization (TVM's ``topi.nn.layer_norm``).

As in TVM, one reduction stage ``T_layer_norm_red_temp`` accumulates the sum and the sum of
squares together (a two-value reducer, one pass over the data); ``T_layer_norm`` then computes
``(x - mean) * rsqrt(var + epsilon) * gamma + beta`` with ``var = E[d^2] - E[d]^2``.

The sums are of ``d = x - s``, shifted by each row's first element ``s``: ``E[x^2] - mean^2``
in float32 loses the variance when the mean is large against the spread (a row of mean 100
and deviation 1 keeps about 3 digits of its variance); shifted by a value of the row, the two
terms are of the spread's size (the "shifted data" algorithm) and one pass still suffices.
"""
from __future__ import annotations

from typing import Sequence

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.utils import normalize_axes, prod, shape_str

_sum_pair = te.comm_reducer(lambda x, y: (x[0] + y[0], x[1] + y[1]),
                            lambda t0, t1: (op.const(0, t0), op.const(0, t1)),
                            name="sum_and_square_sum")


def layer_norm(data: Tensor, gamma: Tensor | None, beta: Tensor | None,
               axis: int | Sequence[int] = -1, epsilon: float = 1e-5) -> Tensor:
    """Normalize over ``axis`` (the trailing axes, typically); ``gamma``/``beta`` have the
    shape of those axes (``None``: 1 and 0)."""
    axes = normalize_axes(axis, data.ndim, "layer_norm")
    norm_shape = tuple(data.shape[d] for d in axes)
    for name, t in (("gamma", gamma), ("beta", beta)):
        if t is not None and t.ndim != len(axes):
            raise ValueError(f"layer_norm: {name} {shape_str(t.shape)} must have the shape of "
                             f"the normalized axes {shape_str(norm_shape)}")
    kept = [d for d in range(data.ndim) if d not in axes]
    red = [te.reduce_axis((0, data.shape[d]), name=f"k{d}") for d in axes]

    def full_index(i: Sequence[PrimExpr], r: Sequence) -> tuple:
        idx, it_i, it_r = [], iter(i), iter(r)
        for d in range(data.ndim):
            idx.append(next(it_r) if d in axes else next(it_i))
        return tuple(idx)

    zero = [0] * len(axes)

    def temp_f(*i: PrimExpr):
        d = data[full_index(i, red)] - data[full_index(i, zero)]
        return _sum_pair((d, d * d), axis=red)
    temp = te.compute(tuple(data.shape[d] for d in kept), temp_f,
                      name="T_layer_norm_red_temp", tag="comm_reduce")
    x_sum, x2_sum = temp
    count = op.cast(data.dtype, prod(norm_shape))

    def out_f(*i: PrimExpr) -> PrimExpr:
        outer = tuple(i[d] for d in kept)
        inner = tuple(i[d] for d in axes)
        shift = data[full_index(outer, zero)]
        mean = x_sum[outer] / count              # of x - shift
        var = op.max(x2_sum[outer] / count - mean * mean, op.const(0, data.dtype))
        y = (data[i] - shift - mean) * op.rsqrt(var + op.const(epsilon, data.dtype))
        if gamma is not None:
            y = y * gamma[inner]
        if beta is not None:
            y = y + beta[inner]
        return y
    return te.compute(data.shape, out_f, name="T_layer_norm", tag="injective")
