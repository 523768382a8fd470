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
  directly (``workbench.build(..., default_schedule=True)`` does it before compiling);
- :func:`default_schedule_variants` ``(func, target, limit)``: the default schedule of one
  kernel and its neighbouring register tiles (what ``tune_relax`` measures first);
- :mod:`workbench.dlight.gpu`: TVM's GPU rule names, available for no Workbench target (so
  CUDA pipelines run on ``llvm`` unchanged, as TVM's rules decline CPU targets).
"""
from __future__ import annotations

from typing import Any

from workbench.dlight import base, cpu, gpu
from workbench.dlight.base import ApplyDefaultSchedule, CPUInfo, ScheduleRule
from workbench.ir.module import IRModule
from workbench.tir.function import PrimFunc

__all__ = ["ScheduleRule", "ApplyDefaultSchedule", "DefaultCPUSchedule", "default_schedule",
           "default_schedule_variants", "CPUInfo", "cpu", "gpu"]


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


def default_schedule_variants(func: PrimFunc, target: Any = None, limit: int = 8) -> list:
    """Schedules of ``func``: the first default CPU rule that fits it, with its own schedule
    first and then (rules that register-tile one reduction) up to ``limit - 1`` schedules with
    the neighbouring register tiles (:mod:`workbench.dlight.cpu.variants`). Empty when no rule
    fits; a rule that raises is skipped, as in :class:`ApplyDefaultSchedule`."""
    from workbench.target import Target
    if not isinstance(func, PrimFunc):
        raise TypeError(f"default_schedule_variants expects a PrimFunc, got "
                        f"{type(func).__name__}")
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"default_schedule_variants: limit must be an int >= 1, got {limit!r}")
    target = Target("llvm") if target is None else (
        target if isinstance(target, Target) else Target(target))
    for rule in cpu.default_rules():
        if not rule.is_target_available(target):
            continue
        try:
            if hasattr(rule, "variants"):
                scheds = rule.variants(func, target, limit)
            else:
                sch = rule.apply(func, target, False)
                scheds = [] if sch is None else [sch]
        except Exception as err:  # noqa: BLE001 - as ApplyDefaultSchedule: try the next rule
            base.logger.warning("default schedule rule %s failed: %s", rule.name, err)
            continue
        if scheds:
            return scheds
    return []
