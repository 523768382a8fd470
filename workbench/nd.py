"""TVM-style alias module: ``workbench.nd.array(np_array, dev)``, ``workbench.nd.empty``."""
from .runtime.device import Device, cpu, device
from .runtime.ndarray import NDArray, Tensor, array, empty, tensor

__all__ = ["array", "empty", "tensor", "NDArray", "Tensor", "Device", "cpu", "device"]
