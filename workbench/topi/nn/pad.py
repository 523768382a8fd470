"""Constant padding as its own stage (TVM's ``topi.nn.pad``): convolutions and pools read a
padded tensor so their own bodies stay free of bounds checks."""
from __future__ import annotations

from typing import Any, Sequence

from workbench.te import compute
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.utils import get_const_int


def pad(data: Tensor, pad_before: Sequence[Any], pad_after: Sequence[Any] | None = None,
        pad_value: Any = 0.0, name: str = "PadInput", attrs: dict | None = None) -> Tensor:
    """``data`` with ``pad_before[d]`` / ``pad_after[d]`` elements of ``pad_value`` around
    dimension ``d`` (``pad_after`` defaults to ``pad_before``; missing entries are 0)."""
    n = data.ndim
    pad_after = pad_before if pad_after is None else pad_after
    if len(pad_before) > n or len(pad_after) > n:
        raise ValueError(f"pad: {len(pad_before)}/{len(pad_after)} paddings for a {n}-d tensor")
    before = [get_const_int(p) for p in pad_before] + [0] * (n - len(pad_before))
    after = [get_const_int(p) for p in pad_after] + [0] * (n - len(pad_after))
    if any(p < 0 for p in before + after):
        raise ValueError(f"pad: paddings must be >= 0, got {before} / {after}")
    out_shape = tuple(op.add(s, b + a) for s, b, a in zip(data.shape, before, after))
    value = op.convert(pad_value, op.const(0, data.dtype))
    value = op.cast(data.dtype, value)

    def f(*i: PrimExpr) -> PrimExpr:
        conds, idx = [], []
        for d in range(n):
            k = i[d]
            if before[d]:
                conds.append(k >= before[d])
                k = k - before[d]
            if after[d]:
                conds.append(k < data.shape[d])
            idx.append(k)
        load = data[tuple(idx)]
        # if_then_else is lazy: the load is only evaluated inside the data region.
        return op.if_then_else(op.all(*conds), load, value) if conds else load
    return compute(out_shape, f, name=name, tag="injective,pad", attrs=attrs)
