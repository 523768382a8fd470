"""What the model importers share: converter tables, the importer's base, the
unsupported-operator error, ``detach_params``, and folding of cheap ops on constant weights.

- :class:`Converter` and :func:`converter_registrar`: an importer's table from operator name
  (ONNX ``op_type``, fx target name) to how to convert it.
- :class:`Importer`: the state and steps both importers share -- the converter table, a
  BlockBuilder, ``emit`` (binding, with constant folding) and ``check_support`` (every
  unsupported use of an operator, before anything is converted).

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
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from workbench.ir.module import IRModule
from workbench.relax.block_builder import BlockBuilder
from workbench.relax.expr import (
    Call, Constant, Expr, Function, Op, PrimValue, ShapeExpr, Tuple, is_leaf,
)


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

    def __init__(self, frontend: str, unsupported: Sequence[Unsupported], context: str = ""):
        self.frontend = frontend
        self.unsupported = list(unsupported)
        by_op: dict[str, list[Unsupported]] = {}
        for u in self.unsupported:
            by_op.setdefault(u.op, []).append(u)
        lines = [f"The {frontend} importer does not support {len(by_op)} operator"
                 f"{'s' if len(by_op) != 1 else ''} this model uses ("
                 f"{context + '; ' if context else ''}nothing was converted):"]
        for op, uses in by_op.items():
            where = ", ".join(u.where for u in uses[:8])
            more = f" and {len(uses) - 8} more" if len(uses) > 8 else ""
            reasons = sorted({u.reason for u in uses if u.reason})
            why = f" ({'; '.join(reasons)})" if reasons else ""
            lines.append(f"  {op}{why}: used at {where}{more}")
        super().__init__("\n".join(lines))


ConvertFn = Callable[..., Any]
CheckFn = Callable[[Any, Any], "str | None"]


@dataclass(frozen=True)
class Converter:
    """How an importer converts one operator. ``fn`` converts a node (its signature is the
    importer's; see its ``_registry``). ``check(importer, node) -> str | None`` (optional) runs
    in the support check: a string says why this use of the op is not supported. ``fold``
    (optional, ONNX) computes the node at import time when all its inputs are known."""

    fn: ConvertFn
    check: CheckFn | None = None
    fold: Callable[..., Any] | None = None


def converter_registrar(table: dict[str, Converter], frontend: str
                        ) -> Callable[..., Callable[[ConvertFn], ConvertFn]]:
    """The ``@converter(*names, check=..., fold=...)`` decorator of one importer's ``table``:
    it registers the function for every name; a name registered twice is an error."""
    def converter(*names: str, check: CheckFn | None = None,
                  fold: Callable[..., Any] | None = None) -> Callable[[ConvertFn], ConvertFn]:
        def deco(fn: ConvertFn) -> ConvertFn:
            for name in names:
                if name in table:
                    raise ValueError(f"{frontend} frontend: converter for {name!r} registered "
                                     "twice")
                table[name] = Converter(fn, check, fold)
            return fn
        return deco
    return converter


class Importer:
    """The base of the model importers: the converter table, the BlockBuilder, the values
    converted so far (``env``), and the steps that do not depend on the model format.

    A subclass sets ``frontend`` (the name in :class:`OpNotImplemented`) and yields its
    nodes from :meth:`_support_uses`.
    """

    frontend = ""
    #: Said with the unsupported operators (the ONNX importer names the opset).
    context = ""

    def __init__(self, convert_map: Mapping[str, Converter]) -> None:
        self.convert_map = convert_map
        self.bb = BlockBuilder()
        self.env: dict[Any, Any] = {}

    def emit(self, expr: Any, name: str = "") -> Any:
        """Bind ``expr`` (folding cheap ops on constants); leaves come back as they are."""
        if not isinstance(expr, Expr) or is_leaf(expr):
            return expr
        expr = self.bb.normalize(expr)
        folded = fold_constant_call(expr)
        if folded is not None:
            return folded
        return self.bb.emit(expr, name)

    def _support_uses(self) -> Iterable["tuple[Any, str, str, str] | Unsupported"]:
        """Each node to convert as ``(node, converter-table key, op name, where)``, or as an
        :class:`Unsupported` when no converter could take it whatever the table holds."""
        raise NotImplementedError

    def check_support(self) -> None:
        """Raise :class:`OpNotImplemented` listing every node without a converter or whose
        converter's ``check`` refuses it; nothing has been converted yet."""
        problems: list[Unsupported] = []
        for use in self._support_uses():
            if isinstance(use, Unsupported):
                problems.append(use)
                continue
            node, key, op, where = use
            conv = self.convert_map.get(key)
            if conv is None:
                problems.append(Unsupported(op, where))
                continue
            reason = conv.check(self, node) if conv.check is not None else None
            if reason:
                problems.append(Unsupported(op, where, reason))
        if problems:
            raise OpNotImplemented(self.frontend, problems, self.context)


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
           "fold_constant_call", "Converter", "converter_registrar", "Importer"]
