"""Model frontends: ``relax.frontend.nn`` (PyTorch-like modules written in Workbench),
``relax.frontend.torch`` (``from_exported_program``) and ``relax.frontend.onnx``
(``from_onnx``). The importers load torch / onnx only when used (the ``models`` extra)."""
from workbench.relax.frontend import nn
from workbench.relax.frontend.common import OpNotImplemented, detach_params

__all__ = ["nn", "OpNotImplemented", "detach_params"]
