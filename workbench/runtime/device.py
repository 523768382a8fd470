"""Devices: where arrays live and kernels run. Only the host CPU exists in Workbench.

``Device`` mirrors TVM's: a (device_type, device_id) pair with the DLPack type codes, printed
``cpu(0)``, compared and hashed by value. Other device kinds (``cuda``, ``vulkan``, ...) can be
named, so ported code that builds them gets a device whose ``exist`` is False, but arrays and
kernels refuse them with a clear error.
"""
from __future__ import annotations

import os
import platform
from typing import Any

from .. import options

__all__ = ["Device", "device", "cpu"]

# DLPack device type codes, as TVM numbers them.
kDLCPU = 1
kDLCUDA = 2
kDLCUDAHost = 3
kDLOpenCL = 4
kDLVulkan = 7
kDLMetal = 8
kDLROCM = 10
kDLExtDev = 12

MASK2STR = {
    kDLCPU: "cpu", kDLCUDA: "cuda", kDLCUDAHost: "cuda_host", kDLOpenCL: "opencl",
    kDLVulkan: "vulkan", kDLMetal: "metal", kDLROCM: "rocm", kDLExtDev: "ext_dev",
}
STR2MASK = {
    "cpu": kDLCPU, "llvm": kDLCPU, "c": kDLCPU, "stackvm": kDLCPU,
    "cuda": kDLCUDA, "nvptx": kDLCUDA, "gpu": kDLCUDA, "cuda_host": kDLCUDAHost,
    "opencl": kDLOpenCL, "cl": kDLOpenCL, "vulkan": kDLVulkan, "metal": kDLMetal,
    "rocm": kDLROCM, "ext_dev": kDLExtDev,
}


class Device:
    """A device: ``device_type`` (DLPack code, 1 = CPU) and ``device_id``. Immutable."""

    __slots__ = ("device_type", "device_id")
    kDLCPU = kDLCPU
    kDLCUDA = kDLCUDA

    def __init__(self, device_type: int, device_id: int = 0) -> None:
        if isinstance(device_type, bool) or not isinstance(device_type, int) \
                or device_type not in MASK2STR:
            raise ValueError(f"device_type must be one of {sorted(MASK2STR)} "
                             f"(DLPack codes), got {device_type!r}")
        if isinstance(device_id, bool) or not isinstance(device_id, int) or device_id < 0:
            raise ValueError(f"device_id must be a non-negative int, got {device_id!r}")
        object.__setattr__(self, "device_type", device_type)
        object.__setattr__(self, "device_id", device_id)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Device is immutable")

    def __reduce__(self):
        return (Device, (self.device_type, self.device_id))

    # -- identity ------------------------------------------------------------------------------
    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Device) and self.device_type == other.device_type
                and self.device_id == other.device_id)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __str__(self) -> str:
        return f"{MASK2STR[self.device_type]}({self.device_id})"

    __repr__ = __str__

    # -- attributes TVM users query ------------------------------------------------------------
    @property
    def is_cpu(self) -> bool:
        return self.device_type == kDLCPU

    @property
    def exist(self) -> bool:
        """True only for the host CPU (device 0): Workbench has no other backend."""
        return self.device_type == kDLCPU and self.device_id == 0

    @property
    def device_name(self) -> str:
        return MASK2STR[self.device_type]

    @property
    def num_cores(self) -> int:
        """Cores this process may run on (affinity-aware)."""
        self._require_cpu("num_cores")
        try:
            return len(os.sched_getaffinity(0)) or 1
        except (AttributeError, OSError):
            return os.cpu_count() or 1

    @property
    def max_threads(self) -> int:
        """Threads a parallel kernel uses by default (the ``num_threads`` option)."""
        self._require_cpu("max_threads")
        return int(options.get("num_threads"))

    @property
    def max_threads_per_block(self) -> int:
        """For CPU, TVM reports the thread-pool size here; so do we."""
        return self.max_threads

    @property
    def warp_size(self) -> int:
        return 1

    @property
    def max_shared_memory_per_block(self) -> int:
        return 0

    @property
    def compute_version(self) -> str:
        return ""

    @property
    def multi_processor_count(self) -> int:
        return self.num_cores

    @property
    def architecture(self) -> str:
        return platform.machine()

    def sync(self) -> None:
        """Wait until all work on the device is done. Kernels run synchronously on the CPU, so
        there is never pending work."""
        self._require_cpu("sync")

    def _require_cpu(self, what: str) -> None:
        if not self.exist:
            raise RuntimeError(f"{self}.{what}: device {self} does not exist in Workbench "
                               "(only cpu(0) is available)")


def device(dev_type: int | str | Device, dev_id: int = 0) -> Device:
    """Make a device from a type name (``"cpu"``, ``"llvm"``, ``"cuda"`` ...), a DLPack code,
    or a string like ``"cpu:0"``/``"cpu(0)"``; a Device is returned as is."""
    if isinstance(dev_type, Device):
        return dev_type
    if isinstance(dev_type, str):
        name = dev_type.strip()
        for sep in (":", "("):
            if sep in name:
                name, _, rest = name.partition(sep)
                try:
                    dev_id = int(rest.rstrip(")"))
                except ValueError:
                    raise ValueError(f"device: cannot read a device id from {dev_type!r}"
                                     ) from None
                break
        # "llvm -mcpu=..." style target strings name the CPU.
        name = name.split()[0] if name.split() else name
        if name not in STR2MASK:
            raise ValueError(f"device: unknown device type {dev_type!r}; "
                             f"expected one of {sorted(STR2MASK)}")
        return Device(STR2MASK[name], dev_id)
    return Device(dev_type, dev_id)


def cpu(dev_id: int = 0) -> Device:
    """The host CPU device (``cpu(0)``)."""
    return Device(kDLCPU, dev_id)
