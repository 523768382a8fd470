"""``FoldChannelScaleToConv2D``: a per-input-channel scale before a convolution moved onto
the convolution's weights (Workbench; squeeze-and-excitation's ``x * s``).

Contract: ``FoldChannelScaleToConv2D()(mod)`` returns a new module where, in every Relax
function, each ``c = R.nn.conv2d(y, W)`` such that

- ``y = R.multiply(x, s)`` (either operand order) has no other use, ``x`` has ``y``'s shape
  and ``s`` is constant over the image: one value per (input channel) for the whole batch,
  shaped ``(1, C, 1, 1)`` in NCHW, ``(1, 1, 1, C)`` in NHWC, ``(1, C/B, 1, 1, B)`` in the
  blocked NCHW{B}c;
- the weight has fewer elements than the map (``C_out x C_in x k x k < N x C_in x H x W``:
  otherwise scaling it moves more data than scaling the map; EfficientNet-B0's last stages,
  7 x 7 maps and 192-320 x 1152 weights, keep their scale);
- the convolution is not grouped, its weight ``W`` is a constant (a ``Constant`` or a var
  bound to one) in the layout that goes with its data's (OIHW, HWIO, OIHW{B}i{B'}o), of
  ``y``'s float dtype, and it has no other ``out_dtype``

becomes ``c = R.nn.conv2d(x, W * reshape(s))``, ``s`` laid along the weight's input-channel
axis. The two compute the same sum (``sum_i W[o, i] (x[i] s[i]) == sum_i (W[o, i] s[i])
x[i]``, a zero padding scaled or not), up to the rounding of the products.

Why: a squeeze-and-excitation block (EfficientNet, MobileNetV3, RegNet) scales the whole
feature map by ``s`` and hands it to a 1x1 projection. As a kernel of its own, that scale is
one more pass over the map (EfficientNet-B0: 16 of them, 5% of the model on Zen 4 with
AVX-512 code, 12% with AVX2 code); on the weights it is one multiply per weight (``C_out x
C_in``, 40 x 240 at the largest map), and the projection reads the map the depthwise
convolution wrote. The weight's product is a small kernel of its own each call (``s`` is
known only then). onnxruntime runs the scale as its own ``Mul``.

The default pipeline runs it after ``ConvertLayoutNCHWc`` (so the layout pass sees the model's
own graph, and the scale is folded in the blocked layout). Anything else is left alone. After
a call, ``folded`` names the convolutions whose weights took a scale.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from workbench.ir.module import IRModule
from workbench.relax.expr import Call, Expr, VarBinding
from workbench.relax.expr_functor import ExprMutator
from workbench.relax.op import multiply, reshape
from workbench.relax.struct_info import TensorStructInfo, static_shape
from workbench.relax.transform._util import BindingIndex, PlannedFoldPass
from workbench.relax.transform._util import op_name as _op_name

__all__ = ["FoldChannelScaleToConv2D"]


def _static_shape(e: Any) -> tuple[int, ...] | None:
    sinfo = getattr(e, "struct_info", None)
    return static_shape(sinfo) if isinstance(sinfo, TensorStructInfo) else None


def _scale_shape(data_layout: str, kernel_layout: str, x: tuple[int, ...]
                 ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """(the shape ``s`` must have, the shape it takes along the weight's input channels) for a
    convolution of these layouts over data of shape ``x``; None for other layouts."""
    if data_layout == "NCHW" and kernel_layout == "OIHW":
        return (1, x[1], 1, 1), (1, x[1], 1, 1)
    if data_layout == "NHWC" and kernel_layout == "HWIO":
        return (1, 1, 1, x[3]), (1, 1, x[3], 1)
    m = re.fullmatch(r"NCHW(\d+)c", data_layout)
    k = re.fullmatch(r"OIHW(\d+)i(\d+)o", kernel_layout)
    if m and k and m.group(1) == k.group(1) and len(x) == 5:
        return (1, x[1], 1, 1, x[4]), (1, x[1], 1, 1, x[4], 1)
    return None


@dataclass
class _Fold:
    """One convolution whose weight takes a scale: its binding, its unscaled input ``x``, the
    scale ``s`` (and the shape it takes on the weight) and the multiply's span."""

    conv: VarBinding
    x: Expr
    s: Expr
    weight_shape: tuple[int, ...]
    span: Any


class _Plan(BindingIndex):
    """Finds the convolutions to fold; counts every use of each var."""

    def __init__(self) -> None:
        super().__init__()
        self.convs: list[VarBinding] = []

    def visit_binding(self, b: Any) -> None:
        if isinstance(b, VarBinding) and _op_name(b.value) == "relax.nn.conv2d":
            self.convs.append(b)
        super().visit_binding(b)

    def folds(self) -> list[_Fold]:
        return [f for f in map(self._fold, self.convs) if f is not None]

    def _fold(self, conv: VarBinding) -> _Fold | None:
        y, w = conv.value.args[:2]
        attrs = conv.value.attrs
        mul = self.single_use_value(y)
        if _op_name(mul) != "relax.multiply" or int(attrs.get("groups", 1)) != 1 or \
                self.constant(w) is None:
            return None
        dtype = getattr(y.struct_info, "dtype", "")
        if not dtype.startswith("float") or getattr(w.struct_info, "dtype", "") != dtype or \
                attrs.get("out_dtype") not in ("void", "", None, dtype):
            return None
        shape = _static_shape(y)
        if shape is None:
            return None
        shapes = _scale_shape(str(attrs.get("data_layout")), str(attrs.get("kernel_layout")),
                              shape)
        if shapes is None:
            return None
        weight = _static_shape(w)
        if weight is None or math.prod(weight) >= math.prod(shape):
            return None     # scaling the weights would move more data than scaling the map
        for x, s in (mul.args, mul.args[::-1]):
            if _static_shape(x) == shape and _static_shape(s) == shapes[0] and \
                    getattr(s.struct_info, "dtype", "") == dtype:
                return _Fold(conv, x, s, shapes[1], mul.span)
        return None


class _Folder(ExprMutator):
    def __init__(self, mod: IRModule, folds: list[_Fold]) -> None:
        super().__init__(mod)
        self.by_conv = {id(f.conv.var): f for f in folds}
        self.folded: list[str] = []

    def visit_var_binding(self, b: VarBinding) -> None:
        fold = self.by_conv.get(id(b.var))
        if fold is None:
            super().visit_var_binding(b)
            return
        conv = b.value
        s = self.builder_.emit(reshape(self.visit_expr(fold.s), fold.weight_shape),
                               name_hint=f"{b.var.name_hint}_scale")
        scaled = multiply(self.visit_expr(conv.args[1]), s)
        # the scale's source span: a profile names the weight's kernel after the layer
        # that scaled the map (the squeeze-excite block)
        w = self.builder_.emit(Call(scaled.op, scaled.args, scaled.attrs, scaled.sinfo_args,
                                    span=fold.span), name_hint=f"{b.var.name_hint}_weight")
        args = (self.visit_expr(fold.x), w, *(self.visit_expr(a) for a in conv.args[2:]))
        self.folded.append(b.var.name_hint)
        self.reemit_binding(b, Call(conv.op, args, conv.attrs, conv.sinfo_args,
                                    span=conv.span))


class FoldChannelScaleToConv2D(PlannedFoldPass):
    """The pass object: ``mod = FoldChannelScaleToConv2D()(mod)`` (see the module
    docstring)."""

    name = "FoldChannelScaleToConv2D"

    plan_class = _Plan
    folder_class = _Folder
