"""``relax.frontend.onnx``: import ONNX models (TVM's API).

``from_onnx(model, shape_dict=None, dtype_dict="float32", opset=None,
keep_params_in_input=False)`` -> IRModule, for opset 7 and later (older models are
converted to opset 13 with ``onnx.version_converter``). The ``onnx`` package is
imported only when this is used (it comes with the ``models`` extra).
"""
from workbench.relax.frontend.onnx.importer import ONNXImporter, from_onnx


def supported_ops() -> list[str]:
    """The ONNX op types the importer converts."""
    from workbench.relax.frontend.onnx._registry import load_all
    return sorted(load_all())


__all__ = ["from_onnx", "ONNXImporter", "supported_ops"]
