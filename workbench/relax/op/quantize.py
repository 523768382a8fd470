"""``requantize``: int32 accumulators back to 8-bit integers (TVM's ``qnn.requantize``);
``quantize`` / ``dequantize`` (TVM's ``relax.op.quantize`` / ``dequantize``, with ONNX
QuantizeLinear / DequantizeLinear arithmetic) between float tensors and integer ones.

Quantized matrix products and convolutions are ``matmul`` / ``linear`` / ``nn.conv2d`` with
``out_dtype="int32"`` on int8/uint8 operands; this op rescales their results. Scales and zero
points are tensors (0-d, or 1-d per channel along ``axis``), usually constants.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.ir import dtype as dt
from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo

__all__ = ["requantize", "quantize", "dequantize"]


def requantize(data: Expr, input_scale: Expr, input_zero_point: Expr, output_scale: Expr,
               output_zero_point: Expr, axis: int = -1, out_dtype: str = "int8") -> Call:
    """``clip(round((data - in_zp) * in_scale / out_scale) + out_zp)`` in ``out_dtype``
    (round half to even, float64 arithmetic; see ``topi.nn.requantize``)."""
    return make_call("relax.requantize", (data, input_scale, input_zero_point, output_scale,
                                          output_zero_point),
                     {"axis": int(axis), "out_dtype": dt.normalize(out_dtype)})


_PARAMS = ("input_scale", "input_zero_point", "output_scale", "output_zero_point")


@def_infer("relax.requantize")
def _infer_requantize(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "data")
    if x.dtype and not dt.parse(x.dtype).is_integer:
        raise I.error(call, f"data must be an integer tensor (an int32 accumulator), got "
                            f"{x.dtype}")
    out_dtype = call.attrs["out_dtype"]
    if not dt.parse(out_dtype).is_integer:
        raise I.error(call, f"out_dtype must be an integer type, got {out_dtype}")
    for k, name in enumerate(_PARAMS, start=1):
        p = I.tensor_arg(call, k, name)
        if p.ndim > 1:
            raise I.error(call, f"{name} must be 0-d or 1-d (per channel), got "
                                f"{I.sinfo_text(p)}")
    if x.ndim >= 0:
        I.norm_axis(call, call.attrs["axis"], max(x.ndim, 1))
    return TensorStructInfo(x.shape, out_dtype, x.ndim)


@def_legalize("relax.requantize")
def _legalize_requantize(bb: Any, call: Call) -> Expr:
    from workbench.topi.nn.quantize import requantize as te_requantize
    return bb.call_te(te_requantize, *call.args, axis=call.attrs["axis"],
                      out_dtype=call.attrs["out_dtype"], primfunc_name_hint="requantize")


@def_numpy("relax.requantize")
def _numpy_requantize(x: np.ndarray, in_scale: np.ndarray, in_zp: np.ndarray,
                      out_scale: np.ndarray, out_zp: np.ndarray, axis: int = -1,
                      out_dtype: str = "int8") -> np.ndarray:
    axis = axis % max(x.ndim, 1)

    def along(p: np.ndarray, dtype: str) -> np.ndarray:
        p = np.asarray(p).astype(dtype)
        if p.ndim == 1:
            shape = [1] * x.ndim
            shape[axis] = p.shape[0]
            p = p.reshape(shape)
        return p
    scale = along(in_scale, "float64") / along(out_scale, "float64")
    q = np.round((x.astype(np.float64) - along(in_zp, "float64")) * scale).astype(np.int64)
    q = q + along(out_zp, "int64")
    info = np.iinfo(out_dtype)
    return np.clip(q, info.min, info.max).astype(out_dtype)


def quantize(data: Expr, scale: Expr, zero_point: Expr, axis: int = -1,
             out_dtype: str = "int8") -> Call:
    """``clip(round(data / scale) + zero_point)`` in ``out_dtype`` (TVM's
    ``relax.op.quantize``; ONNX ``QuantizeLinear`` arithmetic: division in the data's float
    type, round half to even, saturation). ``scale`` / ``zero_point``: 0-d or 1-d along
    ``axis``."""
    return make_call("relax.quantize", (data, scale, zero_point),
                     {"axis": int(axis), "out_dtype": dt.normalize(out_dtype)})


def dequantize(data: Expr, scale: Expr, zero_point: Expr, axis: int = -1,
               out_dtype: str = "float32") -> Call:
    """``(data - zero_point) * scale`` in ``out_dtype`` (TVM's ``relax.op.dequantize``; ONNX
    ``DequantizeLinear`` arithmetic: exact integer difference, then a float multiply)."""
    return make_call("relax.dequantize", (data, scale, zero_point),
                     {"axis": int(axis), "out_dtype": dt.normalize(out_dtype)})


def _infer_q(name: str, in_kind: str, out_kind: str):
    def infer(call: Call, ctx: Any) -> StructInfo:
        x = I.tensor_arg(call, 0, "data")
        if x.dtype and getattr(dt.parse(x.dtype), f"is_{in_kind}") is not True:
            raise I.error(call, f"data must be a{'n' if in_kind == 'integer' else ''} "
                                f"{in_kind} tensor, got {x.dtype}")
        out_dtype = call.attrs["out_dtype"]
        if not getattr(dt.parse(out_dtype), f"is_{out_kind}"):
            raise I.error(call, f"out_dtype must be a{'n' if out_kind == 'integer' else ''} "
                                f"{out_kind} type, got {out_dtype}")
        for k, pname in enumerate(("scale", "zero_point"), start=1):
            p = I.tensor_arg(call, k, pname)
            if p.ndim > 1:
                raise I.error(call, f"{pname} must be 0-d or 1-d (per channel), got "
                                    f"{I.sinfo_text(p)}")
        if x.ndim >= 0:
            I.norm_axis(call, call.attrs["axis"], max(x.ndim, 1))
        return TensorStructInfo(x.shape, out_dtype, x.ndim)
    return infer


def_infer("relax.quantize")(_infer_q("quantize", "float", "integer"))
def_infer("relax.dequantize")(_infer_q("dequantize", "integer", "float"))


@def_legalize("relax.quantize")
def _legalize_quantize(bb: Any, call: Call) -> Expr:
    from workbench.topi.nn.quantize import quantize as te_quantize
    return bb.call_te(te_quantize, *call.args, axis=call.attrs["axis"],
                      out_dtype=call.attrs["out_dtype"], primfunc_name_hint="quantize")


@def_legalize("relax.dequantize")
def _legalize_dequantize(bb: Any, call: Call) -> Expr:
    from workbench.topi.nn.quantize import dequantize as te_dequantize
    return bb.call_te(te_dequantize, *call.args, axis=call.attrs["axis"],
                      out_dtype=call.attrs["out_dtype"], primfunc_name_hint="dequantize")


def _along(p: np.ndarray, x: np.ndarray, axis: int, dtype: str) -> np.ndarray:
    p = np.asarray(p).astype(dtype)
    if p.ndim == 1:
        shape = [1] * x.ndim
        shape[axis % max(x.ndim, 1)] = p.shape[0]
        p = p.reshape(shape)
    return p


@def_numpy("relax.quantize")
def _numpy_quantize(x: np.ndarray, scale: np.ndarray, zp: np.ndarray, axis: int = -1,
                    out_dtype: str = "int8") -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        q = np.round(x / _along(scale, x, axis, x.dtype))
    big = 65504.0 if x.dtype == np.float16 else 2.0 ** 40
    q = np.clip(q, -big, big).astype(np.int64) + _along(zp, x, axis, "int64")
    info = np.iinfo(out_dtype)
    return np.clip(q, info.min, info.max).astype(out_dtype)


@def_numpy("relax.dequantize")
def _numpy_dequantize(x: np.ndarray, scale: np.ndarray, zp: np.ndarray, axis: int = -1,
                      out_dtype: str = "float32") -> np.ndarray:
    d = (x.astype(np.int64) - _along(zp, x, axis, "int64")).astype(out_dtype)
    return d * _along(scale, x, axis, out_dtype)
