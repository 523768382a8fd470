"""ONNX converters: constants, shapes and shape arithmetic, reshapes, joining and splitting,
slicing and gathering.

``Shape`` of a tensor is a known value: an int64 array, or (with dynamic dims) an object array
of ints and TIR ``PrimExpr`` s. The ops an exporter uses on shapes (Gather, Concat, Unsqueeze,
Slice, arithmetic, ...) compute such values at import time, so ``Reshape`` / ``Expand`` /
``ConstantOfShape`` get their target shapes as ShapeExprs.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Expr, ShapeExpr, TupleGetItem
from workbench.relax.frontend.onnx._registry import converter
from workbench.relax.frontend.onnx.importer import onnx_dtype
from workbench.relax.frontend.onnx.ops_elementwise import operands
from workbench.relax.struct_info import ShapeStructInfo, TensorStructInfo
from workbench.tir.expr import IntImm, PrimExpr, SizeVar

_INT64_MAX = 2 ** 63 - 1


def _values(e: Expr) -> tuple:
    si = e.struct_info
    if not isinstance(si, TensorStructInfo) or si.shape is None:
        raise NotImplementedError("a tensor of unknown shape")
    return tuple(si.values)


def _py(d: Any) -> Any:
    """A dim as a Python int when static, else the PrimExpr."""
    return int(d.value) if isinstance(d, IntImm) else d


def shape_array(dims: Any) -> np.ndarray:
    """A known shape value: int64 when every dim is static, else an object array."""
    dims = [_py(d) for d in dims]
    if all(isinstance(d, (int, np.integer)) for d in dims):
        return np.asarray(dims, dtype="int64").reshape(len(dims))
    out = np.empty(len(dims), dtype=object)
    out[:] = dims
    return out


def _shape_expr(imp: Any, values: np.ndarray) -> list[PrimExpr]:
    return [imp.dim(v) for v in values.reshape(-1)]


def run_time_shape(imp: Any, node: Any, v: Any, what: str) -> np.ndarray:
    """A shape held in a tensor known only at run time, as a known shape value of symbolic
    dims: ``tensor_to_shape`` then a ``match_cast`` naming each dim (the values of a 1-d
    integer tensor of static length)."""
    t = imp.expr(v)
    si = t.struct_info
    n = _py(si.values[0]) if isinstance(si, TensorStructInfo) and si.shape is not None and \
        len(si.values) == 1 else None
    if not isinstance(n, int):
        raise NotImplementedError(f"{what} computed at run time from a tensor of unknown "
                                  "length")
    if si.dtype != "int64":
        t = imp.emit(R.astype(t, "int64"))
    shape = imp.emit(R.tensor_to_shape(t))
    base = re.sub(r"[^0-9A-Za-z_]", "_", node.output[0])
    dims = [SizeVar(f"{base}_{k}", "int64") for k in range(n)]
    imp.bb.match_cast(shape, ShapeStructInfo(tuple(dims)))
    out = np.empty(n, dtype=object)
    out[:] = dims
    return out


def _shape_value(imp: Any, node: Any, v: Any, what: str) -> np.ndarray:
    """A shape input: known at import time, or read at run time (:func:`run_time_shape`)."""
    known = imp.known(v)
    return known if known is not None else run_time_shape(imp, node, v, what)


def _int_list(imp: Any, v: Any, what: str) -> list[int]:
    k = imp.known(v)
    if k is None or k.dtype == object:
        raise NotImplementedError(f"{what} computed at run time")
    return [int(x) for x in k.reshape(-1)]


# ---- constants and shapes ----------------------------------------------------------------------

def _constant_value(attrs: dict) -> np.ndarray:
    if "value" in attrs:
        return np.asarray(attrs["value"])
    for key, dtype in (("value_float", "float32"), ("value_int", "int64"),
                       ("value_floats", "float32"), ("value_ints", "int64")):
        if key in attrs:
            return np.asarray(attrs[key], dtype=dtype)
    raise NotImplementedError(f"Constant with attributes {sorted(attrs)}")


@converter("Constant", fold=lambda imp, node, inputs, attrs: _constant_value(attrs))
def _constant(imp: Any, node: Any, inputs: list, attrs: dict) -> np.ndarray:
    return _constant_value(attrs)


def _shape_slice(dims: tuple, attrs: dict) -> tuple:
    start, end = attrs.get("start", 0), attrs.get("end")
    return dims[start:end]


@converter("Shape", fold=lambda imp, node, inputs, attrs:
           np.asarray(_shape_slice(inputs[0].shape, attrs), dtype="int64"))
def _shape(imp: Any, node: Any, inputs: list, attrs: dict) -> np.ndarray:
    return shape_array(_shape_slice(_values(imp.expr(inputs[0])), attrs))


@converter("Size", fold=lambda imp, node, inputs, attrs: np.asarray(inputs[0].size, "int64"))
def _size(imp: Any, node: Any, inputs: list, attrs: dict) -> np.ndarray:
    total: Any = 1
    for d in _values(imp.expr(inputs[0])):
        total = total * _py(d)
    return np.asarray(total, dtype="int64" if isinstance(total, int) else object)


def _fill_fold(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    shape = inputs[0]
    if shape.dtype == object or int(np.prod(shape)) > 4096:
        return None  # symbolic or big: a broadcast at run time, not a constant
    value = attrs.get("value", np.zeros(1, dtype="float32"))
    return np.full([int(s) for s in shape], value.reshape(-1)[0], dtype=value.dtype)


@converter("ConstantOfShape", fold=_fill_fold)
def _constant_of_shape(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    value = attrs.get("value", np.zeros(1, dtype="float32"))
    shape = _shape_value(imp, node, inputs[0], "ConstantOfShape's shape")
    scalar = imp.expr(np.asarray(value.reshape(-1)[0], dtype=value.dtype))
    return R.broadcast_to(scalar, _shape_expr(imp, shape))


def _range_fold(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    if any(a.dtype == object for a in inputs):
        return None
    start, limit, delta = (a.reshape(()) for a in inputs)
    return np.arange(start, limit, delta).astype(np.result_type(start, limit, delta))


@converter("Range", fold=_range_fold)
def _range(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    """Symbolic bounds (shape arithmetic): ``arange`` of a symbolic length; bounds in tensors
    at run time: the length ``max(ceil((limit - start) / delta), 0)`` read as a shape, then
    ``start + delta * arange(n)``."""
    known = [imp.known(v) for v in inputs]
    if all(k is not None for k in known):
        start, limit, delta = (k.reshape(-1)[0] for k in known)
        dtype = next((str(k.dtype) for k in known if k.dtype != object), "int64")
        return R.arange(start, limit, delta, dtype)
    start, limit, delta = operands(imp, *inputs)
    start, limit, delta = (imp.emit(R.reshape(v, [])) for v in (start, limit, delta))
    dtype = start.struct_info.dtype
    span = imp.emit(R.divide(R.astype(R.subtract(limit, start), "float64"),
                             R.astype(delta, "float64")))
    length = imp.emit(R.maximum(R.ceil(span), imp.expr(np.asarray(0.0))))
    count = imp.emit(R.reshape(R.astype(length, "int64"), [1]))
    n = run_time_shape(imp, node, count, "Range's length")[0]
    steps = imp.emit(R.arange(0, n, 1, dtype))
    return R.add(imp.emit(R.multiply(steps, delta)), start)


# ---- reshapes ----------------------------------------------------------------------------------

def _reshape_target(imp: Any, x_dims: tuple, shape: np.ndarray, allowzero: bool) -> list:
    out = []
    for i, s in enumerate(shape.reshape(-1)):
        if isinstance(s, (int, np.integer)) and int(s) == 0 and not allowzero:
            out.append(x_dims[i])
        else:
            out.append(imp.dim(s) if not isinstance(s, (int, np.integer)) else int(s))
    return out


def _reshape_fold(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    x, shape = inputs
    if shape.dtype == object:
        return None
    target = [x.shape[i] if s == 0 and not attrs.get("allowzero", 0) else int(s)
              for i, s in enumerate(shape)]
    return x.reshape(target)


@converter("Reshape", fold=_reshape_fold)
def _reshape(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    allowzero = bool(attrs.get("allowzero", 0))
    shape = imp.known(inputs[1])
    if shape is None:
        shape = run_time_shape(imp, node, _resolved_target(imp, x, inputs[1], allowzero),
                               "Reshape's shape")
    target = _reshape_target(imp, _values(x), shape, allowzero)
    return R.reshape(x, ShapeExpr(tuple(imp.dim(d) if not isinstance(d, int) else
                                        IntImm("int64", d) for d in target)))


def _resolved_target(imp: Any, x: Expr, shape: Any, allowzero: bool) -> Expr:
    """A run-time Reshape target with its 0s (copy the input's dim) and -1 (the rest)
    resolved by tensor arithmetic (the input's shape must be static)."""
    dims = [_py(d) for d in _values(x)]
    if not all(isinstance(d, int) for d in dims):
        raise NotImplementedError("Reshape to a run-time shape of a tensor of dynamic shape")
    s = imp.expr(shape)
    if s.struct_info.dtype != "int64":
        s = imp.emit(R.astype(s, "int64"))
    k = _py(s.struct_info.values[0])
    c = lambda v: imp.expr(np.asarray(v, dtype="int64"))  # noqa: E731
    if not allowzero:
        own = (dims + [0] * k)[:k]
        s = imp.emit(R.where(R.equal(s, c(0)), c(own), s))
    rest = imp.emit(R.prod(imp.emit(R.where(R.equal(s, c(-1)), c(1), s)), [0]))
    total = int(np.prod(dims))
    return imp.emit(R.where(R.equal(s, c(-1)), imp.emit(R.floor_divide(c(total), rest)), s))


@converter("Flatten")
def _flatten(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    dims = _values(x)
    axis = attrs.get("axis", 1) % (len(dims) + 1) if dims else 0
    left: Any = IntImm("int64", 1)
    right: Any = IntImm("int64", 1)
    for d in dims[:axis]:
        left = left * d
    for d in dims[axis:]:
        right = right * d
    return R.reshape(x, [left, right])


@converter("Transpose", fold=lambda imp, node, inputs, attrs:
           np.transpose(inputs[0], attrs.get("perm")))
def _transpose(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    return R.permute_dims(imp.expr(inputs[0]), attrs.get("perm"))


def _axes_input(imp: Any, inputs: list, attrs: dict) -> list[int] | None:
    if len(inputs) > 1 and inputs[1] is not None:
        return _int_list(imp, inputs[1], "axes")
    return attrs.get("axes")


@converter("Unsqueeze", fold=lambda imp, node, inputs, attrs:
           np.expand_dims(inputs[0], tuple(_axes_input(imp, inputs, attrs))))
def _unsqueeze(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    rank = len(_values(x))
    axes = sorted(a % (rank + len(_axes_input(imp, inputs, attrs)))
                  for a in _axes_input(imp, inputs, attrs))
    return R.expand_dims(x, axes)


def _squeeze_fold(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    axes = _axes_input(imp, inputs, attrs)
    return np.squeeze(inputs[0], None if axes is None else tuple(axes))


@converter("Squeeze", fold=_squeeze_fold)
def _squeeze(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    axes = _axes_input(imp, inputs, attrs)
    rank = len(_values(x))
    return R.squeeze(x, None if axes is None else [a % rank for a in axes])


def _expand_target(x_dims: tuple, shape: list) -> list:
    rank = max(len(x_dims), len(shape))
    xs = [IntImm("int64", 1)] * (rank - len(x_dims)) + list(x_dims)
    ss = [1] * (rank - len(shape)) + list(shape)
    out = []
    for a, b in zip(xs, ss):
        if isinstance(b, (int, np.integer)) and int(b) == 1:
            out.append(a)
        elif not isinstance(b, (int, np.integer)) and _py(a) != 1 and isinstance(_py(a), int):
            out.append(a)  # a symbolic b is 1 or a (a valid model broadcasts): a either way
        else:
            out.append(b)
    return out


@converter("Expand", fold=lambda imp, node, inputs, attrs:
           None if inputs[1].dtype == object else
           np.broadcast_to(inputs[0], np.broadcast_shapes(inputs[0].shape,
                                                          tuple(inputs[1]))).copy())
def _expand(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    shape = _shape_value(imp, node, inputs[1], "Expand's shape")
    target = [imp.dim(d) for d in _expand_target(_values(x), list(shape.reshape(-1)))]
    return R.broadcast_to(x, target)


@converter("Tile", fold=lambda imp, node, inputs, attrs:
           None if inputs[0].dtype == object else np.tile(inputs[0], inputs[1]))
def _tile(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    reps = [imp.dim(r) for r in _shape_value(imp, node, inputs[1], "Tile's repeats")]
    dims = _values(x)
    inter, wide, final = [], [], []
    for r, d in zip(reps, dims):
        inter += [IntImm("int64", 1), d]
        wide += [r, d]
        final.append(d * r)
    x = imp.emit(R.reshape(x, inter))
    x = imp.emit(R.broadcast_to(x, wide))
    return R.reshape(x, final)


# ---- joining and splitting ------------------------------------------------------------------

def _concat_fold(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    parts = [a for a in inputs if a is not None and a.size]
    if not parts:
        return np.concatenate(inputs, attrs["axis"])
    return np.concatenate(parts, attrs["axis"])


@converter("Concat", fold=_concat_fold)
def _concat(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    parts = [v for v in inputs if not (imp.known(v) is not None and imp.known(v).size == 0)]
    vals = operands(imp, *parts)
    if len(vals) == 1:
        return vals[0]
    return R.concat(vals, attrs["axis"] % len(_values(vals[0])))


@converter("Split")
def _split(imp: Any, node: Any, inputs: list, attrs: dict) -> list:
    x = imp.expr(inputs[0])
    dims = _values(x)
    axis = attrs.get("axis", 0) % len(dims)
    n_out = len(node.output)
    if len(inputs) > 1 and inputs[1] is not None:
        sizes = _int_list(imp, inputs[1], "Split sizes")
    elif "split" in attrs:
        sizes = list(attrs["split"])
    else:
        total = _py(dims[axis])
        if not isinstance(total, int):
            parts = imp.emit(R.split(x, n_out, axis))
            return [imp.emit(TupleGetItem(parts, i)) for i in range(n_out)]
        step = -(-total // attrs.get("num_outputs", n_out))
        sizes = [min(step, total - k) for k in range(0, total, step)]
    cuts = [int(c) for c in np.cumsum(sizes)[:-1]]
    if not cuts:
        return [x]
    parts = imp.emit(R.split(x, cuts, axis))
    return [imp.emit(TupleGetItem(parts, i)) for i in range(len(sizes))]


@converter("DepthToSpace")
def _depth_to_space(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    n, c, h, w = _values(x)
    b = attrs["blocksize"]
    if attrs.get("mode", "DCR") == "DCR":
        y = imp.emit(R.reshape(x, [n, b, b, c // (b * b), h, w]))
        y = imp.emit(R.permute_dims(y, [0, 3, 4, 1, 5, 2]))
    else:
        y = imp.emit(R.reshape(x, [n, c // (b * b), b, b, h, w]))
        y = imp.emit(R.permute_dims(y, [0, 1, 4, 2, 5, 3]))
    return R.reshape(y, [n, c // (b * b), h * b, w * b])


@converter("SpaceToDepth")
def _space_to_depth(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    n, c, h, w = _values(x)
    b = attrs["blocksize"]
    y = imp.emit(R.reshape(x, [n, c, h // b, b, w // b, b]))
    y = imp.emit(R.permute_dims(y, [0, 3, 5, 1, 2, 4]))
    return R.reshape(y, [n, c * b * b, h // b, w // b])


def _eye_like_fold(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    x = inputs[0]
    dtype = onnx_dtype(attrs["dtype"]) if "dtype" in attrs else x.dtype
    return np.eye(x.shape[0], x.shape[1], attrs.get("k", 0), dtype=dtype)


@converter("EyeLike", fold=_eye_like_fold)
def _eye_like(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    rows, cols = (_py(d) for d in _values(x))
    if not (isinstance(rows, int) and isinstance(cols, int)):
        raise NotImplementedError("EyeLike of a dynamic shape")
    dtype = onnx_dtype(attrs["dtype"]) if "dtype" in attrs else x.struct_info.dtype
    return imp.expr(np.eye(rows, cols, attrs.get("k", 0), dtype=dtype))


@converter("OneHot")
def _one_hot(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    indices = imp.expr(inputs[0])
    depth = imp.known(inputs[1])
    if depth is None:
        raise NotImplementedError("OneHot with a depth computed at run time")
    depth = int(depth.reshape(-1)[0])
    values = imp.known(inputs[2])
    if values is None:
        raise NotImplementedError("OneHot with values computed at run time")
    rank = len(_values(indices))
    axis = attrs.get("axis", -1) % (rank + 1)
    idx = imp.emit(R.astype(indices, "int64")) if indices.struct_info.dtype != "int64" \
        else indices
    # Negative indices count from the end (-1 is depth - 1); others out of range hit nothing.
    size = imp.expr(np.asarray(depth, "int64"))
    idx = imp.emit(R.where(R.less(idx, imp.expr(np.asarray(0, "int64"))), R.add(idx, size),
                           idx))
    idx = imp.emit(R.expand_dims(idx, axis))
    shape = [1] * (rank + 1)
    shape[axis] = depth
    hit = imp.emit(R.equal(idx, imp.expr(np.arange(depth, dtype="int64").reshape(shape))))
    off, on = values.reshape(-1)[:2]
    return R.where(hit, imp.expr(np.asarray(on)), imp.expr(np.asarray(off)))


def _data_dependent(what: str):
    def convert(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
        raise NotImplementedError(f"{node.op_type} of {what} computed at run time: the "
                                  "output's size depends on the data (only known inputs are "
                                  "computed, at import time)")
    return convert


def _nonzero_fold(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    x = inputs[0]
    return None if x.dtype == object else np.asarray(np.nonzero(x), dtype="int64")


def _unique_fold(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    x = inputs[0]
    if x.dtype == object:
        return None
    axis = attrs.get("axis")
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                               return_counts=True, axis=axis)
    if not attrs.get("sorted", 1):  # in order of first occurrence
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        values = np.take(values, order, axis=0 if axis is None else axis)
        first, counts, inverse = first[order], counts[order], rank[inverse.reshape(-1)]
    return [values, first.astype("int64"), inverse.reshape(-1).astype("int64"),
            counts.astype("int64")][:len(node.output)]


converter("NonZero", fold=_nonzero_fold)(_data_dependent("a tensor"))
converter("Unique", fold=_unique_fold)(_data_dependent("a tensor"))


@converter("Compress")
def _compress(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    cond = imp.known(inputs[1])
    if cond is None:
        return _data_dependent("a condition")(imp, node, inputs, attrs)
    x = imp.expr(inputs[0])
    picked = np.nonzero(cond.reshape(-1).astype(bool))[0].astype("int64")
    axis = attrs.get("axis")
    if axis is None:
        x = imp.emit(R.reshape(x, [-1]))
        axis = 0
    n = _py(_values(x)[axis % len(_values(x))])
    if isinstance(n, int):
        picked = picked[picked < n]
    return R.take(x, imp.expr(picked), axis=axis % len(_values(x)))


# ---- padding ---------------------------------------------------------------------------------

_PAD_MODES = ("constant", "reflect", "edge", "wrap")  # relax.nn.pad's modes of these names


def _pad_widths(imp: Any, inputs: list, rank: int) -> list[tuple[int, int]]:
    """``(before, after)`` per dimension from ``pads`` (and opset 18's ``axes``)."""
    pads = _int_list(imp, inputs[1], "Pad pads")
    axes = list(range(rank))
    if len(inputs) > 3 and inputs[3] is not None:
        axes = [a % rank for a in _int_list(imp, inputs[3], "Pad axes")]
    if len(pads) != 2 * len(axes):
        raise ValueError(f"Pad: {len(pads)} pads for {len(axes)} axes")
    width = [(0, 0)] * rank
    for k, a in enumerate(axes):
        width[a] = (pads[k], pads[k + len(axes)])
    return width


def _pad_value(imp: Any, inputs: list) -> float:
    if len(inputs) > 2 and inputs[2] is not None:
        k = imp.known(inputs[2])
        if k is None:
            raise NotImplementedError("Pad with a constant_value computed at run time")
        if k.size:
            return k.reshape(-1)[0].item()
    return 0


@converter("Pad")
def _pad(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    dims = _values(x)
    width = _pad_widths(imp, inputs, len(dims))
    mode = attrs.get("mode", "constant")
    if mode not in _PAD_MODES:
        raise NotImplementedError(f"Pad mode {mode!r} (supported: {', '.join(_PAD_MODES)})")
    if any(b < 0 or a < 0 for b, a in width):  # negative pads crop first
        axes = [d for d, (b, a) in enumerate(width) if b < 0 or a < 0]
        ends = [(width[d][1] if width[d][1] < 0 else _INT64_MAX) for d in axes]
        x = imp.emit(R.strided_slice(x, axes, [max(-width[d][0], 0) for d in axes], ends))
        width = [(max(b, 0), max(a, 0)) for b, a in width]
    if not any(b or a for b, a in width):
        return x
    return R.nn.pad(x, width, mode, _pad_value(imp, inputs))


# ---- slicing and gathering -------------------------------------------------------------------

def _slice_args(imp: Any, inputs: list, rank: int) -> tuple[list, list, list, list]:
    starts = _int_list(imp, inputs[1], "Slice starts")
    ends = _int_list(imp, inputs[2], "Slice ends")
    axes = _int_list(imp, inputs[3], "Slice axes") if len(inputs) > 3 and inputs[3] is not None \
        else list(range(len(starts)))
    steps = _int_list(imp, inputs[4], "Slice steps") if len(inputs) > 4 and \
        inputs[4] is not None else [1] * len(starts)
    ends = [max(min(e, _INT64_MAX), -_INT64_MAX) for e in ends]
    return starts, ends, [a % rank for a in axes], steps


def _slice_fold(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    x = inputs[0]
    starts, ends, axes, steps = _slice_args(imp, inputs, x.ndim)
    index = [slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[a] = slice(s, e, st)
    return x[tuple(index)]


@converter("Slice", fold=_slice_fold)
def _slice(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    starts, ends, axes, steps = _slice_args(imp, inputs, len(_values(x)))
    return R.strided_slice(x, axes, starts, ends, steps)


@converter("Gather", fold=lambda imp, node, inputs, attrs:
           np.take(inputs[0], inputs[1].astype("int64"), axis=attrs.get("axis", 0)))
def _gather(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
    x = imp.expr(inputs[0])
    idx = imp.known(inputs[1])
    dims = _values(x)
    axis = attrs.get("axis", 0) % len(dims)
    if idx is not None and idx.ndim == 0:  # x[..., i, ...]: a slice, then drop the axis
        i = int(idx)
        n = _py(dims[axis])
        if i < 0 and isinstance(n, int):
            i += n
        end = i + 1 if i != -1 else _INT64_MAX
        part = imp.emit(R.strided_slice(x, [axis], [i], [end]))
        return R.squeeze(part, [axis])
    if idx is not None and (idx < 0).any():
        n = _py(dims[axis])
        if not isinstance(n, int):
            raise NotImplementedError("negative Gather indices on a dynamic dimension")
        return R.take(x, imp.expr(np.where(idx < 0, idx + n, idx)), axis=axis)
    return R.take(x, imp.expr(inputs[1]), axis=axis)


def _trilu(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    k = int(imp.known(inputs[1])) if len(inputs) > 1 and inputs[1] is not None else 0
    rows, cols = (_py(d) for d in _values(x)[-2:])
    if not (isinstance(rows, int) and isinstance(cols, int)):
        raise NotImplementedError("Trilu of a dynamic shape")
    fn = np.triu if attrs.get("upper", 1) else np.tril
    mask = fn(np.ones((rows, cols), dtype=bool), k)
    zero = imp.expr(np.zeros((), dtype=x.struct_info.dtype))
    return R.where(imp.expr(mask), x, zero)


converter("Trilu")(_trilu)


__all__ = ["shape_array"]
