"""``relax.frontend.torch``: import ``torch.export`` programs (TVM's API).

``from_exported_program(ep, *, keep_params_as_input=False, unwrap_unit_return_tuple=False,
no_bind_return_tuple=False)`` -> IRModule. PyTorch is imported only when this is used (it
comes with the ``models`` extra).
"""
from workbench.relax.frontend.torch.exported_program import (
    ExportedProgramImporter, from_exported_program,
)


def supported_ops() -> list[str]:
    """The fx target names (``"convolution.default"``) the importer converts."""
    from workbench.relax.frontend.torch._registry import load_all
    return sorted(load_all())


__all__ = ["from_exported_program", "ExportedProgramImporter", "supported_ops"]
