"""Indexing: ``strided_slice`` (numpy slicing along chosen axes) and ``take`` (gather)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo
from workbench.tir import op as tir_op
from workbench.tir.expr import IntImm, PrimExpr

_I64 = "int64"


def strided_slice(x: Expr, axes: Sequence[int], begin: Sequence[int], end: Sequence[int],
                  strides: Sequence[int] | None = None, assume_inbound: bool = False) -> Call:
    """``x[begin:end:strides]`` along ``axes`` (Python slice semantics: negative values count
    from the end, out-of-range values are clamped)."""
    ints = lambda v: tuple(int(a) for a in v)  # noqa: E731
    attrs = {"axes": ints(axes), "begin": ints(begin), "end": ints(end),
             "strides": None if strides is None else ints(strides),
             "assume_inbound": bool(assume_inbound)}
    return make_call("relax.strided_slice", (x,), attrs)


def _slice_plan(call: Call, shape: Sequence[PrimExpr]) -> dict[int, tuple[PrimExpr, int, PrimExpr]]:
    """axis -> (start, step, length) for each sliced axis."""
    a = call.attrs
    axes, begin, end = a["axes"], a["begin"], a["end"]
    strides = a["strides"] or (1,) * len(axes)
    if not len(axes) == len(begin) == len(end) == len(strides):
        raise I.error(call, f"axes {list(axes)}, begin {list(begin)}, end {list(end)} and "
                            f"strides {list(strides)} must have the same length")
    plan: dict[int, tuple[PrimExpr, int, PrimExpr]] = {}
    for ax, b, e, s in zip(axes, begin, end, strides):
        d = I.norm_axis(call, ax, len(shape), "axes")
        if s == 0:
            raise I.error(call, "strides must be non-zero")
        n = I.const_int(shape[d])
        if n is not None:
            start, stop, step = slice(b, e, s).indices(n)
            plan[d] = (IntImm(_I64, start), step, IntImm(_I64, len(range(start, stop, step))))
            continue
        if s < 0:
            raise I.error(call, f"a negative stride on the symbolic dimension {d} is not "
                                "supported")
        ext = shape[d]
        start = IntImm(_I64, b) if b >= 0 else tir_op.max(tir_op.add(ext, b), IntImm(_I64, 0))
        stop = tir_op.min(IntImm(_I64, e), ext) if e >= 0 else tir_op.add(ext, e)
        from workbench.tir.arith.analyzer import Analyzer
        length = Analyzer().simplify(tir_op.max(tir_op.floordiv(
            tir_op.add(tir_op.sub(stop, start), s - 1), IntImm(_I64, s)), IntImm(_I64, 0)))
        plan[d] = (start, s, length)
    return plan


@def_infer("relax.strided_slice")
def _infer_strided_slice(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "x")
    if x.shape is None:
        return x
    plan = _slice_plan(call, x.values)
    return TensorStructInfo(tuple(plan[d][2] if d in plan else s
                                  for d, s in enumerate(x.values)), x.dtype)


def _te_strided_slice(x: Any, plan: dict, out_shape: list) -> Any:
    from workbench import te

    def f(*i: Any) -> Any:
        idx = []
        for d, v in enumerate(i):
            if d in plan:
                start, step, _ = plan[d]
                v = tir_op.add(tir_op.mul(v, step), tir_op.cast(v.dtype, start))
            idx.append(v)
        return x[tuple(idx)]
    return te.compute(tuple(out_shape), f, name="T_strided_slice")


@def_legalize("relax.strided_slice")
def _legalize_strided_slice(bb: Any, call: Call) -> Expr:
    x = call.args[0].struct_info
    return bb.call_te(_te_strided_slice, call.args[0], _slice_plan(call, x.values),
                      list(call.struct_info.values), primfunc_name_hint="strided_slice")


@def_numpy("relax.strided_slice")
def _numpy_strided_slice(x: np.ndarray, axes: tuple, begin: tuple, end: tuple,
                         strides: Any = None, assume_inbound: bool = False) -> np.ndarray:
    index: list[Any] = [slice(None)] * x.ndim
    for k, ax in enumerate(axes):
        index[ax] = slice(begin[k], end[k], strides[k] if strides else 1)
    return x[tuple(index)].copy()


# ---- take -------------------------------------------------------------------------------------

def take(x: Expr, indices: Expr, axis: int | None = None, mode: str = "fast") -> Call:
    """Elements of ``x`` at ``indices`` along ``axis`` (of the flattened ``x`` when None)."""
    if mode not in ("fast", "clip", "wrap"):
        raise ValueError(f"take: mode must be 'fast', 'clip' or 'wrap', got {mode!r}")
    return make_call("relax.take", (x, indices), {"axis": axis, "mode": mode})


@def_infer("relax.take")
def _infer_take(call: Call, ctx: Any) -> StructInfo:
    x, idx = I.tensor_arg(call, 0, "x"), I.tensor_arg(call, 1, "indices")
    if idx.dtype and not idx.dtype.startswith(("int", "uint")):
        raise I.error(call, f"indices must be an integer tensor, got dtype {idx.dtype}")
    axis = call.attrs.get("axis")
    if x.shape is None or idx.shape is None:
        return TensorStructInfo(None, x.dtype)
    if axis is None:
        return TensorStructInfo(idx.values, x.dtype)  # indexes the flattened x
    d = I.norm_axis(call, axis, x.ndim)
    return TensorStructInfo(x.values[:d] + idx.values + x.values[d + 1:], x.dtype)


@def_legalize("relax.take")
def _legalize_take(bb: Any, call: Call) -> Expr:
    from workbench.topi.transform import take as te_take
    axis = call.attrs.get("axis")
    if axis is not None:
        axis %= call.args[0].struct_info.ndim
    return bb.call_te(te_take, call.args[0], call.args[1], axis, mode=call.attrs["mode"],
                      primfunc_name_hint="take")


@def_numpy("relax.take")
def _numpy_take(x: np.ndarray, indices: np.ndarray, axis: Any = None,
                mode: str = "fast") -> np.ndarray:
    np_mode = {"fast": "raise", "clip": "clip", "wrap": "wrap"}[mode]
    return np.take(x, indices, axis=axis, mode=np_mode)


__all__ = ["strided_slice", "take"]
