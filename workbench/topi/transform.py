"""Layout and indexing operators: transpose, reshape, concatenate, strided_slice, take, ...

All are injective (each output element reads at most one input element per input) and are
tagged ``injective``. Names follow TVM (``T_transpose``, ``T_reshape``, ``T_concat``, ...).
"""
from __future__ import annotations

from typing import Any, Sequence

from workbench.te import compute
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import IntImm, PrimExpr
from workbench.topi.utils import (
    get_const_int, is_const_int, normalize_axis, prod, shape_str,
)


def transpose(a: Tensor, axes: Sequence[int] | None = None) -> Tensor:
    """Permute dimensions: output dim ``d`` is input dim ``axes[d]`` (reversed when None)."""
    n = a.ndim
    perm = list(range(n))[::-1] if axes is None else [normalize_axis(x, n, "transpose")
                                                      for x in axes]
    if sorted(perm) != list(range(n)):
        raise ValueError(f"transpose: axes {list(axes or [])} is not a permutation of "
                         f"{list(range(n))}")
    out_shape = tuple(a.shape[p] for p in perm)

    def f(*i: PrimExpr) -> PrimExpr:
        idx: list[Any] = [None] * n
        for d, p in enumerate(perm):
            idx[p] = i[d]
        return a[tuple(idx)]
    return compute(out_shape, f, name="T_transpose", tag="injective")


def _unravel(flat: PrimExpr, shape: Sequence[PrimExpr]) -> list[PrimExpr]:
    idx = []
    for s in reversed(shape[1:]):
        idx.append(op.floormod(flat, s))
        flat = op.floordiv(flat, s)
    # ``flat`` is below the product of ``shape``, so the outermost index needs no modulus; without
    # one a symbolic batch dim stays out of the indices and the kernel reads as injective.
    idx.append(flat)
    return idx[::-1]


def _ravel(indices: Sequence[PrimExpr], shape: Sequence[PrimExpr]) -> PrimExpr:
    if not indices:
        return op.const(0)
    flat: PrimExpr = indices[0]   # the outermost extent never multiplies anything
    for i, s in zip(indices[1:], shape[1:]):
        flat = op.add(op.mul(flat, s), i)
    return flat


def reshape(a: Tensor, newshape: Sequence[Any]) -> Tensor:
    """The elements of ``a`` in row-major order with shape ``newshape`` (one -1 is inferred)."""
    dims = [get_const_int(s) if isinstance(s, (int, IntImm)) else s for s in newshape]
    total = prod(a.shape)
    if dims.count(-1) > 1:
        raise ValueError(f"reshape: at most one -1 in newshape, got {list(newshape)}")
    if -1 in dims:
        known = prod([d for d in dims if not (isinstance(d, int) and d == -1)])
        if not (isinstance(total, IntImm) and isinstance(known, IntImm)):
            raise ValueError("reshape: -1 needs constant shapes")
        dims[dims.index(-1)] = total.value // known.value
    out_shape = tuple(op.const(d) if isinstance(d, int) else d for d in dims)
    new_total = prod(out_shape)
    if isinstance(total, IntImm) and isinstance(new_total, IntImm) and total.value != new_total.value:
        raise ValueError(f"reshape: cannot reshape {shape_str(a.shape)} ({total.value} elements) "
                         f"to {shape_str(out_shape)} ({new_total.value} elements)")

    def f(*i: PrimExpr) -> PrimExpr:
        if a.ndim == 0:
            return a[()]
        return a[tuple(_unravel(_ravel(i, out_shape), a.shape))]
    return compute(out_shape, f, name="T_reshape", tag="injective")


def expand_dims(a: Tensor, axis: int, num_newaxis: int = 1) -> Tensor:
    """``a`` with ``num_newaxis`` unit dimensions inserted at ``axis``."""
    axis = normalize_axis(axis, a.ndim + 1, "expand_dims")
    out_shape = a.shape[:axis] + (op.const(1),) * num_newaxis + a.shape[axis:]
    return compute(out_shape, lambda *i: a[i[:axis] + i[axis + num_newaxis:]],
                   name="T_expand_dims", tag="broadcast")


def squeeze(a: Tensor, axis: int | Sequence[int] | None = None) -> Tensor:
    """``a`` without the given unit dimensions (all unit dimensions when None)."""
    if axis is None:
        drop = {d for d, s in enumerate(a.shape) if is_const_int(s, 1)}
    else:
        drop = {normalize_axis(x, a.ndim, "squeeze")
                for x in ([axis] if isinstance(axis, int) else axis)}
        for d in drop:
            if not is_const_int(a.shape[d], 1):
                raise ValueError(f"squeeze: dimension {d} of {shape_str(a.shape)} is not 1")
    keep = [d for d in range(a.ndim) if d not in drop]

    def f(*i: PrimExpr) -> PrimExpr:
        it = iter(i)
        return a[tuple(op.const(0) if d in drop else next(it) for d in range(a.ndim))]
    return compute(tuple(a.shape[d] for d in keep), f, name="T_squeeze", tag="injective")


def concatenate(a_tuple: Sequence[Tensor], axis: int = 0) -> Tensor:
    """The tensors joined along ``axis``; other dimensions must agree."""
    tensors = list(a_tuple)
    if not tensors:
        raise ValueError("concatenate: give at least one tensor")
    first = tensors[0]
    axis = normalize_axis(axis, first.ndim, "concatenate")
    for t in tensors[1:]:
        if t.ndim != first.ndim or t.dtype != first.dtype:
            raise ValueError(f"concatenate: {t.name} {shape_str(t.shape)} {t.dtype} does not "
                             f"match {first.name} {shape_str(first.shape)} {first.dtype}")
    offsets = [op.const(0)]
    for t in tensors:
        offsets.append(op.add(offsets[-1], t.shape[axis]))
    out_shape = first.shape[:axis] + (offsets[-1],) + first.shape[axis + 1:]

    def f(*i: PrimExpr) -> PrimExpr:
        # Select from the last tensor backwards; if_then_else keeps other loads unevaluated.
        k = i[axis]
        out = tensors[-1][i[:axis] + (k - offsets[-2],) + i[axis + 1:]]
        for j in range(len(tensors) - 2, -1, -1):
            load = tensors[j][i[:axis] + (k - offsets[j],) + i[axis + 1:]]
            out = op.if_then_else(k < offsets[j + 1], load, out)
        return out
    return compute(out_shape, f, name="T_concat", tag="injective")


def stack(a_tuple: Sequence[Tensor], axis: int = 0) -> Tensor:
    """The tensors joined along a new dimension ``axis``."""
    return concatenate([expand_dims(t, axis) for t in a_tuple], axis)


def strided_slice(a: Tensor, begin: Sequence[int], end: Sequence[int],
                  strides: Sequence[int] | None = None, axes: Sequence[int] | None = None,
                  slice_mode: str = "end") -> Tensor:
    """numpy's ``a[b0:e0:s0, ...]`` over ``axes`` (the first ``len(begin)`` when None).

    Negative begin/end count from the end and out-of-range values are clamped, as in Python.
    ``slice_mode="size"`` reads ``end`` as sizes (-1: to the end) with stride 1.
    """
    n = a.ndim
    axes = list(range(len(begin))) if axes is None else [normalize_axis(x, n, "strided_slice")
                                                         for x in axes]
    strides = [1] * len(axes) if strides is None else list(strides)
    if len(strides) == 1 and len(axes) > 1:
        strides = strides * len(axes)
    if not (len(begin) == len(end) == len(strides) == len(axes)):
        raise ValueError("strided_slice: begin, end, strides and axes must have the same length")
    starts = {d: 0 for d in range(n)}
    steps = {d: 1 for d in range(n)}
    out_shape = list(a.shape)
    for d, b, e, s in zip(axes, begin, end, strides):
        extent = get_const_int(a.shape[d])
        b, e, s = int(b), int(e), int(s)
        if slice_mode == "size":
            s = 1
            e = extent if e < 0 else (b + extent if b < 0 else b) + e
        elif slice_mode != "end":
            raise ValueError(f"strided_slice: slice_mode must be 'end' or 'size', got {slice_mode!r}")
        if s == 0:
            raise ValueError("strided_slice: strides must be non-zero")
        start, stop, step = slice(b, e, s).indices(extent)
        starts[d], steps[d] = start, step
        out_shape[d] = op.const(len(range(start, stop, step)))

    def f(*i: PrimExpr) -> PrimExpr:
        return a[tuple(i[d] * steps[d] + starts[d] for d in range(n))]
    return compute(tuple(out_shape), f, name="T_strided_slice", tag="injective")


def take(a: Tensor, indices: Tensor | int, axis: int | None = None, batch_dims: int = 0,
         mode: str = "clip") -> Tensor:
    """Elements of ``a`` at ``indices`` along ``axis`` (of the flattened ``a`` when None).

    ``mode``: "clip" clamps indices into range, "wrap" wraps them (negative counts from the
    end), "fast" trusts them. Output shape: ``a.shape[:axis] + indices.shape + a.shape[axis+1:]``.
    """
    if batch_dims != 0:
        raise NotImplementedError("take: batch_dims != 0 is not supported")
    if mode not in ("clip", "wrap", "fast"):
        raise ValueError(f"take: mode must be 'clip', 'wrap' or 'fast', got {mode!r}")
    src = reshape(a, (prod(a.shape),)) if axis is None else a
    axis = 0 if axis is None else normalize_axis(axis, a.ndim, "take")
    extent = src.shape[axis]
    idx_shape = indices.shape if isinstance(indices, Tensor) else ()
    out_shape = src.shape[:axis] + tuple(idx_shape) + src.shape[axis + 1:]
    m = len(idx_shape)

    def f(*i: PrimExpr) -> PrimExpr:
        raw = indices[i[axis:axis + m]] if isinstance(indices, Tensor) else op.const(indices)
        k = op.cast(extent.dtype, raw)
        if mode == "clip":
            k = op.min(op.max(k, op.const(0, k.dtype)), op.sub(extent, 1))
        elif mode == "wrap":
            k = op.floormod(k, extent)
        return src[i[:axis] + (k,) + i[axis + m:]]
    return compute(out_shape, f, name="T_take", tag="injective")


def flatten(data: Tensor) -> Tensor:
    """``(N, ...)`` -> ``(N, prod(...))`` (TVM's ``topi.nn.flatten``)."""
    return reshape(data, (data.shape[0], prod(data.shape[1:])))
