"""ONNX converters: tensor sequences (SequenceConstruct, SequenceEmpty, SequenceInsert,
SequenceErase, SequenceAt, SequenceLength, SplitToSequence, ConcatFromSequence) and optionals
(Optional, OptionalHasElement, OptionalGetElement).

An optional is an import-time :class:`Opt`: whether it holds a value is known when the model
is imported.

A sequence is an import-time :class:`Seq` of its items (Relax tensors): its length is always
known when the model is imported. Positions are known values (constants, initializers) or
run-time tensors; a run-time position picks among items of one shape and dtype with ``take``
/ ``where`` (a result whose shape would depend on the position is refused). A sequence
returned by the graph becomes a tuple.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Expr, TupleGetItem
from workbench.relax.frontend.onnx._registry import Unavailable, converter
from workbench.relax.struct_info import TensorStructInfo


@dataclass(frozen=True)
class Seq:
    """An ONNX sequence value: its items (Relax expressions, or :class:`Unavailable` ones)."""

    items: tuple


def _seq(node: Any, v: Any, k: int = 0) -> Seq:
    if not isinstance(v, Seq):
        raise NotImplementedError(f"{node.op_type}: input {k} is not a sequence")
    return v


def _position(imp: Any, v: Any) -> int | Expr:
    """A known position as an int, else the run-time scalar tensor."""
    k = imp.known(v)
    if k is not None:
        return int(k.reshape(-1)[0])
    return imp.expr(v)


def _same_items(node: Any, items: tuple) -> None:
    """Items picked at a run-time position must share shape and dtype (the result's type)."""
    sinfos = [getattr(it, "struct_info", None) for it in items]
    first = sinfos[0] if sinfos else None
    ok = isinstance(first, TensorStructInfo) and first.shape is not None and all(
        isinstance(s, TensorStructInfo) and s.dtype == first.dtype and s.shape is not None
        and [str(d) for d in s.values] == [str(d) for d in first.values] for s in sinfos)
    if not ok:
        shapes = ", ".join(str(getattr(s, "values", "?")) for s in sinfos)
        raise NotImplementedError(
            f"{node.op_type} at a position computed at run time over items of different "
            f"shapes or dtypes ({shapes}): the result's shape would depend on the data")


def _normalized(imp: Any, pos: Expr, n: int) -> Expr:
    """``pos`` (a 0-d or 1-element int tensor, may be negative) as ``0 <= p <= n``."""
    pos = imp.emit(R.reshape(pos, []))
    dtype = pos.struct_info.dtype
    size = imp.expr(np.asarray(n, dtype=dtype))
    zero = imp.expr(np.asarray(0, dtype=dtype))
    return imp.emit(R.where(R.less(pos, zero), R.add(pos, size), pos))


def _index(imp: Any, i: int, dtype: str) -> Expr:
    return imp.expr(np.asarray(i, dtype=dtype))


@converter("SequenceConstruct")
def _construct(imp: Any, node: Any, inputs: list, attrs: dict) -> list:
    return [Seq(tuple(imp.expr(v) for v in inputs))]


@converter("SequenceEmpty")
def _empty(imp: Any, node: Any, inputs: list, attrs: dict) -> list:
    return [Seq(())]


@converter("SequenceLength")
def _length(imp: Any, node: Any, inputs: list, attrs: dict) -> np.ndarray:
    return np.asarray(len(_seq(node, inputs[0]).items), dtype="int64")


@converter("SequenceAt")
def _at(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    items = _seq(node, inputs[0]).items
    pos = _position(imp, inputs[1])
    if isinstance(pos, int):
        if not -len(items) <= pos < len(items):
            raise IndexError(f"SequenceAt: position {pos} outside a sequence of "
                             f"{len(items)}")
        return items[pos]
    _same_items(node, items)
    stacked = imp.emit(R.concat([imp.emit(R.expand_dims(it, 0)) for it in items], 0))
    return R.take(stacked, imp.emit(R.reshape(pos, [])), axis=0, mode="wrap")


@converter("SequenceInsert")
def _insert(imp: Any, node: Any, inputs: list, attrs: dict) -> list:
    items = _seq(node, inputs[0]).items
    value = imp.expr(inputs[1])
    n = len(items)
    pos = _position(imp, inputs[2]) if len(inputs) > 2 and inputs[2] is not None else n
    if isinstance(pos, int):
        pos = pos + n if pos < 0 else pos
        return [Seq(items[:pos] + (value,) + items[pos:])]
    _same_items(node, items + (value,))
    p = _normalized(imp, pos, n)
    dtype = p.struct_info.dtype
    out = []
    for i in range(n + 1):
        before = items[i] if i < n else value      # i < p is impossible for i == n
        after = items[i - 1] if i > 0 else value   # i > p is impossible for i == 0
        here = imp.emit(R.where(R.equal(p, _index(imp, i, dtype)), value, after))
        out.append(imp.emit(R.where(R.less(_index(imp, i, dtype), p), before, here)))
    return [Seq(tuple(out))]


@converter("SequenceErase")
def _erase(imp: Any, node: Any, inputs: list, attrs: dict) -> list:
    items = _seq(node, inputs[0]).items
    n = len(items)
    if n == 0:
        raise IndexError("SequenceErase on an empty sequence")
    pos = _position(imp, inputs[1]) if len(inputs) > 1 and inputs[1] is not None else n - 1
    if isinstance(pos, int):
        pos = pos + n if pos < 0 else pos
        return [Seq(items[:pos] + items[pos + 1:])]
    _same_items(node, items)
    p = _normalized(imp, pos, n)
    dtype = p.struct_info.dtype
    out = [imp.emit(R.where(R.less(_index(imp, i, dtype), p), items[i], items[i + 1]))
           for i in range(n - 1)]
    return [Seq(tuple(out))]


@converter("ConcatFromSequence")
def _concat_from(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    items = [imp.expr(v) for v in _seq(node, inputs[0]).items]
    if not items:
        raise ValueError("ConcatFromSequence of an empty sequence")
    rank = len(items[0].struct_info.values)
    if attrs.get("new_axis", 0):
        axis = attrs["axis"] % (rank + 1)
        items = [imp.emit(R.expand_dims(it, axis)) for it in items]
    else:
        axis = attrs["axis"] % rank
    return R.concat(items, axis) if len(items) > 1 else items[0]


@converter("SplitToSequence")
def _split_to(imp: Any, node: Any, inputs: list, attrs: dict) -> list:
    x = imp.expr(inputs[0])
    dims = x.struct_info.values
    axis = attrs.get("axis", 0) % len(dims)
    split = inputs[1] if len(inputs) > 1 else None
    size = dims[axis]
    total = int(size.value) if hasattr(size, "value") else None
    if split is None:
        if total is None:
            raise NotImplementedError("SplitToSequence into single elements along a dynamic "
                                      "dimension")
        sizes = [1] * total
    else:
        known = imp.known(split)
        if known is None:
            count = split.struct_info.values
            if len(count) == 1 and hasattr(count[0], "value"):
                what = "SplitToSequence's parts (sizes computed at run time)"
                return [Seq(tuple(Unavailable(what) for _ in range(int(count[0].value))))]
            raise NotImplementedError("SplitToSequence with split sizes computed at run time")
        if known.ndim == 0:
            if total is None:
                raise NotImplementedError("SplitToSequence into chunks of a dynamic dimension")
            step = int(known)
            sizes = [min(step, total - k) for k in range(0, total, step)]
        else:
            sizes = [int(s) for s in known]
    cuts = [int(c) for c in np.cumsum(sizes)[:-1]]
    if cuts:
        parts = imp.emit(R.split(x, cuts, axis))
        items = [imp.emit(TupleGetItem(parts, i)) for i in range(len(sizes))]
    else:
        items = [x]
    if split is None and not attrs.get("keepdims", 1):
        items = [imp.emit(R.squeeze(it, [axis])) for it in items]
    return [Seq(tuple(items))]


# ---- optionals --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Opt:
    """An ONNX optional value: ``value`` (a tensor or a :class:`Seq`), or None when empty."""

    value: Any


@converter("Optional")
def _optional(imp: Any, node: Any, inputs: list, attrs: dict) -> list:
    return [Opt(inputs[0] if inputs and inputs[0] is not None else None)]


@converter("OptionalHasElement")
def _optional_has(imp: Any, node: Any, inputs: list, attrs: dict) -> np.ndarray:
    v = inputs[0] if inputs else None
    held = v.value is not None if isinstance(v, Opt) else v is not None
    return np.asarray(held)


@converter("OptionalGetElement")
def _optional_get(imp: Any, node: Any, inputs: list, attrs: dict) -> list:
    v = inputs[0]
    if isinstance(v, Opt):
        if v.value is None:
            raise ValueError("OptionalGetElement of an empty optional")
        v = v.value
    return [v]


__all__ = ["Seq", "Opt"]
