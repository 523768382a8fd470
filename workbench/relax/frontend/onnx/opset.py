"""Which opset a model is read at, and bringing older models up to the importer's.

The converters handle every form an op has had since :data:`MIN_OPSET`. A model of an older
``ai.onnx`` opset (7 on; older ones too where ONNX's converter takes them) is first rewritten
by ``onnx.version_converter`` to :data:`MIN_OPSET`; its adapters are exact for most ops of
those opsets (attributes that became inputs, ``Softmax``'s 2-d coercion spelled as
``Flatten`` / ``Reshape``). Where they are not, this module converts the old form itself:

- before the converter runs (``_OLD_FORMS``, opsets below 7): PRelu's per-channel 1-d slope
  gets trailing unit dims, and the binary ops' ``broadcast=1, axis=k`` an ``Unsqueeze`` of B;
- after it: ``Upsample`` and ``Resize``-10, which became ``Resize``, get the coordinate and
  rounding modes of their old meaning (``asymmetric``, ``floor``).

A form without an exact equivalent (``BatchNormalization`` with ``spatial=0``) makes the
converter fail, and the model is refused with both opsets and the converter's reason named
rather than imported wrongly.
"""
from __future__ import annotations

from typing import Any

#: The oldest opset the converters read directly; older models are converted to it.
MIN_OPSET = 13

#: Opsets below this are accepted only when ONNX's version converter takes them.
OLDEST_SUPPORTED = 7

def model_opset(model: Any) -> int:
    """The ``ai.onnx`` opset the model imports (1 when it names none, as ONNX reads it)."""
    return next((int(o.version) for o in model.opset_import if o.domain in ("", "ai.onnx")),
                1)


def upgrade(model: Any, opset: int) -> Any:
    """``model`` read at ``opset``, rewritten to :data:`MIN_OPSET` when older (else returned as
    it is). Raises NotImplementedError naming the opset when ONNX's converter cannot do it
    exactly."""
    if opset >= MIN_OPSET:
        return model
    from onnx import helper, version_converter
    model = _copy(model)
    if model_opset(model) != opset:
        # The caller's `opset=` overrides the model's: convert from that one.
        del model.opset_import[:]
        model.opset_import.extend([helper.make_opsetid("", opset)] + [
            o for o in model.opset_import if o.domain not in ("", "ai.onnx")])
    if opset < 7:
        _rewrite_old_forms(model)
    resized = _old_resizes(model, opset)
    # The converter reads initializers only when they are graph inputs too (as IR version 3
    # required); list the others for it and take them off again afterwards.
    listed = {i.name for i in model.graph.input}
    added = [t for t in model.graph.initializer if t.name not in listed]
    model.graph.input.extend(helper.make_tensor_value_info(t.name, t.data_type, t.dims)
                             for t in added)
    try:
        out = version_converter.convert_version(model, MIN_OPSET)
    except Exception as err:  # noqa: BLE001 - the converter raises bare RuntimeErrors
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        hint = "" if opset >= OLDEST_SUPPORTED else f" (opsets below {OLDEST_SUPPORTED} are " \
            "taken only where ONNX's converter handles them)"
        raise NotImplementedError(
            f"from_onnx: converting the model from opset {opset} to opset {MIN_OPSET} with "
            f"onnx.version_converter failed: {first}{hint}; re-export it with opset "
            f"{MIN_OPSET} or later") from err
    _fix_old_resizes(out, resized)
    if added:
        names = {t.name for t in added}
        keep = [i for i in out.graph.input if i.name not in names]
        del out.graph.input[:]
        out.graph.input.extend(keep)
    return out


def _ranks(model: Any) -> dict[str, int]:
    """The rank of every value ONNX's shape inference knows."""
    from onnx import shape_inference
    try:
        graph = shape_inference.infer_shapes(model).graph
    except Exception:  # noqa: BLE001 - a model shape inference cannot read: ranks unknown
        graph = model.graph
    out = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        t = vi.type.tensor_type
        if t.HasField("shape"):
            out[vi.name] = len(t.shape.dim)
    for t in graph.initializer:
        out[t.name] = len(t.dims)
    return out


def _prelu_per_channel(model: Any, node: Any, ranks: dict[str, int]) -> list:
    """PRelu before opset 7: a 1-d slope of C values is per channel (axis 1). The converter
    refuses it (it checks numpy broadcasting); give the slope trailing unit dims instead."""
    from onnx import numpy_helper
    rank = ranks.get(node.input[0])
    slope = next((t for t in model.graph.initializer if t.name == node.input[1]), None)
    if rank is None or rank <= 2 or slope is None or len(slope.dims) != 1 or slope.dims[0] == 1:
        return []
    value = numpy_helper.to_array(slope).reshape([slope.dims[0]] + [1] * (rank - 2))
    name = f"{slope.name}__per_channel"
    if not any(t.name == name for t in model.graph.initializer):
        model.graph.initializer.append(numpy_helper.from_array(value, name))
    node.input[1] = name
    return []


def _legacy_broadcast(model: Any, node: Any, ranks: dict[str, int]) -> list:
    """``broadcast=1, axis=k`` before opset 7 aligns B's dims with A's from dim ``k``; the
    converter takes only numpy-compatible shapes, so B gets trailing unit dims (Unsqueeze)."""
    from onnx import helper
    attrs = {a.name: a.i for a in node.attribute}
    ra, rb = ranks.get(node.input[0]), ranks.get(node.input[1])
    if not attrs.get("broadcast") or "axis" not in attrs or ra is None or rb is None:
        return []
    axis = attrs["axis"] % ra
    if axis + rb >= ra:
        return []
    name = f"{node.input[1]}__at_axis{axis}_{node.output[0]}"
    unsqueeze = helper.make_node("Unsqueeze", [node.input[1]], [name],
                                 axes=list(range(rb, ra - axis)))
    node.input[1] = name
    return [unsqueeze]


#: Old forms rewritten before the version converter runs (it refuses or misreads them); a
#: rewrite may return nodes to insert before the node.
_OLD_FORMS = {"PRelu": _prelu_per_channel,
              **{op: _legacy_broadcast for op in ("Add", "Sub", "Mul", "Div", "Pow", "And",
                                                  "Or", "Xor", "Equal", "Greater", "Less")}}


def _rewrite_old_forms(model: Any) -> None:
    if not any(n.op_type in _OLD_FORMS for n in model.graph.node):
        return
    ranks = _ranks(model)
    nodes = []
    for node in model.graph.node:
        if node.op_type in _OLD_FORMS and node.domain in ("", "ai.onnx"):
            nodes += _OLD_FORMS[node.op_type](model, node, ranks) or []
        nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)


def _old_resizes(model: Any, opset: int) -> set[str]:
    """The outputs of ``Upsample`` (before opset 10) and ``Resize`` (opset 10) nodes."""
    if opset >= 11:
        return set()
    return {n.output[0] for n in model.graph.node
            if n.op_type in ("Upsample", "Resize") and n.domain in ("", "ai.onnx")}


def _fix_old_resizes(model: Any, outputs: set[str]) -> None:
    """Upsample and Resize-10 map coordinates as ``x / scale`` and take the nearest element
    below (``np.repeat`` for integer scales); the converter's Resize-11 leaves the defaults
    (``half_pixel``, ``round_prefer_floor``), so the old meaning is spelled out."""
    from onnx import helper
    for node in model.graph.node:
        if node.op_type != "Resize" or node.output[0] not in outputs:
            continue
        have = {a.name for a in node.attribute}
        for name, value in (("coordinate_transformation_mode", "asymmetric"),
                            ("nearest_mode", "floor")):
            if name not in have:
                node.attribute.append(helper.make_attribute(name, value))


def _copy(model: Any) -> Any:
    out = type(model)()
    out.CopyFrom(model)
    return out


__all__ = ["MIN_OPSET", "OLDEST_SUPPORTED", "model_opset", "upgrade"]
