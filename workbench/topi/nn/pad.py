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


#: How :func:`pad_mode` maps an output index ``k`` (relative to the data's start) into the data
#: of extent ``n``: "edge" repeats the border, "reflect" mirrors without repeating it (numpy's
#: and ONNX's reflect; pads must be < n), "wrap" repeats the data cyclically.
PAD_MODES = ("constant", "edge", "reflect", "wrap")


def _source_index(k: PrimExpr, n: PrimExpr, mode: str) -> PrimExpr:
    if mode == "edge":
        return op.max(op.min(k, n - 1), 0)
    if mode == "reflect":
        k = op.abs(k)
        return op.if_then_else(k < n, k, 2 * (n - 1) - k)
    return op.floormod(k, n)


def pad_mode(data: Tensor, pad_before: Sequence[Any], pad_after: Sequence[Any],
             mode: str = "constant", pad_value: Any = 0.0, name: str = "PadMode") -> Tensor:
    """``data`` padded by ``pad_before[d]`` / ``pad_after[d]`` (>= 0) elements on each side of
    dimension ``d``: with ``pad_value`` ("constant", as :func:`pad`), or with the data's own
    elements ("edge", "reflect", "wrap": see :data:`PAD_MODES`)."""
    if mode not in PAD_MODES:
        raise ValueError(f"pad_mode: mode must be one of {PAD_MODES}, got {mode!r}")
    if mode == "constant":
        return pad(data, pad_before, pad_after, pad_value, name=name)
    n = data.ndim
    before = [get_const_int(p) for p in pad_before] + [0] * (n - len(pad_before))
    after = [get_const_int(p) for p in pad_after] + [0] * (n - len(pad_after))
    if any(p < 0 for p in before + after):
        raise ValueError(f"pad_mode: paddings must be >= 0, got {before} / {after}")
    out_shape = tuple(op.add(s, b + a) for s, b, a in zip(data.shape, before, after))

    def f(*i: PrimExpr) -> PrimExpr:
        idx = []
        for d in range(n):
            if before[d] or after[d]:
                idx.append(_source_index(i[d] - before[d], data.shape[d], mode))
            else:
                idx.append(i[d])
        return data[tuple(idx)]
    return compute(out_shape, f, name=name, tag="injective,pad")
