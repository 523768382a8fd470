"""The converter table of the PyTorch importer: fx target name -> how to convert the node.

Keys are what TVM keys on: ``node.target.__name__`` -- ``"convolution.default"`` for an ATen
overload, ``"getitem"`` / ``"mul"`` for Python's ``operator`` functions (SymInt arithmetic).

A converter is ``fn(imp, node, *args, **kwargs) -> value`` where ``args``/``kwargs`` are the
node's arguments with every fx Node replaced by its converted value (see
``ExportedProgramImporter.value``): a Relax expression for a tensor, a Python int / float /
bool, a TIR ``PrimExpr`` for a symbolic int, or a tuple of those. It returns the node's value
in the same terms; a Relax expression that is not a leaf is emitted by the importer (named
after the node), so converters may return nested calls.

``check(imp, node) -> str | None`` (optional) runs in the up-front support check, before any
conversion: a string is the reason this use of a known op is not supported (a transposed
convolution, a training-mode batch norm), reported together with the unknown ops.
"""
from __future__ import annotations

from workbench.relax.frontend.common import (
    CheckFn, Converter, ConvertFn, Unavailable, converter_registrar,
)

CONVERTERS: dict[str, Converter] = {}

#: ``@converter(*names, check=None)``: register ``fn`` for every target name.
converter = converter_registrar(CONVERTERS, "torch")


def load_all() -> dict[str, Converter]:
    """The full table (importing every family registers its converters)."""
    from workbench.relax.frontend.torch import (  # noqa: F401
        ops_elementwise, ops_image, ops_index, ops_misc, ops_nn, ops_quant, ops_shape,
    )
    return CONVERTERS


__all__ = ["Converter", "ConvertFn", "CheckFn", "CONVERTERS", "converter", "Unavailable",
           "load_all"]
