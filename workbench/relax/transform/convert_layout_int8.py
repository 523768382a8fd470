"""The integer form of a QDQ model's convolutions, for ``ConvertLayoutNCHWc`` on AVX-512 VNNI
targets (onnxruntime's QDQ -> QLinearConv fusion in effect).

A model quantized in the QDQ format (onnxruntime's ``quantize_static``) computes each
convolution on dequantized values::

    y = conv2d(dequantize(xq, sx, zx), dequantize(wq, sw, 0))       # float32

With ``xq`` blocked (its quantize / dequantize kept blocked by the layout pass), a per-tensor
``sx, zx`` and a constant int8 ``wq`` with per-output-channel (or one) ``sw`` and zero zero
points, this is exactly::

    xu  = xq + 128 as uint8 (int8 data; uint8 data as it is), zu = zx (+ 128)
    acc = conv2d_nchwc_int8(xu, pack(wq), pad_value=zu)             # int32, exact
    y   = float32(acc - zu * sum(wq[o])) * (sx * sw[o])

The padding holds ``zu``, so a padded position contributes ``zu * w`` like every other, and the
per-channel sum takes it out: the float model's zero padding exactly. Padding input channels
of the blocked data hold the zero point too (a quantized 0.0) and meet zero weights; padding
output channels get zero weights, sums and scales. The result is the float model's up to one
rounding of the rescale (the int32 sum is exact, where the float model accumulates rounded
products), which is how onnxruntime runs such a model.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.relax.expr import Call, Constant, Expr, Var
from workbench.relax.op.layout import to_layout_numpy
from workbench.relax.op.registry import get_op, make_call
from workbench.topi.nn.conv2d_nchwc_int8 import INT8_BLOCK, int8_weight_sums, pack_int8_weight

__all__ = ["int8_conv2d", "integer_conv2d"]


def _op(e: Any) -> str:
    return getattr(getattr(e, "op", None), "name", "") if isinstance(e, Call) else ""


def _scalar(conv: Any, e: Expr) -> np.ndarray | None:
    v = conv.constant(e)
    return None if v is None or v.size != 1 else v.reshape(())


def _per_channel(v: np.ndarray, o: int, op_: int) -> np.ndarray:
    """A per-output-channel constant (``o`` values, or one) as ``[1, O/16, 1, 1, 16]``."""
    full = np.zeros(op_, v.dtype)
    full[:o] = np.broadcast_to(v.reshape(-1), (o,))
    return to_layout_numpy(full.reshape(1, op_, 1, 1), "NCHW", f"NCHW{INT8_BLOCK}c")


def int8_conv2d(conv: Any, call: Call) -> tuple | None:
    """The integer form of ``call`` (a ``relax.nn.conv2d`` in the converter ``conv``), as the
    layout rules return it: (blocked float32 call, channels, plain layout); None when the
    convolution does not have the QDQ shape of the module docstring."""
    a = call.attrs
    x, w_expr = call.args
    if conv.B != INT8_BLOCK or int(a["groups"]) != 1 or not isinstance(x, Var):
        return None
    deq = conv.values.get(id(x))
    if _op(deq) != "relax.dequantize" or not isinstance(deq.args[0], Var):
        return None
    src = conv.blocked.get(id(deq.args[0]))
    sx, zx = (_scalar(conv, e) for e in deq.args[1:])
    if src is None or src.plain != a["data_layout"] or sx is None or zx is None or \
            src.var.struct_info.dtype not in ("int8", "uint8"):
        return None
    w_deq = w_expr
    if isinstance(w_deq, Var):
        w_deq = conv.values.get(id(w_deq))
    if _op(w_deq) != "relax.dequantize":
        return None
    wq, sw, zw = (conv.constant(e) for e in w_deq.args)
    if wq is None or sw is None or zw is None or wq.dtype != np.int8 or wq.ndim != 4 or \
            np.any(zw != 0) or sw.size not in (1, wq.shape[0]) or \
            (sw.size > 1 and int(w_deq.attrs["axis"]) % 4 != 0):
        return None
    if a["data_layout"] == "NHWC":
        wq = wq.transpose(3, 2, 0, 1)                   # HWIO -> OIHW
    o = wq.shape[0]
    if wq.shape[1] != src.channels:
        return None
    op_ = -(-o // INT8_BLOCK) * INT8_BLOCK
    bb = conv.builder_
    data = src.var
    zu = int(zx)
    if data.struct_info.dtype == "int8":
        shifted = make_call("relax.add", (make_call("relax.astype", (data,), {"dtype": "int16"}),
                                          Constant(np.array(128, np.int16))))
        data = bb.emit(make_call("relax.astype", (shifted,), {"dtype": "uint8"}),
                       name_hint="x_u8")
        zu += 128
    attrs = {"strides": tuple(a["strides"]), "padding": tuple(a["padding"]),
             "dilation": tuple(a["dilation"]), "pad_value": zu}
    acc = bb.emit(Call(get_op("relax.nn.conv2d_nchwc_int8"),
                       (data, Constant(pack_int8_weight(wq))), attrs, (), span=call.span),
                  name_hint="acc")
    corr = _per_channel((zu * int8_weight_sums(wq)).astype(np.int32), o, op_)
    scale = _per_channel(np.float32(sx) * sw.astype(np.float32), o, op_)
    exact = bb.emit(make_call("relax.subtract", (acc, Constant(corr))).replace(span=call.span),
                    name_hint="acc_zp")
    real = bb.emit(make_call("relax.astype", (exact,), {"dtype": "float32"}).replace(
        span=call.span), name_hint="acc_f32")
    conv.converted += 1
    conv.int8_convs += 1
    rescale = Call(get_op("relax.multiply"), (real, Constant(scale)), {}, (), span=call.span)
    return rescale, o, a["data_layout"]


def integer_conv2d(conv: Any, call: Call) -> tuple | None:
    """A convolution that already is one of uint8 data and a constant int8 weight into int32
    (what the ONNX importer makes of QLinearConv / ConvInteger: zero-padded, its zero points
    corrected by the ops after it) as ``conv2d_nchwc_int8`` with ``pad_value`` 0 on the blocked
    data: the same int32 sums, and its consumers (the corrections, the requantization) stay
    blocked. None unless groups = 1, NCHW / OIHW and the block is 16."""
    a = call.attrs
    x, w_expr = call.args
    w = conv.constant(w_expr)
    if conv.B != INT8_BLOCK or int(a["groups"]) != 1 or a["data_layout"] != "NCHW" or \
            a["kernel_layout"] != "OIHW" or a["out_layout"] != "NCHW" or w is None or \
            w.dtype != np.int8 or w.ndim != 4 or x.struct_info.dtype != "uint8":
        return None
    data = conv.to_blocked(x, "NCHW", dtypes=("uint8",))
    if data is None or data[1] != w.shape[1]:
        return None
    attrs = {"strides": tuple(a["strides"]), "padding": tuple(a["padding"]),
             "dilation": tuple(a["dilation"]), "pad_value": 0}
    conv.converted += 1
    conv.int8_convs += 1
    acc = Call(get_op("relax.nn.conv2d_nchwc_int8"), (data[0], Constant(pack_int8_weight(w))),
               attrs, (), span=call.span)
    return acc, w.shape[0], "NCHW"
