"""What the model importers share: the unsupported-operator error, ``detach_params``, and
folding of cheap ops on constant weights.

- :class:`OpNotImplemented` (TVM's ``tvm.error.OpNotImplemented``): raised by
  ``from_exported_program`` / ``from_onnx`` *before* anything is converted when the model
  uses operators the importer cannot convert; it lists every one at once, each with where it
  sits (PyTorch module path, ONNX node name). ``err.unsupported`` holds the entries.
- :func:`detach_params` (TVM's ``relax.frontend.detach_params``): strips the ``params``
  attribute that ``keep_params_as_input=True`` / ``keep_params_in_input=True`` leave on the
  functions, returning the module and ``{function name: [NDArray, ...]}``.
- :func:`fold_constant_call`: an op call whose tensor arguments are all constants, computed
  with the op's numpy rule at import time (a weight's transpose, a constant reshape), so the
  compiled model does not redo it on every call.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from workbench.ir.module import IRModule
from workbench.relax.expr import Call, Constant, Expr, Function, Op, PrimValue, ShapeExpr, Tuple


@dataclass(frozen=True)
class Unsupported:
    """One operator a model uses that the importer cannot convert."""

    op: str            # "aten.cumsum.default" / ONNX "CumSum"
    where: str         # "layer1.0.act" / ONNX node name (with its op_type)
    reason: str = ""   # why, when the op is known but this use of it is not supported


class Unavailable:
    """A result an importer does not compute (batch norm's saved statistics, max pooling's
    indices, dropout masks: inference only); using one is an error naming the node."""

    def __init__(self, what: str):
        self.what = what


class OpNotImplemented(NotImplementedError):
    """The model uses operators the importer does not support (all of them are listed)."""

    def __init__(self, frontend: str, unsupported: Sequence[Unsupported]):
        self.frontend = frontend
        self.unsupported = list(unsupported)
        by_op: dict[str, list[Unsupported]] = {}
        for u in self.unsupported:
            by_op.setdefault(u.op, []).append(u)
        lines = [f"The {frontend} importer does not support {len(by_op)} operator"
                 f"{'s' if len(by_op) != 1 else ''} this model uses (nothing was converted):"]
        for op, uses in by_op.items():
            where = ", ".join(u.where for u in uses[:8])
            more = f" and {len(uses) - 8} more" if len(uses) > 8 else ""
            reasons = sorted({u.reason for u in uses if u.reason})
            why = f" ({'; '.join(reasons)})" if reasons else ""
            lines.append(f"  {op}{why}: used at {where}{more}")
        super().__init__("\n".join(lines))


def detach_params(mod: IRModule) -> tuple[IRModule, dict[str, list[Any]]]:
    """``(module without the "params" attrs, {function name: its parameter values})`` -- the
    values to pass after the inputs: ``vm["main"](*inputs, *params["main"])``."""
    out = mod.copy()
    params: dict[str, list[Any]] = {}
    for name, func in list(mod.items()):
        if isinstance(func, Function) and "params" in func.attrs:
            params[name] = list(func.attrs["params"])
            out[name] = func.replace(attrs=func.attrs.without("params"))
    return out, params


# Ops cheap enough, and never growing the data, to evaluate on constants at import time.
_FOLDABLE = {
    "relax.permute_dims", "relax.reshape", "relax.expand_dims", "relax.squeeze",
    "relax.flatten", "relax.astype", "relax.strided_slice", "relax.concat", "relax.take",
    "relax.where", "relax.clip",
    # elementwise math, comparisons and logic
    "relax.add", "relax.subtract", "relax.multiply", "relax.divide", "relax.floor_divide",
    "relax.mod", "relax.floor_mod", "relax.power", "relax.maximum", "relax.minimum",
    "relax.equal", "relax.not_equal", "relax.less", "relax.less_equal", "relax.greater",
    "relax.greater_equal", "relax.logical_and", "relax.logical_or", "relax.logical_not",
    "relax.negative", "relax.abs", "relax.sqrt", "relax.rsqrt", "relax.exp", "relax.log",
    "relax.floor", "relax.ceil", "relax.round", "relax.square", "relax.erf", "relax.tanh",
    "relax.sigmoid", "relax.sin", "relax.cos",
}


def _const_value(e: Any) -> Any:
    if isinstance(e, Constant):
        return e.data.numpy()
    if isinstance(e, Tuple):
        vals = [_const_value(f) for f in e.fields]
        return None if any(v is None for v in vals) else tuple(vals)
    if isinstance(e, ShapeExpr):
        vals = [getattr(d, "value", None) for d in e.values]
        return None if any(v is None for v in vals) else tuple(int(v) for v in vals)
    if isinstance(e, PrimValue):
        return getattr(e.value, "value", None)
    return None


def fold_constant_call(call: Expr, max_elements: int | None = None) -> Expr | None:
    """The value of ``call`` as a Constant when it is a call of a cheap op whose arguments are
    all constants and the result is no bigger than its largest argument (or
    ``max_elements``); else None."""
    if not (isinstance(call, Call) and isinstance(call.op, Op) and call.op.name in _FOLDABLE):
        return None
    args = [_const_value(a) for a in call.args]
    if any(a is None for a in args):
        return None
    from workbench.relax.op.registry import NUMPY_RULES
    out = NUMPY_RULES[call.op.name](*args, **dict(call.attrs))
    if isinstance(out, tuple):
        return None
    out = np.asarray(out)
    biggest = max((np.size(a) for a in args if isinstance(a, np.ndarray)), default=1)
    if out.size > max(biggest, max_elements or 0):
        return None
    return Constant(out)


__all__ = ["OpNotImplemented", "Unsupported", "Unavailable", "detach_params",
           "fold_constant_call"]
