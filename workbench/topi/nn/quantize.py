"""Quantized-integer helpers: ``requantize`` (TVM's ``qnn.requantize`` semantics).

int8/uint8 matrix products and convolutions are the ordinary ``dense`` / ``matmul`` /
``conv2d`` with ``out_dtype="int32"`` (their operands are cast before multiplying, so they
accumulate exactly in int32); ``requantize`` brings the int32 result back to 8 bits.
"""
from __future__ import annotations

from typing import Any

from workbench import te
from workbench.ir import dtype as dt
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr

__all__ = ["requantize"]


def _per_channel(t: Tensor | float | int, idx: tuple[PrimExpr, ...], axis: int,
                 dtype: str) -> PrimExpr:
    """A scalar parameter, or the element of a 1-d per-channel parameter along ``axis``."""
    if not isinstance(t, Tensor):
        return op.const(t, dtype)
    if t.ndim == 0:
        return op.cast(dtype, t[()])
    if t.ndim == 1:
        return op.cast(dtype, t[idx[axis]])
    raise ValueError(f"requantize: scales and zero points must be scalars or 1-d, got a "
                     f"{t.ndim}-d tensor")


def requantize(data: Tensor, input_scale: Any, input_zero_point: Any, output_scale: Any,
               output_zero_point: Any, axis: int = -1, out_dtype: str = "int8") -> Tensor:
    """``clip(round((data - in_zp) * (in_scale / out_scale)) + out_zp)`` cast to ``out_dtype``.

    Scales and zero points are numbers, 0-d tensors, or 1-d tensors along ``axis`` (per
    channel). The arithmetic is float64 (exact for int32 inputs) and ``round`` is half to even
    (numpy's ``np.round``); TVM uses fixed-point arithmetic rounding half up by default, which
    can differ by one on exact halves.
    """
    out_dtype = dt.normalize(out_dtype)
    t = dt.parse(out_dtype)
    if not t.is_integer:
        raise ValueError(f"requantize: out_dtype must be an integer type, got {out_dtype}")
    if not dt.parse(data.dtype).is_integer:
        raise ValueError(f"requantize: data must be integer (e.g. an int32 accumulator), got "
                         f"{data.dtype}")
    ndim = data.ndim
    axis = axis + ndim if axis < 0 else axis
    if not 0 <= axis < max(ndim, 1):
        raise ValueError(f"requantize: axis {axis} is out of range for {ndim}-d data")
    lo, hi = op.min_value(out_dtype), op.max_value(out_dtype)

    def f(*idx: PrimExpr) -> PrimExpr:
        x = op.cast("float64", data[idx])
        in_zp = _per_channel(input_zero_point, idx, axis, "float64")
        scale = op.div(_per_channel(input_scale, idx, axis, "float64"),
                       _per_channel(output_scale, idx, axis, "float64"))
        q = op.cast("int64", op.round(op.mul(op.sub(x, in_zp), scale)))
        q = op.add(q, _per_channel(output_zero_point, idx, axis, "int64"))
        q = op.max(op.min(q, op.cast("int64", hi)), op.cast("int64", lo))
        return op.cast(out_dtype, q)
    return te.compute(data.shape, f, name="T_requantize", tag="elemwise")
