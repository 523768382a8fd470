"""Helpers shared by the struct-info inference rules: argument checks, dims, broadcasting.

Error messages name the op, the argument and the shapes involved, e.g.
``add: cannot broadcast x1 (2, 3) with x2 (4, 3): dimension 0 is 2 vs 4``.
"""
from __future__ import annotations

from typing import Any, Sequence

from workbench.relax.expr import Call, Expr
from workbench.relax.op.registry import OpError, short_name
from workbench.relax.struct_info import (
    StructInfo, TensorStructInfo, TupleStructInfo, as_dim,
)
from workbench.tir import op as tir_op
from workbench.tir.analysis.exprs import const_int  # the op rules' I.const_int
from workbench.tir.expr import IntImm, PrimExpr


def error(call: Call, msg: str) -> OpError:
    return OpError(f"{short_name(call.op.name)}: {msg}")


def dims_text(dims: Sequence[PrimExpr] | None) -> str:
    from workbench.relax.dim_text import dims_text as text
    return text(dims)


def dim(d: PrimExpr) -> str:
    from workbench.relax.dim_text import dim_text
    return dim_text(d)


def sinfo_text(si: StructInfo) -> str:
    from workbench.relax.printer import sinfo_text as text
    return text(si)


def arg_sinfo(call: Call, i: int) -> StructInfo:
    si = call.args[i].struct_info
    if si is None:
        raise error(call, f"argument {i} has no struct info (normalise it first)")
    return si


def tensor_arg(call: Call, i: int, name: str) -> TensorStructInfo:
    """The TensorStructInfo of argument ``i`` (called ``name`` in messages)."""
    si = arg_sinfo(call, i)
    if not isinstance(si, TensorStructInfo):
        raise error(call, f"argument {name!r} must be a tensor, got {sinfo_text(si)}")
    return si


def tuple_of_tensors(call: Call, i: int, name: str) -> list[TensorStructInfo]:
    si = arg_sinfo(call, i)
    if not isinstance(si, TupleStructInfo):
        raise error(call, f"argument {name!r} must be a tuple of tensors, got {sinfo_text(si)}")
    for k, f in enumerate(si.fields):
        if not isinstance(f, TensorStructInfo):
            raise error(call, f"{name}[{k}] must be a tensor, got {sinfo_text(f)}")
    return list(si.fields)


def prove_equal(a: PrimExpr, b: PrimExpr) -> bool | None:
    """True / False when provable, None when it depends on symbolic values."""
    if a is b:
        return True
    ca, cb = const_int(a), const_int(b)
    if ca is not None and cb is not None:
        return ca == cb
    from workbench.tir.arith.analyzer import Analyzer
    ana = Analyzer()
    if ana.can_prove_equal(a, b):
        return True
    diff = ana.simplify(tir_op.sub(a, b))
    if isinstance(diff, IntImm):
        return diff.value == 0
    return None


def broadcast_shapes(call: Call, named: Sequence[tuple[str, TensorStructInfo]]
                     ) -> tuple[PrimExpr, ...] | None:
    """The numpy broadcast of the named tensors' shapes; None when a symbolic pair cannot be
    decided (the result then has a known rank only, as in TVM); raises on a definite clash."""
    if any(si.shape is None for _, si in named):
        return None
    ndim = max(len(si.values) for _, si in named)
    out: list[PrimExpr | None] = []
    for axis in range(ndim):
        cur: PrimExpr | None = None
        cur_name = ""
        for name, si in named:
            vals = si.values
            k = axis - (ndim - len(vals))
            if k < 0:
                continue
            d = vals[k]
            if cur is None or const_int(cur) == 1:
                cur, cur_name = d, name
                continue
            if const_int(d) == 1:
                continue
            same = prove_equal(cur, d)
            if same is False:
                shapes = " with ".join(f"{n} {dims_text(s.values)}" for n, s in named)
                raise error(call, f"cannot broadcast {shapes}: dimension {axis} of the result "
                                  f"is {dim(cur)} in {cur_name} but {dim(d)} in {name}")
            if same is None:
                return None
        out.append(cur)
    return tuple(out)  # type: ignore[arg-type]


def same_dtype(call: Call, named: Sequence[tuple[str, TensorStructInfo]]) -> str:
    """The common dtype; unknown dtypes ("") adopt the others; differing known dtypes raise."""
    known = [(n, si.dtype) for n, si in named if si.dtype]
    if not known:
        return ""
    first_name, first = known[0]
    for n, d in known[1:]:
        if d != first:
            raise error(call, f"dtypes must match: {first_name} is {first} but {n} is {d} "
                              "(cast one with relax.op.astype)")
    return first


def norm_axis(call: Call, axis: int, ndim: int, what: str = "axis") -> int:
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise error(call, f"{what} must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise error(call, f"{what}={axis} is out of range for a tensor of rank {ndim} "
                          f"(valid: {-ndim}..{ndim - 1})")
    return axis + ndim if axis < 0 else axis


def norm_axes(call: Call, axes: Any, ndim: int, what: str = "axis") -> list[int]:
    """Axes (an int, a sequence, or None for all) normalised to sorted non-negative ints."""
    if axes is None:
        return list(range(ndim))
    if isinstance(axes, int):
        axes = [axes]
    out = [norm_axis(call, a, ndim, what) for a in axes]
    if len(set(out)) != len(out):
        raise error(call, f"{what} repeats an axis: {list(axes)}")
    return sorted(out)


def known_ndim(call: Call, si: TensorStructInfo, name: str) -> int:
    if si.ndim < 0:
        raise error(call, f"the rank of {name!r} must be known")
    return si.ndim


def tensor(shape: Sequence[Any] | None, dtype: str, ndim: int = -1) -> TensorStructInfo:
    if shape is None:
        return TensorStructInfo(None, dtype, ndim)
    return TensorStructInfo(tuple(as_dim(d) for d in shape), dtype)


def int_tuple(call: Call, value: Any, n: int, what: str) -> tuple[int, ...]:
    """An int or a sequence of ints as an ``n``-tuple (``strides=2`` -> ``(2, 2)``)."""
    if isinstance(value, int):
        return (value,) * n
    vals = tuple(value)
    if len(vals) == 1 and n > 1:
        vals = vals * n
    if len(vals) != n or not all(isinstance(v, int) for v in vals):
        raise error(call, f"{what} must be an int or {n} ints, got {value!r}")
    return vals


def is_expr(v: Any) -> bool:
    return isinstance(v, Expr)


__all__ = ["error", "dims_text", "arg_sinfo", "tensor_arg", "tuple_of_tensors", "const_int",
           "prove_equal", "broadcast_shapes", "same_dtype", "norm_axis", "norm_axes",
           "known_ndim", "tensor", "int_tuple", "sinfo_text"]
