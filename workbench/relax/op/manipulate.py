"""Shape manipulation: reshape, permute_dims, flatten, expand_dims, squeeze, concat, split,
broadcast_to. All are injective; legalized with topi's transform ops or small te computes."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.relax.expr import Call, Expr, ShapeExpr, Tuple
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from workbench.tir import op as tir_op
from workbench.tir.expr import IntImm, PrimExpr


def _product(dims: Sequence[PrimExpr]) -> PrimExpr:
    from workbench.tir.arith.analyzer import Analyzer
    total: PrimExpr = IntImm("int64", 1)
    for d in dims:
        total = tir_op.mul(total, d)
    return Analyzer().simplify(total)


def _out_values(call: Call) -> tuple[PrimExpr, ...]:
    return call.struct_info.values


# ---- reshape ----------------------------------------------------------------------------------

def reshape(x: Expr, shape: Any) -> Call:
    """``x`` with a new shape of the same number of elements; one dim may be -1 (inferred)."""
    if not isinstance(shape, Expr):
        shape = ShapeExpr(tuple(shape) if isinstance(shape, (list, tuple)) else (shape,))
    return make_call("relax.reshape", (x, shape))


@def_infer("relax.reshape")
def _infer_reshape(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "x")
    shape = call.args[1]
    if not isinstance(shape, ShapeExpr):
        si = shape.struct_info
        ndim = getattr(si, "ndim", -1)
        return TensorStructInfo(getattr(si, "values", None), x.dtype, ndim)
    new = list(shape.values)
    holes = [i for i, d in enumerate(new) if I.const_int(d) == -1]
    if len(holes) > 1:
        raise I.error(call, f"at most one dimension may be -1, got {I.dims_text(new)}")
    if x.shape is None:
        if holes:
            return TensorStructInfo(None, x.dtype, len(new))
        return TensorStructInfo(tuple(new), x.dtype)
    total = _product(x.values)
    if holes:
        known = _product([d for i, d in enumerate(new) if i != holes[0]])
        if isinstance(total, IntImm) and isinstance(known, IntImm):
            if known.value == 0 or total.value % known.value:
                raise I.error(call, f"cannot reshape x {I.dims_text(x.values)} "
                                    f"({total.value} elements) to {I.dims_text(new)}")
            new[holes[0]] = IntImm("int64", total.value // known.value)
        else:
            from workbench.tir.arith.analyzer import Analyzer
            new[holes[0]] = Analyzer().simplify(tir_op.floordiv(total, known))
    if I.prove_equal(total, _product(new)) is False:
        raise I.error(call, f"cannot reshape x {I.dims_text(x.values)} ({I.dim(total)}"
                            f" elements) to {I.dims_text(new)} "
                            f"({I.dim(_product(new))} elements)")
    return TensorStructInfo(tuple(new), x.dtype)


@def_legalize("relax.reshape")
def _legalize_reshape(bb: Any, call: Call) -> Expr:
    from workbench.topi.transform import reshape as te_reshape
    return bb.call_te(te_reshape, call.args[0], list(_out_values(call)),
                      primfunc_name_hint="reshape")


@def_numpy("relax.reshape")
def _numpy_reshape(x: np.ndarray, shape: tuple) -> np.ndarray:
    return np.reshape(x, shape)


# ---- permute_dims -----------------------------------------------------------------------------

def permute_dims(x: Expr, axes: Sequence[int] | None = None) -> Call:
    """``x`` with dimensions permuted: output dim ``d`` is input dim ``axes[d]`` (reverse when
    None), numpy's ``transpose``."""
    return make_call("relax.permute_dims", (x,),
                     {"axes": None if axes is None else tuple(int(a) for a in axes)})


@def_infer("relax.permute_dims")
def _infer_permute(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "x")
    axes = call.attrs.get("axes")
    if x.ndim < 0:
        return x
    if axes is None:
        perm = list(range(x.ndim))[::-1]
    else:
        if len(axes) != x.ndim:
            raise I.error(call, f"axes {list(axes)} must list all {x.ndim} dimensions of x "
                                f"{I.dims_text(x.values)}")
        perm = [I.norm_axis(call, a, x.ndim, "axes") for a in axes]
        if sorted(perm) != list(range(x.ndim)):
            raise I.error(call, f"axes {list(axes)} is not a permutation of "
                                f"{list(range(x.ndim))}")
    if x.shape is None:
        return x
    return TensorStructInfo(tuple(x.values[p] for p in perm), x.dtype)


@def_legalize("relax.permute_dims")
def _legalize_permute(bb: Any, call: Call) -> Expr:
    from workbench.topi.transform import transpose
    axes = call.attrs.get("axes")
    return bb.call_te(transpose, call.args[0], None if axes is None else list(axes),
                      primfunc_name_hint="transpose")


@def_numpy("relax.permute_dims")
def _numpy_permute(x: np.ndarray, axes: Any = None) -> np.ndarray:
    return np.transpose(x, axes)


# ---- flatten ----------------------------------------------------------------------------------

def flatten(x: Expr) -> Call:
    """All elements of ``x`` as a 1-d tensor (TVM's ``relax.op.flatten``)."""
    return make_call("relax.flatten", (x,))


@def_infer("relax.flatten")
def _infer_flatten(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "x")
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, 1)
    return TensorStructInfo((_product(x.values),), x.dtype)


@def_legalize("relax.flatten")
def _legalize_flatten(bb: Any, call: Call) -> Expr:
    from workbench.topi.transform import reshape as te_reshape
    return bb.call_te(te_reshape, call.args[0], list(_out_values(call)),
                      primfunc_name_hint="reshape")


@def_numpy("relax.flatten")
def _numpy_flatten(x: np.ndarray) -> np.ndarray:
    return x.reshape(-1)


# ---- expand_dims / squeeze --------------------------------------------------------------------

def expand_dims(x: Expr, axis: int | Sequence[int]) -> Call:
    """``x`` with unit dimensions inserted so that they sit at ``axis`` in the result."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    return make_call("relax.expand_dims", (x,), {"axis": axes})


@def_infer("relax.expand_dims")
def _infer_expand_dims(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "x")
    axes = call.attrs["axis"]
    if x.ndim < 0:
        return TensorStructInfo(None, x.dtype)
    out_ndim = x.ndim + len(axes)
    new = I.norm_axes(call, axes, out_ndim)
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, out_ndim)
    it = iter(x.values)
    return TensorStructInfo(tuple(IntImm("int64", 1) if d in new else next(it)
                                  for d in range(out_ndim)), x.dtype)


def _te_reshape_to(x: Any, shape: list) -> Any:
    from workbench.topi.transform import reshape as te_reshape
    return te_reshape(x, shape)


@def_legalize("relax.expand_dims")
def _legalize_expand_dims(bb: Any, call: Call) -> Expr:
    return bb.call_te(_te_reshape_to, call.args[0], list(_out_values(call)),
                      primfunc_name_hint="expand_dims")


@def_numpy("relax.expand_dims")
def _numpy_expand_dims(x: np.ndarray, axis: tuple) -> np.ndarray:
    return np.expand_dims(x, axis)


def squeeze(x: Expr, axis: int | Sequence[int] | None = None) -> Call:
    """``x`` without the given unit dimensions (every unit dimension when None)."""
    axes = None if axis is None else ((axis,) if isinstance(axis, int) else tuple(axis))
    return make_call("relax.squeeze", (x,), {"axis": axes})


@def_infer("relax.squeeze")
def _infer_squeeze(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "x")
    axes = call.attrs.get("axis")
    if x.shape is None:
        ndim = -1 if axes is None or x.ndim < 0 else x.ndim - len(axes)
        return TensorStructInfo(None, x.dtype, ndim)
    if axes is None:
        drop = {d for d, s in enumerate(x.values) if I.const_int(s) == 1}
    else:
        drop = set(I.norm_axes(call, axes, x.ndim))
        for d in sorted(drop):
            if I.const_int(x.values[d]) not in (1, None):
                raise I.error(call, f"dimension {d} of x {I.dims_text(x.values)} is not 1")
    return TensorStructInfo(tuple(s for d, s in enumerate(x.values) if d not in drop), x.dtype)


@def_legalize("relax.squeeze")
def _legalize_squeeze(bb: Any, call: Call) -> Expr:
    return bb.call_te(_te_reshape_to, call.args[0], list(_out_values(call)),
                      primfunc_name_hint="squeeze")


@def_numpy("relax.squeeze")
def _numpy_squeeze(x: np.ndarray, axis: Any = None) -> np.ndarray:
    return np.squeeze(x, axis)


# ---- concat / split ---------------------------------------------------------------------------

def concat(tensors: Expr | Sequence[Expr], axis: int = 0) -> Call:
    """The tensors joined along ``axis``; the other dimensions must agree."""
    if not isinstance(tensors, Expr):
        tensors = Tuple(tuple(tensors))
    return make_call("relax.concat", (tensors,), {"axis": axis})


@def_infer("relax.concat")
def _infer_concat(call: Call, ctx: Any) -> StructInfo:
    fields = I.tuple_of_tensors(call, 0, "tensors")
    if not fields:
        raise I.error(call, "needs at least one tensor")
    dtype = I.same_dtype(call, [(f"tensors[{i}]", f) for i, f in enumerate(fields)])
    ndims = {f.ndim for f in fields if f.ndim >= 0}
    if len(ndims) > 1:
        raise I.error(call, "tensors must have the same rank, got "
                            + ", ".join(I.dims_text(f.values) for f in fields))
    if any(f.shape is None for f in fields):
        return TensorStructInfo(None, dtype, ndims.pop() if ndims else -1)
    ndim = len(fields[0].values)
    axis = I.norm_axis(call, call.attrs.get("axis", 0), ndim)
    out = list(fields[0].values)
    for i, f in enumerate(fields[1:], 1):
        for d in range(ndim):
            if d != axis and I.prove_equal(out[d], f.values[d]) is False:
                raise I.error(call, f"tensors[{i}] {I.dims_text(f.values)} does not match "
                                    f"tensors[0] {I.dims_text(fields[0].values)} in dimension "
                                    f"{d} (only axis {axis} may differ)")
    out[axis] = _sum([f.values[axis] for f in fields])
    return TensorStructInfo(tuple(out), dtype)


def _sum(dims: Sequence[PrimExpr]) -> PrimExpr:
    from workbench.tir.arith.analyzer import Analyzer
    total: PrimExpr = IntImm("int64", 0)
    for d in dims:
        total = tir_op.add(total, d)
    return Analyzer().simplify(total)


@def_legalize("relax.concat")
def _legalize_concat(bb: Any, call: Call) -> Expr:
    from workbench.topi.transform import concatenate
    ndim = call.struct_info.ndim
    axis = call.attrs.get("axis", 0) % ndim
    return bb.call_te(concatenate, call.args[0], axis, primfunc_name_hint="concatenate")


@def_numpy("relax.concat")
def _numpy_concat(tensors: tuple, axis: int = 0) -> np.ndarray:
    return np.concatenate(tensors, axis=axis)


def split(x: Expr, indices_or_sections: int | Sequence[int], axis: int = 0) -> Call:
    """A tuple of pieces of ``x`` along ``axis``: ``n`` equal sections, or cut at the given
    indices (numpy's ``split``)."""
    ios = indices_or_sections
    ios = int(ios) if isinstance(ios, int) else tuple(int(i) for i in ios)
    return make_call("relax.split", (x,), {"indices_or_sections": ios, "axis": axis})


def _split_bounds(call: Call, extent: PrimExpr) -> list[tuple[PrimExpr, PrimExpr]]:
    """``(begin, size)`` of each piece."""
    ios = call.attrs["indices_or_sections"]
    n = I.const_int(extent)
    if isinstance(ios, int):
        if ios <= 0:
            raise I.error(call, f"indices_or_sections must be positive, got {ios}")
        if n is None:
            size = tir_op.floordiv(extent, IntImm("int64", ios))
            return [(tir_op.mul(size, IntImm("int64", k)), size) for k in range(ios)]
        if n % ios:
            raise I.error(call, f"cannot split a dimension of {n} into {ios} equal sections")
        return [(IntImm("int64", k * (n // ios)), IntImm("int64", n // ios)) for k in range(ios)]
    if n is None:
        raise I.error(call, "splitting a symbolic dimension at indices is not supported")
    cuts = [0] + [min(max(int(i), 0), n) for i in ios] + [n]
    return [(IntImm("int64", a), IntImm("int64", max(b - a, 0))) for a, b in zip(cuts, cuts[1:])]


@def_infer("relax.split")
def _infer_split(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "x")
    ios = call.attrs["indices_or_sections"]
    count = ios if isinstance(ios, int) else len(ios) + 1
    if x.shape is None:
        return TupleStructInfo(tuple(TensorStructInfo(None, x.dtype, x.ndim)
                                     for _ in range(count)))
    axis = I.norm_axis(call, call.attrs.get("axis", 0), x.ndim)
    pieces = []
    for _, size in _split_bounds(call, x.values[axis]):
        shape = list(x.values)
        shape[axis] = size
        pieces.append(TensorStructInfo(tuple(shape), x.dtype))
    return TupleStructInfo(tuple(pieces))


def _te_split(x: Any, bounds: list, axis: int, shapes: list) -> list:
    from workbench import te
    def piece(begin: Any):
        def f(*i: Any) -> Any:
            idx = list(i)
            idx[axis] = idx[axis] + begin
            return x[tuple(idx)]
        return f
    return [te.compute(tuple(shape), piece(begin), name=f"T_split_{k}")
            for k, ((begin, _), shape) in enumerate(zip(bounds, shapes))]


@def_legalize("relax.split")
def _legalize_split(bb: Any, call: Call) -> Expr:
    x = call.args[0].struct_info
    axis = call.attrs.get("axis", 0) % x.ndim
    bounds = _split_bounds(call, x.values[axis])
    shapes = [list(f.values) for f in call.struct_info.fields]
    return bb.call_te(_te_split, call.args[0], bounds, axis, shapes, primfunc_name_hint="split")


@def_numpy("relax.split")
def _numpy_split(x: np.ndarray, indices_or_sections: Any, axis: int = 0) -> tuple:
    ios = indices_or_sections if isinstance(indices_or_sections, int) \
        else list(indices_or_sections)
    return tuple(np.split(x, ios, axis=axis))


# ---- broadcast_to -----------------------------------------------------------------------------

def broadcast_to(x: Expr, shape: Any) -> Call:
    """``x`` stretched to ``shape`` (numpy's ``broadcast_to``)."""
    if not isinstance(shape, Expr):
        shape = ShapeExpr(tuple(shape))
    return make_call("relax.broadcast_to", (x, shape))


@def_infer("relax.broadcast_to")
def _infer_broadcast_to(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "x")
    shape = call.args[1]
    if not isinstance(shape, ShapeExpr):
        raise I.error(call, "the target shape must be a ShapeExpr")
    target = TensorStructInfo(shape.values, x.dtype)
    if x.shape is not None:
        if x.ndim > target.ndim:
            raise I.error(call, f"cannot broadcast x {I.dims_text(x.values)} to the lower-rank "
                                f"shape {I.dims_text(shape.values)}")
        for d, (a, b) in enumerate(zip(x.values[::-1], shape.values[::-1])):
            if I.const_int(a) != 1 and I.prove_equal(a, b) is False:
                raise I.error(call, f"cannot broadcast x {I.dims_text(x.values)} to "
                                    f"{I.dims_text(shape.values)}: dimension "
                                    f"{x.ndim - 1 - d} is neither 1 nor equal")
    return target


@def_legalize("relax.broadcast_to")
def _legalize_broadcast_to(bb: Any, call: Call) -> Expr:
    from workbench.topi.broadcast import broadcast_to as te_broadcast_to
    return bb.call_te(te_broadcast_to, call.args[0], list(_out_values(call)),
                      primfunc_name_hint="broadcast_to")


@def_numpy("relax.broadcast_to")
def _numpy_broadcast_to(x: np.ndarray, shape: tuple) -> np.ndarray:
    return np.broadcast_to(x, shape).copy()


__all__ = ["reshape", "permute_dims", "flatten", "expand_dims", "squeeze", "concat", "split",
           "broadcast_to"]
