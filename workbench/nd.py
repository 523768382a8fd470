"""TVM-style alias module: ``workbench.nd.array(np_array, dev)``, ``workbench.nd.empty``."""
from .runtime.device import Device, cpu, device
from .runtime.ndarray import NDArray, Tensor, array, empty, from_dlpack, tensor

__all__ = ["array", "empty", "tensor", "from_dlpack", "NDArray", "Tensor", "Device", "cpu", "device"]
