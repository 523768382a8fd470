"""ONNX converters: element and slice gathers and scatters (GatherElements, GatherND,
ScatterElements / Scatter, ScatterND), ordering along an axis (TopK, CumSum) and Einsum."""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Expr, TupleGetItem
from workbench.relax.frontend.onnx._registry import converter
from workbench.relax.frontend.onnx.ops_elementwise import operands

_REDUCTION = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


def _rank(e: Expr) -> int:
    return len(e.struct_info.values)


def _known_int(imp: Any, v: Any, what: str, node: Any) -> int:
    k = imp.known(v)
    if k is None or k.dtype == object:
        raise NotImplementedError(f"{node.op_type}: {what} computed at run time")
    return int(k.reshape(-1)[0])


@converter("GatherElements", fold=lambda imp, node, inputs, attrs: None if any(
    a.dtype == object for a in inputs) else np.take_along_axis(
        inputs[0], np.where(inputs[1] < 0, inputs[1] + inputs[0].shape[attrs.get("axis", 0)],
                            inputs[1]), attrs.get("axis", 0)))
def _gather_elements(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x, idx = imp.expr(inputs[0]), imp.expr(inputs[1])
    return R.gather_elements(x, idx, attrs.get("axis", 0) % _rank(x))


@converter("GatherND")
def _gather_nd(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    return R.gather_nd(imp.expr(inputs[0]), imp.expr(inputs[1]), attrs.get("batch_dims", 0))


def _scatter_check(imp: Any, node: Any) -> str | None:
    for a in node.attribute:
        if a.name == "reduction" and a.s.decode() not in _REDUCTION:
            return f"reduction={a.s.decode()!r}"
    return None


@converter("ScatterElements", "Scatter", check=_scatter_check)
def _scatter_elements(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x, updates = operands(imp, inputs[0], inputs[2])
    idx = imp.expr(inputs[1])
    return R.scatter_elements(x, idx, updates, attrs.get("axis", 0) % _rank(x),
                              _REDUCTION[attrs.get("reduction", "none")])


@converter("ScatterND", check=_scatter_check)
def _scatter_nd(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x, updates = operands(imp, inputs[0], inputs[2])
    return R.scatter_nd(x, imp.expr(inputs[1]), updates,
                        _REDUCTION[attrs.get("reduction", "none")])


@converter("TopK")
def _topk(imp: Any, node: Any, inputs: list, attrs: dict) -> list:
    x = imp.expr(inputs[0])
    k = _known_int(imp, inputs[1], "k", node)
    out = imp.emit(R.topk(x, k, attrs.get("axis", -1) % _rank(x), "both",
                          bool(attrs.get("largest", 1)), "int64"))
    return [imp.emit(TupleGetItem(out, 0)), imp.emit(TupleGetItem(out, 1))]


@converter("CumSum")
def _cumsum(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    axis = _known_int(imp, inputs[1], "axis", node) % _rank(x)
    return R.cumsum(x, axis, bool(attrs.get("exclusive", 0)), bool(attrs.get("reverse", 0)))


@converter("Einsum")
def _einsum(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    return R.einsum(operands(imp, *inputs), attrs["equation"])


__all__: list[str] = []
