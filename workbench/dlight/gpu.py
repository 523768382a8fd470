"""TVM's GPU rule names (``dlight.gpu.Matmul()``, ...), which apply to no Workbench target.

TVM's GPU rules decline every target that is not a GPU (``is_target_available``), so a
pipeline written for CUDA, run with the CPU target, leaves the PrimFuncs to the CPU schedules
that follow. Workbench compiles only for the CPU; these rules are that same "not for this
target" with TVM's names, so such code runs unchanged on ``llvm`` and gets the same module.
"""
from __future__ import annotations

from workbench.dlight.base import ScheduleRule
from workbench.target import Target
from workbench.tir.function import PrimFunc

__all__ = ["GPUScheduleRule", "Matmul", "GEMV", "LowBatchGEMV", "Reduction",
           "GeneralReduction", "Transpose", "RMSNorm", "Fallback"]

# The kinds TVM's GPU rules accept; none of them is a Workbench target.
GPU_KINDS = frozenset({"cuda", "rocm", "metal", "vulkan", "opencl", "webgpu"})


class GPUScheduleRule(ScheduleRule):
    """A rule for GPU targets only: available for none of Workbench's (CPU) targets."""

    def is_target_available(self, target: Target) -> bool:
        return target.kind in GPU_KINDS

    def apply(self, func: PrimFunc, target: Target, tunable: bool) -> None:
        raise NotImplementedError(f"dlight.gpu.{type(self).__name__}: Workbench has no GPU "
                                  f"code generator (target {target})")


class Matmul(GPUScheduleRule):
    name = "gpu.Matmul"


class GEMV(GPUScheduleRule):
    name = "gpu.GEMV"


class LowBatchGEMV(GPUScheduleRule):
    name = "gpu.LowBatchGEMV"

    def __init__(self, bucket: int = 4) -> None:
        self.bucket = bucket


class Reduction(GPUScheduleRule):
    name = "gpu.Reduction"


class GeneralReduction(GPUScheduleRule):
    name = "gpu.GeneralReduction"


class Transpose(GPUScheduleRule):
    name = "gpu.Transpose"


class RMSNorm(GPUScheduleRule):
    name = "gpu.RMSNorm"


class Fallback(GPUScheduleRule):
    name = "gpu.Fallback"
