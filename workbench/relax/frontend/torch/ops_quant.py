"""PyTorch converters: the ``quantized_decomposed`` quantize / dequantize ops of PT2E
quantized programs (``convert_pt2e`` output), per tensor and per channel.

Each reproduces PyTorch's reference arithmetic (``torch/ao/quantization/fx/_decomposed.py``)
so results match exactly: quantize is ``clamp(round(x * (1 / scale)) + zero_point, qmin,
qmax)`` with the reciprocal taken first (in double for a Python scale, then used as float32;
in the scales' dtype per channel, the product promoted to it), round half to even;
dequantize is ``(q - zero_point) * scale`` (float32 per tensor; per channel in the scales'
dtype, then cast). Per-channel scales and zero points must be constants (they are buffers in
exported programs). The products between them stay float operations on dequantized values.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Constant, Expr
from workbench.relax.frontend.torch._registry import converter
from workbench.relax.frontend.torch._util import const, sinfo


def _dtype(d: Any) -> str:
    from workbench.relax.frontend.torch.exported_program import torch_dtype
    return torch_dtype(d)


def _known(v: Any, what: str) -> np.ndarray:
    if isinstance(v, Constant):
        return v.data.numpy()
    raise NotImplementedError(f"{what} must be a constant (a buffer of the exported program)")


def _along(p: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    shape = [1] * ndim
    shape[axis % ndim] = p.shape[0]
    return p.reshape(shape)


def _quantize(imp: Any, x: Expr, inv_scale: np.ndarray, zero_point: np.ndarray, qmin: int,
              qmax: int, dtype: Any) -> Expr:
    ft = str(np.result_type(np.dtype(sinfo(x).dtype), inv_scale.dtype))
    if sinfo(x).dtype != ft:
        x = imp.emit(R.astype(x, ft))
    y = R.round(R.multiply(x, Constant(inv_scale.astype(ft))))
    y = R.clip(R.add(y, Constant(zero_point.astype(ft))), float(qmin), float(qmax))
    return R.astype(y, _dtype(dtype))


def _float_input(imp: Any, x: Expr) -> Expr:
    # PyTorch quantizes float16 / bfloat16 input as float32.
    if sinfo(x).dtype in ("float16", "bfloat16"):
        return imp.emit(R.astype(x, "float32"))
    return x


@converter("quantize_per_tensor.default")
def _quantize_per_tensor(imp: Any, node: Any, x: Expr, scale: float, zero_point: int,
                         quant_min: int, quant_max: int, dtype: Any) -> Expr:
    inv = np.asarray(np.float32(1.0 / float(scale)))     # a Python double, used as float32
    return _quantize(imp, _float_input(imp, x), inv, np.asarray(zero_point), quant_min,
                     quant_max, dtype)


@converter("quantize_per_channel.default")
def _quantize_per_channel(imp: Any, node: Any, x: Expr, scales: Expr, zero_points: Expr,
                          axis: int, quant_min: int, quant_max: int, dtype: Any) -> Expr:
    x = _float_input(imp, x)
    n = sinfo(x).ndim
    s = _known(scales, "quantize_per_channel's scales")
    inv = _along(np.asarray(1.0, s.dtype) / s, n, axis)
    zp = _along(_known(zero_points, "quantize_per_channel's zero points"), n, axis)
    return _quantize(imp, x, inv, zp, quant_min, quant_max, dtype)


@converter("dequantize_per_tensor.default")
def _dequantize_per_tensor(imp: Any, node: Any, x: Expr, scale: float, zero_point: int,
                           quant_min: int, quant_max: int, dtype: Any,
                           out_dtype: Any = None) -> Expr:
    out = "float32" if out_dtype is None else _dtype(out_dtype)
    return R.dequantize(x, const(scale, out), const(zero_point, "int64"), out_dtype=out)


@converter("dequantize_per_channel.default")
def _dequantize_per_channel(imp: Any, node: Any, x: Expr, scales: Expr, zero_points: Any,
                            axis: int, quant_min: int, quant_max: int, dtype: Any,
                            out_dtype: Any = None) -> Expr:
    out = "float32" if out_dtype is None else _dtype(out_dtype)
    s = _known(scales, "dequantize_per_channel's scales")
    zp = (np.zeros(s.shape, np.int64) if zero_points is None
          else _known(zero_points, "dequantize_per_channel's zero points"))
    work = str(np.result_type(s.dtype, np.float32))      # (q - zp) * scales promotes to it
    y = R.dequantize(x, Constant(s.astype(work)), Constant(zp.astype(np.int64)),
                     axis=axis % sinfo(x).ndim, out_dtype=work)
    return y if work == out else R.astype(imp.emit(y), out)
