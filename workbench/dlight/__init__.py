"""Default schedules for kernels nobody tuned (TVM's ``dlight``, here for CPUs).

A tuned kernel comes from a database; every other kernel would reach code generation as the
plain loop nest its op was written as. The rules in :mod:`workbench.dlight.cpu` give each such
kernel a schedule from its block structure alone (never from op names): register-tiled
outer-product reductions (matmul, dense, batch matmul, conv2d), vectorized spatial reductions
(pooling, depthwise conv), row reductions computed row by row (softmax, layer norm), and
parallel, vectorized data-parallel kernels; a fallback only parallelizes and vectorizes.
Every schedule is made with public ``tir.Schedule`` primitives, so it is legal and traced.

- :class:`ApplyDefaultSchedule` ``(*rules, target=None)``: the module pass (TVM's name);
- :func:`DefaultCPUSchedule` ``(target=None)``: that pass with the CPU rules, which
  ``relax.build`` runs after ``MetaScheduleApplyDatabase`` (``default_schedule=False`` or the
  option ``default_schedule`` turns it off);
- :func:`default_schedule` ``(mod_or_func, target=None)``: schedule a PrimFunc or IRModule
  directly (``workbench.build(..., default_schedule=True)`` does it before compiling).
- :mod:`workbench.dlight.gpu`: TVM's GPU rule names, available for no Workbench target (so
  CUDA pipelines run on ``llvm`` unchanged, as TVM's rules decline CPU targets).
"""
from __future__ import annotations

from typing import Any

from workbench.dlight import cpu, gpu
from workbench.dlight.base import ApplyDefaultSchedule, CPUInfo, ScheduleRule
from workbench.ir.module import IRModule
from workbench.tir.function import PrimFunc

__all__ = ["ScheduleRule", "ApplyDefaultSchedule", "DefaultCPUSchedule", "default_schedule",
           "CPUInfo", "cpu", "gpu"]


def DefaultCPUSchedule(target: Any = None) -> ApplyDefaultSchedule:  # noqa: N802 - a pass
    """The default-schedule pass with the CPU rules in order (see :mod:`workbench.dlight.cpu`)."""
    return ApplyDefaultSchedule(*cpu.default_rules(), target=target)


def default_schedule(mod: IRModule | PrimFunc, target: Any = None) -> IRModule:
    """``mod`` (or an IRModule holding the PrimFunc ``mod``) with every PrimFunc that is not
    marked ``tir.is_scheduled`` given its default CPU schedule."""
    if not isinstance(mod, (IRModule, PrimFunc)):
        raise TypeError(f"default_schedule expects an IRModule or a PrimFunc, got "
                        f"{type(mod).__name__}")
    return DefaultCPUSchedule(target)(mod)
