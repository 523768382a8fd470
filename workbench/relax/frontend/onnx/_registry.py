"""The converter table of the ONNX importer: ``op_type`` -> how to convert a node.

A converter is ``fn(imp, node, inputs, attrs) -> value | list of values`` (one per node
output). ``inputs`` has one entry per node input: None for an omitted optional input, a
Relax expression, or a *known* value -- a numpy array the importer computed at import time
(initializers, ``Constant`` nodes, and shape arithmetic such as ``Shape -> Gather ->
Concat``). A known array of dtype ``object`` holds TIR ``PrimExpr`` s: a shape with symbolic
dims (``dim_param`` inputs). ``attrs`` are the node's attributes as Python values.

``fold(imp, node, known_inputs, attrs)`` (optional) computes the node at import time when
every input is known; it returns the outputs as numpy arrays, or None to convert normally.

``check(imp, node) -> str | None`` (optional) runs in the up-front support check; a string
says why this use of the op is not supported.

Converters handle every form an op has had since opset 13 (the importer's minimum; older models
are converted to it first, see :mod:`.opset`): e.g. the reductions' ``axes`` as an attribute
or, from opset 18, as an input.
"""
from __future__ import annotations

from workbench.relax.frontend.common import (
    Converter, ConvertFn, Unavailable, converter_registrar,
)

CONVERTERS: dict[str, Converter] = {}

#: ``@converter(*op_types, fold=None, check=None)``: register ``fn`` for every op type.
converter = converter_registrar(CONVERTERS, "onnx")


def load_all() -> dict[str, Converter]:
    from workbench.relax.frontend.onnx import (  # noqa: F401
        ops_contrib, ops_control, ops_conv, ops_elementwise, ops_index, ops_nn, ops_quant,
        ops_resize, ops_sequence, ops_shape, ops_vision,
    )
    return CONVERTERS


__all__ = ["Converter", "ConvertFn", "CONVERTERS", "converter", "Unavailable", "load_all"]
