"""PyTorch converters: views and shape manipulation, joining and splitting, slicing and
indexing. View semantics become copies (Relax values are immutable)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Expr, TupleGetItem
from workbench.relax.frontend.torch._registry import converter
from workbench.relax.frontend.torch._util import (
    const, ndim, norm_dim, norm_dims, operand, shape_expr, shape_of, sinfo,
)
from workbench.tir.expr import IntImm

_INT_MAX = 2 ** 63 - 1


def _static(d: Any) -> int | None:
    return int(d.value) if isinstance(d, IntImm) else (int(d) if isinstance(d, int) else None)


# ---- reshapes ---------------------------------------------------------------------------------

@converter("view.default", "_unsafe_view.default", "reshape.default", "view_copy.default")
def _view(imp: Any, node: Any, x: Expr, shape: Sequence[Any]) -> Expr:
    return R.reshape(x, shape_expr(imp, shape))


@converter("permute.default", "permute_copy.default")
def _permute(imp: Any, node: Any, x: Expr, dims: Sequence[int]) -> Expr:
    return R.permute_dims(x, norm_dims(dims, ndim(x)))


@converter("transpose.int", "transpose_copy.int")
def _transpose(imp: Any, node: Any, x: Expr, d0: int, d1: int) -> Expr:
    rank = ndim(x)
    perm = list(range(rank))
    a, b = norm_dim(d0, rank), norm_dim(d1, rank)
    perm[a], perm[b] = perm[b], perm[a]
    return R.permute_dims(x, perm)


@converter("unsqueeze.default", "unsqueeze_copy.default")
def _unsqueeze(imp: Any, node: Any, x: Expr, dim: int) -> Expr:
    return R.expand_dims(x, norm_dim(dim, ndim(x) + 1))


@converter("squeeze.dim", "squeeze.dims", "squeeze.default", "squeeze_copy.dims")
def _squeeze(imp: Any, node: Any, x: Expr, dims: Any = None) -> Expr:
    shape = shape_of(x)
    axes = norm_dims(dims, ndim(x)) if dims is not None else list(range(ndim(x)))
    # PyTorch ignores dims that are not 1 (Relax would reject them).
    keep = [a for a in axes if _static(shape[a]) == 1]
    return R.squeeze(x, keep) if keep else x


@converter("flatten.using_ints")
def _flatten(imp: Any, node: Any, x: Expr, start: int = 0, end: int = -1) -> Expr:
    rank = ndim(x)
    if rank == 0:
        return R.reshape(x, [1])
    s, e = norm_dim(start, rank), norm_dim(end, rank)
    shape = shape_of(x)
    merged = shape[s]
    for d in shape[s + 1:e + 1]:
        merged = merged * d
    return R.reshape(x, list(shape[:s]) + [merged] + list(shape[e + 1:]))


@converter("unflatten.int")
def _unflatten(imp: Any, node: Any, x: Expr, dim: int, sizes: Sequence[Any]) -> Expr:
    shape = list(shape_of(x))
    d = norm_dim(dim, len(shape))
    return R.reshape(x, shape[:d] + [imp.prim(s) for s in sizes] + shape[d + 1:])


@converter("expand.default", "expand_copy.default")
def _expand(imp: Any, node: Any, x: Expr, sizes: Sequence[Any], implicit: bool = False) -> Expr:
    shape = shape_of(x)
    lead = len(sizes) - len(shape)
    out = []
    for i, s in enumerate(sizes):
        if isinstance(s, int) and s == -1:
            out.append(shape[i - lead])
        else:
            out.append(imp.prim(s))
    if lead == 0 and all(a is b or _static(a) == _static(b) is not None
                         for a, b in zip(out, shape)):
        return x
    return R.broadcast_to(x, out)


@converter("repeat.default")
def _repeat(imp: Any, node: Any, x: Expr, repeats: Sequence[int]) -> Expr:
    shape = list(shape_of(x))
    lead = len(repeats) - len(shape)
    shape = [IntImm("int64", 1)] * lead + shape
    x = imp.emit(R.reshape(x, shape)) if lead else x
    inter, wide, final = [], [], []
    for r, d in zip(repeats, shape):
        inter += [1, d]
        wide += [imp.prim(r), d]
        final.append(imp.prim(r) * d)
    x = imp.emit(R.reshape(x, inter))
    x = imp.emit(R.broadcast_to(x, wide))
    return R.reshape(x, final)


# ---- joining and splitting ----------------------------------------------------------------------

@converter("cat.default", "concat.default")
def _cat(imp: Any, node: Any, tensors: Sequence[Expr], dim: int = 0) -> Expr:
    dtype = imp.out_dtype(node)
    parts = [operand(imp, t, dtype) for t in tensors
             if not (ndim(t) == 1 and _static(shape_of(t)[0]) == 0)]  # legacy empty tensors
    if len(parts) == 1:
        return parts[0]
    return R.concat(parts, norm_dim(dim, ndim(parts[0])))


@converter("stack.default")
def _stack(imp: Any, node: Any, tensors: Sequence[Expr], dim: int = 0) -> Expr:
    d = norm_dim(dim, ndim(tensors[0]) + 1)
    return R.concat([imp.emit(R.expand_dims(t, d)) for t in tensors], d)


def _split_at(imp: Any, x: Expr, sizes: Sequence[int], dim: int) -> tuple:
    cuts = list(np.cumsum(sizes)[:-1])
    if not cuts:
        return (x,)
    parts = imp.emit(R.split(x, [int(c) for c in cuts], dim))
    return tuple(imp.emit(TupleGetItem(parts, i)) for i in range(len(sizes)))


def _static_dim_check(dim_index: int):
    def check(imp: Any, node: Any) -> str | None:
        val = node.args[0].meta.get("val")
        dim = node.args[dim_index] if len(node.args) > dim_index else \
            node.kwargs.get("dim", 0)
        if val is not None and not isinstance(val.shape[dim], int):
            return "splitting a dynamic dimension"
        return None
    return check


@converter("split_with_sizes.default", "split_with_sizes_copy.default")
def _split_with_sizes(imp: Any, node: Any, x: Expr, sizes: Sequence[int], dim: int = 0) -> tuple:
    return _split_at(imp, x, [int(s) for s in sizes], norm_dim(dim, ndim(x)))


@converter("split.Tensor", "split_copy.Tensor", check=_static_dim_check(2))
def _split(imp: Any, node: Any, x: Expr, size: int, dim: int = 0) -> tuple:
    d = norm_dim(dim, ndim(x))
    n = _static(shape_of(x)[d])
    sizes = [min(size, n - k) for k in range(0, n, size)]
    return _split_at(imp, x, sizes, d)


@converter("chunk.default", check=_static_dim_check(2))
def _chunk(imp: Any, node: Any, x: Expr, chunks: int, dim: int = 0) -> tuple:
    d = norm_dim(dim, ndim(x))
    n = _static(shape_of(x)[d])
    size = -(-n // chunks)
    return _split(imp, node, x, size, d)


@converter("unbind.int", check=_static_dim_check(1))
def _unbind(imp: Any, node: Any, x: Expr, dim: int = 0) -> tuple:
    d = norm_dim(dim, ndim(x))
    n = _static(shape_of(x)[d])
    return tuple(imp.emit(R.squeeze(p, [d])) for p in _split_at(imp, x, [1] * n, d))


# ---- slicing and indexing --------------------------------------------------------------------------

def _int_args_check(*positions: int):
    def check(imp: Any, node: Any) -> str | None:
        for p in positions:
            if p < len(node.args) and hasattr(node.args[p], "meta"):
                return "symbolic slice bounds"
        return None
    return check


@converter("slice.Tensor", "slice_copy.Tensor", check=_int_args_check(2, 3, 4))
def _slice(imp: Any, node: Any, x: Expr, dim: int = 0, start: Any = None, end: Any = None,
           step: int = 1) -> Expr:
    d = norm_dim(dim, ndim(x))
    start = 0 if start is None else int(start)
    end = _INT_MAX if end is None else min(int(end), _INT_MAX)
    n = _static(shape_of(x)[d])
    if start == 0 and step == 1 and n is not None and end >= n:
        return x  # the whole dimension
    return R.strided_slice(x, [d], [start], [end], [int(step)])


@converter("select.int", "select_copy.int", check=_int_args_check(2))
def _select(imp: Any, node: Any, x: Expr, dim: int, index: int) -> Expr:
    d = norm_dim(dim, ndim(x))
    end = index + 1 if index != -1 else _INT_MAX
    part = imp.emit(R.strided_slice(x, [d], [int(index)], [end]))
    return R.squeeze(part, [d])


@converter("narrow.default", check=_int_args_check(2, 3))
def _narrow(imp: Any, node: Any, x: Expr, dim: int, start: int, length: int) -> Expr:
    return R.strided_slice(x, [norm_dim(dim, ndim(x))], [start], [start + length])


def _as_strided_check(imp: Any, node: Any) -> str | None:
    """The view must read a contiguous tensor of static shape (its own storage)."""
    val = node.args[0].meta.get("val") if hasattr(node.args[0], "meta") else None
    if val is None:
        return "an input of unknown layout"
    if not val.is_contiguous() or val.storage_offset() != 0:
        return "a non-contiguous input (a view of another tensor's storage)"
    sizes = list(node.args[1]) + list(node.args[2] if len(node.args) > 2 else [])
    if any(not isinstance(v, int) for v in sizes) or \
            any(not isinstance(d, int) for d in val.shape):
        return "symbolic sizes or strides"
    return None


@converter("as_strided.default", "as_strided_copy.default", check=_as_strided_check)
def _as_strided(imp: Any, node: Any, x: Expr, size: Sequence[int], stride: Sequence[int],
                storage_offset: int | None = None) -> Expr:
    """A strided view of a contiguous tensor: the elements at ``offset + sum(i_k *
    stride_k)`` of its flattening, gathered with a constant index tensor."""
    index = np.full([int(s) for s in size], int(storage_offset or 0), dtype=np.int64)
    for k, (n, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[k] = int(n)
        index = index + np.arange(int(n), dtype=np.int64).reshape(shape) * int(st)
    flat = imp.emit(R.reshape(x, [-1]))
    return R.take(flat, const(index, "int64"), axis=0)


@converter("slice_scatter.default")
def _slice_scatter(imp: Any, node: Any, x: Expr, src: Expr, dim: int = 0, start: Any = None,
                   end: Any = None, step: int = 1) -> Expr:
    """``x`` with ``x[..., start:end:step, ...] = src`` along ``dim`` (static sizes)."""
    d = norm_dim(dim, ndim(x))
    n = _static(shape_of(x)[d])
    if n is None:
        raise NotImplementedError("slice_scatter along a dynamic dimension")
    positions = list(range(n))[slice(start, end, step)]
    if not positions:
        return x
    if step == 1:  # the slice between the untouched parts
        lo, hi = positions[0], positions[-1] + 1
        parts = [imp.emit(R.strided_slice(x, [d], [0], [lo]))] if lo > 0 else []
        parts.append(src)
        if hi < n:
            parts.append(imp.emit(R.strided_slice(x, [d], [hi], [n])))
        return R.concat(parts, d) if len(parts) > 1 else src
    shape = [_static(v) for v in shape_of(src)]
    index = np.asarray(positions, dtype=np.int64).reshape([-1 if k == d else 1
                                                          for k in range(len(shape))])
    index = np.broadcast_to(index, shape).copy()
    return R.scatter_elements(x, const(index, "int64"), src, d)


@converter("select_scatter.default")
def _select_scatter(imp: Any, node: Any, x: Expr, src: Expr, dim: int, index: int) -> Expr:
    """``x`` with ``x.select(dim, index) = src``: the slice_scatter of one position."""
    d = norm_dim(dim, ndim(x))
    n = _static(shape_of(x)[d])
    if n is None:
        raise NotImplementedError("select_scatter along a dynamic dimension")
    i = int(index) % n
    return _slice_scatter(imp, node, x, imp.emit(R.expand_dims(src, d)), d, i, i + 1, 1)


@converter("diagonal.default", "diagonal_copy.default")
def _diagonal(imp: Any, node: Any, x: Expr, offset: int = 0, dim1: int = 0,
              dim2: int = 1) -> Expr:
    """The diagonal of dims ``dim1``, ``dim2`` as the last dim: a gather of the positions
    ``(i, i + offset)`` after moving the two dims to the front."""
    rank = ndim(x)
    a, b = norm_dim(dim1, rank), norm_dim(dim2, rank)
    rows, cols = _static(shape_of(x)[a]), _static(shape_of(x)[b])
    if rows is None or cols is None:
        raise NotImplementedError("diagonal of dynamic dims")
    start_r, start_c = max(-offset, 0), max(offset, 0)
    n = max(min(rows - start_r, cols - start_c), 0)
    pos = np.stack([np.arange(n) + start_r, np.arange(n) + start_c], -1).astype(np.int64)
    rest = [k for k in range(rank) if k not in (a, b)]
    front = imp.emit(R.permute_dims(x, [a, b] + rest))
    picked = imp.emit(R.gather_nd(front, const(pos, "int64")))        # (n, rest...)
    return R.permute_dims(picked, list(range(1, len(rest) + 1)) + [0])


@converter("index_select.default")
def _index_select(imp: Any, node: Any, x: Expr, dim: int, index: Expr) -> Expr:
    return R.take(x, index, axis=norm_dim(dim, ndim(x)))


def _index_check(imp: Any, node: Any) -> str | None:
    indices = list(node.args[1])
    used = [k for k, i in enumerate(indices) if i is not None]
    if used != list(range(used[0], used[-1] + 1)):
        return "index tensors separated by full slices"
    for k in used:
        val = indices[k].meta.get("val") if hasattr(indices[k], "meta") else None
        if val is not None and str(val.dtype) == "torch.bool":
            return "boolean mask indexing (data-dependent shape)"
    return None


@converter("index.Tensor", check=_index_check)
def _index(imp: Any, node: Any, x: Expr, indices: Sequence[Any]) -> Expr:
    """``x[:, ..., i1, i2, ...]`` with adjacent index tensors: one takes along its axis;
    several broadcast together and gather the addressed slices (``gather_nd`` with the
    indexed axes first), the result's indexed part where the first of them was."""
    used = [k for k, i in enumerate(indices) if i is not None]
    if len(used) == 1:
        return R.take(x, indices[used[0]], axis=used[0])
    p, k = used[0], len(used)
    rank = ndim(x)
    idx = [imp.emit(R.astype(indices[a], "int64")) if sinfo(indices[a]).dtype != "int64"
           else indices[a] for a in used]
    shape = list(np.broadcast_shapes(*[tuple(_static(d) for d in shape_of(i)) for i in idx]))
    idx = [imp.emit(R.broadcast_to(i, shape)) if [_static(d) for d in shape_of(i)] != shape
           else i for i in idx]
    where = imp.emit(R.concat([imp.emit(R.expand_dims(i, -1)) for i in idx], -1))
    front = used + [a for a in range(rank) if a not in used]
    picked = imp.emit(R.gather_nd(imp.emit(R.permute_dims(x, front)), where))
    b = len(shape)                    # picked: (B..., x's leading p dims, the rest)
    order = list(range(b, b + p)) + list(range(b)) + list(range(b + p, b + rank - k))
    return R.permute_dims(picked, order) if p else picked


def _tri(lower: bool):
    def convert(imp: Any, node: Any, x: Expr, diagonal: int = 0) -> Expr:
        rows, cols = (_static(d) for d in shape_of(x)[-2:])
        if rows is None or cols is None:
            raise NotImplementedError("tril/triu of a dynamic shape")
        fn = np.tril if lower else np.triu
        mask = fn(np.ones((rows, cols), dtype=bool), diagonal)
        return R.where(const(mask, "bool"), x, const(0, sinfo(x).dtype))
    return convert


converter("tril.default")(_tri(True))
converter("triu.default")(_tri(False))


@converter("flip.default")
def _flip(imp: Any, node: Any, x: Expr, dims: Sequence[int]) -> Expr:
    for d in norm_dims(dims, ndim(x)):
        x = imp.emit(R.strided_slice(x, [d], [-1], [-_INT_MAX], [-1]))
    return x


__all__: list[str] = []
