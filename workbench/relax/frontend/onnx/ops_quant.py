"""ONNX converters for quantized models: QuantizeLinear / DequantizeLinear (QDQ models),
DynamicQuantizeLinear, and the QOperator ops QLinearMatMul, QLinearConv, MatMulInteger(16),
ConvInteger.

Integer products keep uint8 data x int8 weights, the form the VNNI / AMX kernels take: zero
points are not subtracted before the product but corrected after it (exact int32 terms),

    (a - za) @ (b - zb) = a @ b - za * colsum(b) - zb * rowsum(a) + K * za * zb,

with uint8 weights made int8 (``b - 128``, ``zb - 128``) and int8 activations made uint8
(``a + 128``, ``za + 128``) first. A convolution pads with zeros and corrects with the
in-bounds mask ``m`` of each window (the padding stands for the zero point, i.e. a real 0):

    conv(x - zx, w - zw) = conv(x0, w) - zw * conv(x0, 1) - zx * conv(m, w) + zx * zw * conv(m, 1)

where ``conv(m, .)`` are import-time constants (static spatial sizes) and ``conv(x0, 1)`` (the
window sums of x, per group) is only computed for a non-zero weight zero point.

QLinear outputs are requantized as onnxruntime does, in float32: ``clip(round(float(acc) *
(a_scale * b_scale / y_scale)) + y_zp)`` with the multiplier computed in float32 in that
order and round half to even. Scales, zero points and convolution weights must be known at
import time (initializers in exported models; a converter says so otherwise); per-channel
weight parameters (1-d) are supported.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Expr
from workbench.relax.frontend.onnx._registry import converter
from workbench.relax.frontend.onnx.ops_conv import _static
from workbench.relax.frontend.onnx.ops_conv import window_args as _window
from workbench.relax.struct_info import TensorStructInfo

def _sinfo(e: Expr) -> TensorStructInfo:
    return e.struct_info


def _c(imp: Any, v: Any) -> Expr:
    """A numpy value (array or scalar) as a Relax constant."""
    return imp.expr(np.asarray(v))


def _known(imp: Any, v: Any, what: str) -> np.ndarray:
    k = imp.known(v)
    if k is None:
        raise NotImplementedError(f"{what} must be known at import time")
    return k


def _zero_point(imp: Any, inputs: list, k: int, default_dtype: str = "uint8") -> np.ndarray:
    if k < len(inputs) and inputs[k] is not None:
        return _known(imp, inputs[k], "a zero point")
    return np.zeros((), default_dtype)


def _along(p: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """A 1-d per-channel parameter shaped to broadcast along ``axis`` of ``ndim``-d data."""
    if p.ndim == 1 and ndim > 1:
        shape = [1] * ndim
        shape[axis % ndim] = p.shape[0]
        return p.reshape(shape)
    return p


# ---- QuantizeLinear / DequantizeLinear -----------------------------------------------------------

def _no_blocks(imp: Any, node: Any) -> str | None:
    for a in node.attribute:
        if a.name == "block_size" and a.i:
            return "blocked quantization (block_size)"
    return None


def _axis(scale: np.ndarray, attrs: dict) -> int:
    """ONNX's axis applies to a 1-d (per-axis) scale only."""
    return int(attrs.get("axis", 1)) if scale.ndim == 1 else -1


@converter("QuantizeLinear", check=_no_blocks)
def _quantize(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    scale = _known(imp, inputs[1], "QuantizeLinear's scale").astype(_sinfo(x).dtype)
    zp = _zero_point(imp, inputs, 2)
    return R.quantize(x, _c(imp, scale), _c(imp, zp), axis=_axis(scale, attrs),
                      out_dtype=str(zp.dtype))


@converter("DequantizeLinear", check=_no_blocks)
def _dequantize(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    scale = _known(imp, inputs[1], "DequantizeLinear's scale")
    zp = _zero_point(imp, inputs, 2, _sinfo(x).dtype)
    return R.dequantize(x, _c(imp, scale), _c(imp, zp), axis=_axis(scale, attrs),
                        out_dtype=str(scale.dtype))


# ---- integer products ------------------------------------------------------------------------------

def _activation_u8(imp: Any, a: Expr, za: np.ndarray) -> tuple[Expr, np.ndarray]:
    """uint8 data and its zero point (int8 data shifted by +128, exactly)."""
    if _sinfo(a).dtype == "uint8":
        return a, za.astype(np.int64)
    a32 = imp.emit(R.add(R.astype(a, "int32"), _c(imp, np.array(128, "int32"))))
    return imp.emit(R.astype(a32, "uint8")), za.astype(np.int64) + 128


def _weight_s8(imp: Any, b: Any, zb: np.ndarray) -> tuple[Any, np.ndarray]:
    """int8 weights and their zero point (uint8 weights shifted by -128, exactly); a known
    weight stays a known array."""
    known = imp.known(b)
    if known is not None:
        if known.dtype == np.uint8:
            return (known.astype(np.int16) - 128).astype(np.int8), zb.astype(np.int64) - 128
        return known, zb.astype(np.int64)
    if _sinfo(b).dtype == "int8":
        return b, zb.astype(np.int64)
    b32 = imp.emit(R.subtract(R.astype(b, "int32"), _c(imp, np.array(128, "int32"))))
    return imp.emit(R.astype(b32, "int8")), zb.astype(np.int64) - 128


def _i32(v: np.ndarray) -> np.ndarray:
    return np.asarray(v, np.int64).astype(np.int32)


def _integer_matmul(imp: Any, a: Expr, za: np.ndarray, b: Any, zb: np.ndarray) -> Expr:
    """``(a - za) @ (b - zb)`` in int32 (ONNX matmul broadcasting); ``zb`` 0-d or per column."""
    a, za = _activation_u8(imp, a, za)
    b, zb = _weight_s8(imp, b, zb)
    acc = imp.emit(R.matmul(a, imp.expr(b), out_dtype="int32"))
    k_dim = _static(_sinfo(a).values[-1])
    if np.any(za != 0):
        known = imp.known(b)
        if known is not None:
            colsum = known.astype(np.int64).sum(axis=-2, keepdims=True)
            acc = imp.emit(R.subtract(acc, _c(imp, _i32(za * colsum))))
        else:
            colsum = imp.emit(R.sum(R.astype(imp.expr(b), "int32"), axis=[-2], keepdims=True))
            acc = imp.emit(R.subtract(acc, R.multiply(colsum, _c(imp, _i32(za)))))
    if np.any(zb != 0):
        rowsum = imp.emit(R.sum(R.astype(a, "int32"), axis=[-1], keepdims=True))
        acc = imp.emit(R.subtract(acc, R.multiply(rowsum, _c(imp, _i32(zb)))))
        if np.any(za != 0):
            if k_dim is None:
                raise NotImplementedError("an integer matmul with both zero points non-zero "
                                          "needs a static inner dimension")
            acc = imp.emit(R.add(acc, _c(imp, _i32(k_dim * za * zb))))
    return acc


def _requantize(imp: Any, acc: Expr, multiplier: np.ndarray, y_zp: np.ndarray) -> Expr:
    """``clip(round(float32(acc) * multiplier) + y_zp)`` in y_zp's dtype (onnxruntime's
    float32 requantization; the multiplier already shaped to broadcast)."""
    info = np.iinfo(y_zp.dtype)
    y = R.round(R.multiply(R.astype(acc, "float32"), _c(imp, multiplier.astype(np.float32))))
    y = R.add(y, _c(imp, np.float32(y_zp)))
    y = R.clip(y, float(info.min), float(info.max))
    return R.astype(y, str(y_zp.dtype))


def _multiplier(a_scale: np.ndarray, b_scale: np.ndarray, y_scale: np.ndarray) -> np.ndarray:
    # onnxruntime: a_scale * b_scale[i] / y_scale, in float32, in that order.
    return (np.float32(a_scale) * b_scale.astype(np.float32)) / np.float32(y_scale)


@converter("QLinearMatMul")
def _qlinear_matmul(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    a, b = imp.expr(inputs[0]), inputs[3]
    a_scale, za = (_known(imp, inputs[k], "QLinearMatMul's scales") for k in (1, 2))
    b_scale, zb = (_known(imp, inputs[k], "QLinearMatMul's scales") for k in (4, 5))
    y_scale, y_zp = (_known(imp, inputs[k], "QLinearMatMul's scales") for k in (6, 7))
    acc = _integer_matmul(imp, a, za, b, zb)
    return _requantize(imp, acc, _multiplier(a_scale, b_scale, y_scale), y_zp)


@converter("MatMulInteger")
def _matmul_integer(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    a = imp.expr(inputs[0])
    za = _zero_point(imp, inputs, 2, _sinfo(a).dtype)
    b = inputs[1]
    zb = _zero_point(imp, inputs, 3, "int8")
    return _integer_matmul(imp, a, za, b, zb)


# ---- convolutions ----------------------------------------------------------------------------------

def _window_sums(mask: np.ndarray, kernel: np.ndarray, strides: list[int],
                 dilations: list[int], pads: list[int]) -> np.ndarray:
    """``conv(mask, kernel)`` for a 2-d ``mask`` (H, W) and per-output-channel 2-d kernels
    (O, KH, KW), zero padding: (O, OH, OW), with numpy."""
    t, lft, btm, r = pads
    mp = np.pad(mask.astype(np.int64), ((t, btm), (lft, r)))
    o, kh, kw = kernel.shape
    oh = (mp.shape[0] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (mp.shape[1] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    out = np.zeros((o, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            win = mp[i * dilations[0]: i * dilations[0] + strides[0] * (oh - 1) + 1: strides[0],
                     j * dilations[1]: j * dilations[1] + strides[1] * (ow - 1) + 1: strides[1]]
            out += kernel[:, i, j].astype(np.int64)[:, None, None] * win[None]
    return out


def _conv_check(imp: Any, node: Any) -> str | None:
    for a in node.attribute:
        if a.name == "kernel_shape" and len(a.ints) != 2:
            return f"{len(a.ints)}-d windows (supported: 2-d)"
    return None


def _integer_conv(imp: Any, node: Any, x: Expr, zx: np.ndarray, w: np.ndarray, zw: np.ndarray,
                  attrs: dict) -> Expr:
    """``conv(x - zx, w - zw)`` in int32 (NCHW / OIHW, zero points standing for the padding);
    ``zw`` 0-d or per output channel."""
    x, zx = _activation_u8(imp, x, zx)
    w, zw = _weight_s8(imp, w, zw)
    o, cg, kh, kw = w.shape
    groups = int(attrs.get("group", 1))
    strides, dilations, pads = _window(node, x, attrs, [kh, kw])
    hw = [_static(d) for d in _sinfo(x).values[2:]]
    if None in hw:
        raise NotImplementedError(f"{node.op_type} on a dynamic spatial size")
    acc = imp.emit(R.nn.conv2d(x, imp.expr(w), strides, pads, dilations, groups,
                               out_dtype="int32"))
    zw_o = np.broadcast_to(zw, (o,)).astype(np.int64)
    mask = np.ones(hw, np.int64)
    correction = np.zeros((1, 1, 1, 1), np.int64)
    if np.any(zx != 0):
        wsum = w.astype(np.int64).sum(axis=1)                        # (O, KH, KW)
        correction = correction - zx * _window_sums(mask, wsum, strides, dilations, pads)[None]
        if np.any(zw_o != 0):
            cnt = _window_sums(mask, np.full((1, kh, kw), cg, np.int64), strides, dilations,
                               pads)
            correction = correction + (zx * zw_o)[None, :, None, None] * cnt[None]
    if correction.any():
        acc = imp.emit(R.add(acc, _c(imp, _i32(correction))))
    if np.any(zw_o != 0):
        ones = np.ones((groups, cg, kh, kw), np.int8)
        xsum = imp.emit(R.nn.conv2d(x, _c(imp, ones), strides, pads, dilations, groups,
                                    out_dtype="int32"))          # (N, G, OH, OW)
        if groups > 1:
            xsum = imp.emit(R.take(xsum, _c(imp, np.arange(o, dtype=np.int64) // (o // groups)),
                                   axis=1))
        acc = imp.emit(R.subtract(acc, R.multiply(xsum, _c(imp, _i32(zw_o.reshape(1, o, 1, 1))))))
    return acc


@converter("QLinearConv", check=_conv_check)
def _qlinear_conv(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    x_scale, zx = (_known(imp, inputs[k], "QLinearConv's scales") for k in (1, 2))
    w = _known(imp, inputs[3], "QLinearConv's weight")
    w_scale, zw = (_known(imp, inputs[k], "QLinearConv's scales") for k in (4, 5))
    y_scale, y_zp = (_known(imp, inputs[k], "QLinearConv's scales") for k in (6, 7))
    acc = _integer_conv(imp, node, x, zx, w, zw, attrs)
    if len(inputs) > 8 and inputs[8] is not None:
        bias = imp.known(inputs[8])
        bias = _c(imp, bias.reshape(1, -1, 1, 1)) if bias is not None else \
            imp.emit(R.reshape(imp.expr(inputs[8]), [1, -1, 1, 1]))
        acc = imp.emit(R.add(acc, bias))
    mult = _multiplier(x_scale, w_scale, y_scale)
    return _requantize(imp, acc, _along(mult, 4, 1), y_zp)


@converter("ConvInteger", check=_conv_check)
def _conv_integer(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    zx = _zero_point(imp, inputs, 2, _sinfo(x).dtype)
    w = _known(imp, inputs[1], "ConvInteger's weight")
    zw = _zero_point(imp, inputs, 3, str(w.dtype))
    return _integer_conv(imp, node, x, zx, w, zw, attrs)


@converter("MatMulInteger16")
def _matmul_integer16(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    """com.microsoft MatMulInteger16: int16 (or uint16) operands, int32 products."""
    a, b = (imp.emit(R.astype(imp.expr(v), "int32")) for v in inputs[:2])
    return R.matmul(a, b)


@converter("DynamicQuantizeLinear")
def _dynamic_quantize(imp: Any, node: Any, inputs: list, attrs: dict) -> list:
    """uint8 quantization with the scale and zero point of the data's range (including 0):
    ``scale = (max(0, max x) - min(0, min x)) / 255``, ``zp = sat(round(-min / scale))``,
    ``y = sat(round(x / scale) + zp)``, rounding half to even."""
    x = imp.expr(inputs[0])
    dtype = _sinfo(x).dtype
    zero = _c(imp, np.zeros((), dtype))
    lo = imp.emit(R.minimum(imp.emit(R.min(x)), zero))
    hi = imp.emit(R.maximum(imp.emit(R.max(x)), zero))
    scale = imp.emit(R.divide(imp.emit(R.subtract(hi, lo)), _c(imp, np.asarray(255, dtype))))
    zp = imp.emit(R.clip(imp.emit(R.round(imp.emit(R.divide(imp.emit(R.negative(lo)),
                                                             scale)))), 0, 255))
    q = imp.emit(R.add(imp.emit(R.round(imp.emit(R.divide(x, scale)))), zp))
    y = imp.emit(R.astype(imp.emit(R.clip(q, 0, 255)), "uint8"))
    return [y, scale, imp.emit(R.astype(zp, "uint8"))]
