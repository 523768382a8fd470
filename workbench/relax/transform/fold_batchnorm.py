"""``FoldBatchnormToConv2D``: batch norm after a convolution folded into the convolution's
weights and a per-channel shift at compile time (TVM's pass of that name).

Contract: ``FoldBatchnormToConv2D()(mod)`` returns a new module where, in every Relax function,
each ``t = R.nn.batch_norm(c, gamma, beta, mean, var, axis, epsilon)`` such that

- ``c = R.nn.conv2d(x, W)`` is a float convolution whose weight ``W`` is a constant (a
  ``Constant``, or a var bound to one), and ``c`` has no other use -- or ``c = conv + bias``
  with such a convolution and a constant per-channel ``bias`` (folded into the shift);
- ``gamma``, ``beta``, ``mean`` and ``var`` are constants of ``W``'s dtype and ``axis`` is the
  convolution's channel axis (1 for NCHW, 3 for NHWC)

becomes ``c = R.nn.conv2d(x, W * s)`` (``s = gamma / sqrt(var + epsilon)`` along the weight's
output-channel axis: O of OIHW, the last of HWIO), ``y = c + (beta - mean * s)`` (broadcast
along the channel axis; with a bias, the bias add's binding becomes that ``y``) and
``t = (y, mean, var)``: batch norm's tuple, so ``t[0]`` reads the
folded value (CanonicalizeBindings forwards it) and the moving statistics stay what they
were. The products are computed in float64 and rounded once to the weight's dtype. The
convolution kernel then ends in one add that fusion keeps in its epilogue, instead of
``(x - mean) * rsqrt(var + eps) * gamma + beta`` on every output element. The shift's add
carries the batch norm's source span, so profiles keep naming the layer.

Anything else is left alone: a convolution whose result is used elsewhere too (its unfolded
value is needed), run-time weights or statistics, other layouts. The default pipeline runs this
pass first, before ``LegalizeOps``. After a call, ``folded`` names the batch norm variables
that were folded.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.ir.module import IRModule
from workbench.relax.expr import Call, Constant, Tuple, Var, VarBinding
from workbench.relax.expr_functor import ExprMutator
from workbench.relax.op import add
from workbench.relax.transform._util import BindingIndex, PlannedFoldPass
from workbench.relax.transform._util import op_name as _op_name

__all__ = ["FoldBatchnormToConv2D"]

# conv2d data layout -> (channel axis of the data, output-channel axis of the weight)
_AXES = {"NCHW": (1, 0), "NHWC": (3, 3)}


@dataclass
class _Fold:
    """One batch norm to fold: its binding, the convolution's var (and the bias add's, when
    the convolution has a bias), the folded weight and the shift (bias included)."""

    bn: VarBinding
    conv: Var
    bias_add: Var | None
    weight: np.ndarray
    shift: np.ndarray


class _Plan(BindingIndex):
    """Finds the (conv2d binding, batch_norm binding) pairs to fold; counts every use of each
    var (a use anywhere keeps the convolution's value)."""

    def __init__(self) -> None:
        super().__init__()
        self.bn_bindings: list[VarBinding] = []

    def visit_binding(self, b: Any) -> None:
        if isinstance(b, VarBinding) and _op_name(b.value) == "relax.nn.batch_norm":
            self.bn_bindings.append(b)
        super().visit_binding(b)

    def _array(self, e: Any) -> np.ndarray | None:
        c = self.constant(e)
        return None if c is None else c.data.numpy()

    def folds(self) -> list[_Fold]:
        return [f for f in map(self._fold, self.bn_bindings) if f is not None]

    def _fold(self, bn: VarBinding) -> _Fold | None:
        data, gamma, beta, mean, var = bn.value.args
        conv = self.single_use_value(data)
        bias_add, conv_var = None, data
        if _op_name(conv) == "relax.add":       # conv2d + bias, then batch norm
            bias_add, conv_var = data, conv.args[0]
            conv = self.single_use_value(conv_var)
        if _op_name(conv) != "relax.nn.conv2d":
            return None
        attrs = conv.attrs
        axes = _AXES.get(attrs.get("data_layout"))
        weight = self._array(conv.args[1])
        if axes is None or weight is None or weight.dtype.kind != "f" or \
                attrs.get("out_dtype") not in ("void", "", None, str(weight.dtype)) or \
                int(bn.value.attrs.get("axis", 1)) % 4 != axes[0]:
            return None
        stats = [self._array(p) for p in (gamma, beta, mean, var)]
        channels = weight.shape[axes[1]]
        if any(s is None or s.dtype != weight.dtype or s.shape != (channels,) for s in stats):
            return None
        g, b, m, v = (s.astype(np.float64) for s in stats)
        if not bn.value.attrs.get("scale", True):
            g = np.ones_like(g)
        if not bn.value.attrs.get("center", True):
            b = np.zeros_like(b)
        scale = g / np.sqrt(v + float(bn.value.attrs.get("epsilon", 1e-5)))
        shape = [1] * weight.ndim
        shape[axes[1]] = channels
        folded = (weight.astype(np.float64) * scale.reshape(shape)).astype(weight.dtype)
        shift_shape = [1] * 4
        shift_shape[axes[0]] = channels
        bias = np.zeros(channels)
        if bias_add is not None:
            found = self._array(self.values[id(bias_add)].args[1])
            if found is None or found.dtype != weight.dtype or found.size != channels or \
                    np.broadcast_shapes(found.shape, shift_shape) != tuple(shift_shape):
                return None
            bias = found.reshape(channels).astype(np.float64)
        shift = ((bias - m) * scale + b).astype(weight.dtype).reshape(shift_shape)
        return _Fold(bn, conv_var, bias_add, folded, shift)


class _Folder(ExprMutator):
    def __init__(self, mod: IRModule, folds: list[_Fold]) -> None:
        super().__init__(mod)
        self.by_conv = {id(f.conv): f for f in folds}
        self.by_add = {id(f.bias_add): f for f in folds if f.bias_add is not None}
        self.by_bn = {id(f.bn.var): f for f in folds}
        self.folded: list[str] = []

    def visit_var_binding(self, b: VarBinding) -> None:
        key = id(b.var)
        if key in self.by_conv:       # the convolution, with the folded weight
            conv = b.value
            args = (self.visit_expr(conv.args[0]), Constant(self.by_conv[key].weight))
            self.reemit_binding(b, Call(conv.op, args, conv.attrs, conv.sinfo_args,
                                        span=conv.span))
        elif key in self.by_add:      # its bias add, with the shift
            fold = self.by_add[key]
            self.reemit_binding(b, self._shift(fold))
        elif key in self.by_bn:       # the batch norm: (shifted value, mean, var)
            fold = self.by_bn[key]
            if fold.bias_add is not None:
                shifted = self.visit_expr(fold.bias_add)
            else:
                shifted = self.builder_.emit(self._shift(fold),
                                             name_hint=f"{b.var.name_hint}_folded")
            stats = tuple(self.visit_expr(a) for a in b.value.args[3:5])
            self.folded.append(b.var.name_hint)
            self.reemit_binding(b, Tuple((shifted, *stats)))
        else:
            super().visit_var_binding(b)


    def _shift(self, fold: _Fold) -> Call:
        """``conv + shift``, with the batch norm's source span: profiles still name the
        layer (``conv1 + bn1 + relu``, op type ``convolution + batch_norm + relu``)."""
        c = add(self.visit_expr(fold.conv), Constant(fold.shift))
        return Call(c.op, c.args, c.attrs, c.sinfo_args, span=fold.bn.value.span)


class FoldBatchnormToConv2D(PlannedFoldPass):
    """The pass object: ``mod = FoldBatchnormToConv2D()(mod)`` (see the module docstring)."""

    name = "FoldBatchnormToConv2D"

    plan_class = _Plan
    folder_class = _Folder
