"""``requantize``: int32 accumulators back to 8-bit integers (TVM's ``qnn.requantize``).

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

__all__ = ["requantize"]


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
