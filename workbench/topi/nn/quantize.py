"""Quantized-integer helpers: ``requantize`` (TVM's ``qnn.requantize`` semantics),
``quantize`` and ``dequantize`` (ONNX QuantizeLinear / DequantizeLinear arithmetic).

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

__all__ = ["requantize", "quantize", "dequantize"]


def _per_channel(t: Tensor | float | int, idx: tuple[PrimExpr, ...], axis: int,
                 dtype: str) -> PrimExpr:
    """A scalar parameter, or the element of a 1-d per-channel parameter along ``axis``."""
    if not isinstance(t, Tensor):
        return op.const(t, dtype)
    if t.ndim == 0:
        return op.cast(dtype, t[()])
    if t.ndim == 1:
        return op.cast(dtype, t[idx[axis]])
    raise ValueError(f"scales and zero points must be scalars or 1-d, got a "
                     f"{t.ndim}-d tensor")


def _axis(name: str, data: Tensor, axis: int) -> int:
    ndim = data.ndim
    a = axis + ndim if axis < 0 else axis
    if not 0 <= a < max(ndim, 1):
        raise ValueError(f"{name}: axis {axis} is out of range for {ndim}-d data")
    return a


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


def quantize(data: Tensor, scale: Any, zero_point: Any, axis: int = -1,
             out_dtype: str = "int8") -> Tensor:
    """``clip(round(data / scale) + zero_point)`` in ``out_dtype`` (an 8/16/32-bit integer):
    ONNX ``QuantizeLinear``. ``data`` is float32 (or another float type; the arithmetic is
    in that type, as onnxruntime does in float32), ``round`` is half to even, the sum is
    taken in int64 and saturated to ``out_dtype``. ``scale`` / ``zero_point`` are numbers, 0-d,
    or 1-d along ``axis`` (per channel)."""
    out_dtype = dt.normalize(out_dtype)
    if not dt.parse(out_dtype).is_integer:
        raise ValueError(f"quantize: out_dtype must be an integer type, got {out_dtype}")
    ft = data.dtype
    if not dt.parse(ft).is_float:
        raise ValueError(f"quantize: data must be a float tensor, got {ft}")
    axis = _axis("quantize", data, axis)
    lo, hi = op.min_value(out_dtype), op.max_value(out_dtype)

    # Bound the rounded value before the int64 conversion (inf or a huge quotient would not
    # convert); anything beyond saturates anyway.
    big = 65504.0 if ft == "float16" else 2.0 ** 40

    def f(*idx: PrimExpr) -> PrimExpr:
        q = op.round(op.div(data[idx], _per_channel(scale, idx, axis, ft)))
        q = op.max(op.min(q, op.const(big, ft)), op.const(-big, ft))
        q = op.add(op.cast("int64", q), _per_channel(zero_point, idx, axis, "int64"))
        q = op.max(op.min(q, op.cast("int64", hi)), op.cast("int64", lo))
        return op.cast(out_dtype, q)
    return te.compute(data.shape, f, name="T_quantize", tag="elemwise")


def dequantize(data: Tensor, scale: Any, zero_point: Any, axis: int = -1,
               out_dtype: str = "float32") -> Tensor:
    """``(data - zero_point) * scale`` in ``out_dtype``: ONNX ``DequantizeLinear`` (the
    difference is exact in int64, then converted and multiplied in ``out_dtype``, as
    onnxruntime does in float32)."""
    out_dtype = dt.normalize(out_dtype)
    if not dt.parse(out_dtype).is_float:
        raise ValueError(f"dequantize: out_dtype must be a float type, got {out_dtype}")
    if not dt.parse(data.dtype).is_integer:
        raise ValueError(f"dequantize: data must be an integer tensor, got {data.dtype}")
    axis = _axis("dequantize", data, axis)

    def f(*idx: PrimExpr) -> PrimExpr:
        d = op.sub(op.cast("int64", data[idx]), _per_channel(zero_point, idx, axis, "int64"))
        return op.mul(op.cast(out_dtype, d), _per_channel(scale, idx, axis, out_dtype))
    return te.compute(data.shape, f, name="T_dequantize", tag="elemwise")
