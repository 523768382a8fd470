"""``relax.nn.conv2d_nchwc_int8``: the uint8 x int8 -> int32 convolution on channel-blocked
data that ``ConvertLayoutNCHWc`` makes of a QDQ model's convolutions on AVX-512 VNNI targets
(data ``NCHW16c`` uint8, weight ``OIHW4i16o4i`` int8, output ``NCHW16c`` int32; see
:mod:`workbench.topi.nn.conv2d_nchwc_int8`)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.nn.convolution import out_extent, pad4, pair
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo
from workbench.tir.expr import IntImm

__all__ = ["conv2d_nchwc_int8"]


def conv2d_nchwc_int8(data: Expr, weight: Expr, strides: int | Sequence[int] = 1,
                      padding: int | Sequence[int] = 0, dilation: int | Sequence[int] = 1,
                      pad_value: int = 0) -> Call:
    """``int32`` sums of ``uint8`` data x ``int8`` weights on ``NCHW16c`` data with an
    ``OIHW4i16o4i`` weight (:func:`workbench.topi.nn.conv2d_nchwc_int8.pack_int8_weight`);
    padding holds ``pad_value`` (the data's zero point)."""
    if not 0 <= int(pad_value) <= 255:
        raise ValueError(f"conv2d_nchwc_int8: pad_value must be a uint8 value, got {pad_value}")
    return make_call("relax.nn.conv2d_nchwc_int8", (data, weight),
                     {"strides": pair(strides, "strides"), "padding": pad4(padding),
                      "dilation": pair(dilation, "dilation"), "pad_value": int(pad_value)})


@def_infer("relax.nn.conv2d_nchwc_int8")
def _infer(call: Call, ctx: Any) -> StructInfo:
    from workbench.topi.nn.conv2d_nchwc_int8 import INT8_BLOCK, INT8_K
    a = call.attrs
    x, w = I.tensor_arg(call, 0, "data"), I.tensor_arg(call, 1, "weight")
    if (x.dtype, w.dtype) != ("uint8", "int8"):
        raise I.error(call, f"expects uint8 data and an int8 weight, got {x.dtype} and "
                            f"{w.dtype}")
    if x.ndim not in (-1, 5) or w.ndim not in (-1, 7):
        raise I.error(call, f"expects NCHW16c data and an OIHW4i16o4i weight, got "
                            f"{I.dims_text(x.values)} and {I.dims_text(w.values)}")
    if x.shape is None or w.shape is None:
        return TensorStructInfo(None, "int32", 5)
    n, cb, h, wd, b = x.values
    ob, wcb, kh, kw, f, bo, k = w.values
    if I.const_int(b) != INT8_BLOCK or I.const_int(wcb) != I.const_int(cb) or \
            (I.const_int(f), I.const_int(bo), I.const_int(k)) != \
            (INT8_BLOCK // INT8_K, INT8_BLOCK, INT8_K):
        raise I.error(call, f"weight {I.dims_text(w.values)} is not an OIHW4i16o4i weight for "
                            f"data {I.dims_text(x.values)}")
    (sh, sw), (dh, dw) = a["strides"], a["dilation"]
    pt, pl, pb, pr = a["padding"]
    oh = out_extent(h, pt, pb, kh, sh, dh)
    ow = out_extent(wd, pl, pr, kw, sw, dw)
    return TensorStructInfo((n, IntImm("int64", I.const_int(ob)), oh, ow, b), "int32")


@def_legalize("relax.nn.conv2d_nchwc_int8")
def _legalize(bb: Any, call: Call) -> Expr:
    from workbench.topi.nn.conv2d_nchwc_int8 import conv2d_nchwc_int8 as te_conv
    a = call.attrs
    return bb.call_te(te_conv, call.args[0], call.args[1], list(a["strides"]),
                      list(a["padding"]), list(a["dilation"]), a["pad_value"],
                      primfunc_name_hint="conv2d_int8")


@def_numpy("relax.nn.conv2d_nchwc_int8")
def _numpy(x: np.ndarray, w: np.ndarray, strides: tuple, padding: tuple, dilation: tuple,
           pad_value: int = 0) -> np.ndarray:
    from workbench.topi.nn.conv2d_nchwc_int8 import conv2d_nchwc_int8_numpy
    return conv2d_nchwc_int8_numpy(x, w, strides, padding, dilation, pad_value)
