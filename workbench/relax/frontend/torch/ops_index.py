"""PyTorch converters: gathers and scatters by index tensors (gather, scatter, scatter_add,
scatter_reduce, index_put), ordering (sort, topk, cumsum, cumprod), on the Relax ops of those
names."""
from __future__ import annotations

from typing import Any, Sequence

from workbench.relax import op as R
from workbench.relax.expr import Expr, TupleGetItem
from workbench.relax.frontend.torch._registry import converter
from workbench.relax.frontend.torch._util import const, ndim, norm_dim, operand, shape_of, sinfo
from workbench.tir.expr import IntImm


@converter("gather.default")
def _gather(imp: Any, node: Any, x: Expr, dim: int, index: Expr,
            sparse_grad: bool = False) -> Expr:
    return R.gather_elements(x, index, norm_dim(dim, ndim(x)))


def _src(imp: Any, x: Expr, index: Expr, src: Any) -> Expr:
    """``src`` as a tensor of x's dtype, a scalar broadcast to the index's shape."""
    dtype = sinfo(x).dtype
    if isinstance(src, Expr):
        return operand(imp, src, dtype)
    return imp.emit(R.broadcast_to(const(src, dtype), shape_of(index)))


def _index_window(imp: Any, index: Expr, src: Expr) -> Expr:
    """torch reads ``src`` only where ``index`` has elements (src may be larger)."""
    if [str(d) for d in shape_of(src)] == [str(d) for d in shape_of(index)]:
        return src
    dims = [int(d.value) for d in shape_of(index)]
    return imp.emit(R.strided_slice(src, list(range(len(dims))), [0] * len(dims), dims))


@converter("scatter.src", "scatter.value")
def _scatter(imp: Any, node: Any, x: Expr, dim: int, index: Expr, src: Any,
             reduce: str | None = None) -> Expr:
    mode = {None: "update", "add": "add", "multiply": "mul"}[reduce]
    values = _index_window(imp, index, _src(imp, x, index, src))
    return R.scatter_elements(x, index, values, norm_dim(dim, ndim(x)), mode)


@converter("scatter_add.default")
def _scatter_add(imp: Any, node: Any, x: Expr, dim: int, index: Expr, src: Expr) -> Expr:
    values = _index_window(imp, index, _src(imp, x, index, src))
    return R.scatter_elements(x, index, values, norm_dim(dim, ndim(x)), "add")


def _scatter_reduce_check(imp: Any, node: Any) -> str | None:
    args = list(node.args) + [None] * 6
    include_self = node.kwargs.get("include_self", args[5])
    if include_self is False:
        return "scatter_reduce with include_self=False"
    reduce = node.kwargs.get("reduce", args[4])
    if reduce not in ("sum", "prod", "amax", "amin"):
        return f"scatter_reduce with reduce={reduce!r}"
    return None


@converter("scatter_reduce.two", check=_scatter_reduce_check)
def _scatter_reduce(imp: Any, node: Any, x: Expr, dim: int, index: Expr, src: Expr,
                    reduce: str, include_self: bool = True) -> Expr:
    mode = {"sum": "add", "prod": "mul", "amax": "max", "amin": "min"}[reduce]
    values = _index_window(imp, index, _src(imp, x, index, src))
    return R.scatter_elements(x, index, values, norm_dim(dim, ndim(x)), mode)


def _index_put_check(imp: Any, node: Any) -> str | None:
    indices = node.args[1]
    if any(i is None for i in indices):
        return "index_put with skipped (None) leading dimensions"
    shapes = {tuple(imp.meta_val(i).shape) for i in indices}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        return "index_put with index tensors other than 1-d ones of one length"
    if any(imp.meta_val(i).dtype.is_floating_point for i in indices) or \
            any(str(imp.meta_val(i).dtype) == "torch.bool" for i in indices):
        return "index_put with boolean masks"
    return None


@converter("index_put.default", "index_put_.default", check=_index_put_check)
def _index_put(imp: Any, node: Any, x: Expr, indices: Sequence[Expr], values: Any,
               accumulate: bool = False) -> Expr:
    """``x[i0, i1, ...] = values`` with 1-d index tensors of one length M: a scatter of the
    (M, k) positions."""
    k = len(indices)
    idx = [imp.emit(R.astype(i, "int64")) if sinfo(i).dtype != "int64" else i
           for i in indices]
    where = imp.emit(R.concat([imp.emit(R.expand_dims(i, 1)) for i in idx], 1))
    m = shape_of(idx[0])[0]
    target = [m] + list(shape_of(x)[k:])
    vals = operand(imp, values, sinfo(x).dtype)
    vals = imp.emit(R.broadcast_to(vals, target))
    return R.scatter_nd(x, where, vals, "add" if accumulate else "update")


def _full_topk(imp: Any, x: Expr, k: int, dim: int, largest: bool) -> tuple:
    out = imp.emit(R.topk(x, k, dim, "both", largest, "int64"))
    return imp.emit(TupleGetItem(out, 0)), imp.emit(TupleGetItem(out, 1))


@converter("sort.default", "sort.stable")
def _sort(imp: Any, node: Any, x: Expr, *args: Any, **kwargs: Any) -> tuple:
    """sort(x, dim=-1, descending=False) / sort.stable(x, *, stable, dim, descending): ties
    keep their order (a stable sort)."""
    if node.target.__name__ == "sort.stable":
        dim, descending = kwargs.get("dim", -1), kwargs.get("descending", False)
    else:
        dim = args[0] if args else kwargs.get("dim", -1)
        descending = args[1] if len(args) > 1 else kwargs.get("descending", False)
    d = norm_dim(dim, ndim(x))
    n = shape_of(x)[d]
    if not isinstance(n, IntImm):
        raise NotImplementedError("sort along a dynamic dimension")
    return _full_topk(imp, x, int(n.value), d, bool(descending))


@converter("topk.default")
def _topk(imp: Any, node: Any, x: Expr, k: int, dim: int = -1, largest: bool = True,
          sorted: bool = True) -> tuple:  # noqa: A002 - ATen's parameter name
    return _full_topk(imp, x, int(k), norm_dim(dim, ndim(x)), bool(largest))


def _scan(fn: Any):
    def convert(imp: Any, node: Any, x: Expr, dim: int, dtype: Any = None) -> Expr:
        out_dtype = imp.out_dtype(node)
        if sinfo(x).dtype != out_dtype:
            x = imp.emit(R.astype(x, out_dtype))
        return fn(x, norm_dim(dim, ndim(x)))
    return convert


converter("cumsum.default")(_scan(R.cumsum))
converter("cumprod.default")(_scan(R.cumprod))

__all__: list[str] = []
