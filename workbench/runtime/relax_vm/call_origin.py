"""``CallOrigin``: where a VM call instruction came from in the user's model, as plain text.

The Relax compiler knows, for every kernel call of an imported model, which model operations
the kernel implements (``workbench.relax.span``). The runtime knows nothing of the IR, so
``relax.build`` hands that knowledge down as plain strings: ``Executable.call_origins`` maps
``(VM function name, instruction index in it)`` -- the ``CallSite`` of
``VirtualMachine.instrument_position`` without the global pc -- to a :class:`CallOrigin`.
The VM's profiler adds its fields to each call's metrics (``Layer``, ``Module``, ``Op Type``),
the stepper shows the layer, and the executable saves them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..profiling.metrics import LAYER, MODULE, OP_TYPE

__all__ = ["CallOrigin"]


@dataclass(frozen=True)
class CallOrigin:
    """The model layers and operations one call implements.

    ``layer``: the layers, shortened relative to their common module
    (``"layer1.0.conv2 + bn2 + add + relu"``; ONNX node names when there are no module
    paths); ``module``: that common module path (``"layer1.0"``; ``""`` when the layers share
    none); ``op_type``: the model operations (``"convolution + batch_norm + relu"``,
    ``"Conv + Relu"``).
    """

    layer: str
    module: str = ""
    op_type: str = ""

    def __post_init__(self) -> None:
        for field in ("layer", "module", "op_type"):
            value = getattr(self, field)
            if not isinstance(value, str):
                raise TypeError(f"CallOrigin.{field} must be a str, got "
                                f"{type(value).__name__} {value!r}")

    def metrics(self) -> dict[str, str]:
        """The profiling metrics this origin adds to a call."""
        return {LAYER: self.layer, MODULE: self.module, OP_TYPE: self.op_type}

    def to_json(self) -> list[str]:
        return [self.layer, self.module, self.op_type]

    @classmethod
    def from_json(cls, data: Any) -> "CallOrigin":
        if not (isinstance(data, list) and len(data) == 3 and all(isinstance(x, str)
                                                                  for x in data)):
            raise ValueError(f"a call origin must be [layer, module, op_type] strings, "
                             f"got {data!r}")
        return cls(*data)
