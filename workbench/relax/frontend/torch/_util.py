"""Helpers the PyTorch converters share: operands in a dtype, constants, ranks, axes."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Constant, Expr, ShapeExpr
from workbench.relax.struct_info import TensorStructInfo


def sinfo(e: Expr) -> TensorStructInfo:
    si = e.struct_info
    if not isinstance(si, TensorStructInfo):
        raise TypeError(f"expected a tensor, got {si}")
    return si


def ndim(e: Expr) -> int:
    return sinfo(e).ndim


def shape_of(e: Expr) -> tuple:
    return tuple(sinfo(e).values)


def const(value: Any, dtype: str) -> Constant:
    return Constant(np.asarray(value, dtype=dtype))


def operand(imp: Any, v: Any, dtype: str) -> Expr:
    """``v`` (a tensor or a Python number) as a tensor of ``dtype`` (cast when needed)."""
    if isinstance(v, Expr):
        if sinfo(v).dtype != dtype:
            return imp.emit(R.astype(v, dtype))
        return v
    if isinstance(v, (bool, int, float, np.generic)):
        return const(v, dtype)
    raise TypeError(f"expected a tensor or a number, got {v!r}")


def promoted_dtype(imp: Any, node: Any, *args: Any) -> str:
    """The dtype PyTorch computes a comparison / mixed operation in (``torch.result_type`` of
    the recorded fake values)."""
    import torch
    from workbench.relax.frontend.torch.exported_program import torch_dtype
    vals = [imp.meta_val(a) for a in args]
    if len(vals) == 1:
        return torch_dtype(vals[0].dtype)
    dtype = torch.result_type(vals[0], vals[1])
    for v in vals[2:]:
        dtype = torch.promote_types(dtype, torch.result_type(v, v))
    return torch_dtype(dtype)


def norm_dim(d: int, rank: int) -> int:
    if not -rank <= d < max(rank, 1):
        raise ValueError(f"dimension {d} is out of range for rank {rank}")
    return d % rank if rank else 0


def norm_dims(dims: Any, rank: int) -> list[int]:
    if dims is None:
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    return [norm_dim(int(d), rank) for d in dims]


def shape_expr(imp: Any, shape: Sequence[Any]) -> ShapeExpr:
    """A ShapeExpr from ints / SymInts / PrimExprs (``-1`` stays -1 for reshape)."""
    return ShapeExpr(tuple(imp.prim(d) for d in shape))


def is_float(dtype: str) -> bool:
    return dtype.startswith(("float", "bfloat"))


__all__ = ["sinfo", "ndim", "shape_of", "const", "operand", "promoted_dtype", "norm_dim",
           "norm_dims", "shape_expr", "is_float"]
