"""``ScheduleRule`` and the ``ApplyDefaultSchedule`` pass (TVM's ``dlight`` interface).

A rule looks at one PrimFunc and either returns a :class:`~workbench.tir.schedule.Schedule`
of it or None ("not my kind of kernel"). :class:`ApplyDefaultSchedule` tries its rules in
order on every PrimFunc of a module that is not already scheduled (attr ``tir.is_scheduled``,
which ``MetaScheduleApplyDatabase`` sets on tuned kernels, so tuned kernels keep their
schedules) and replaces the function by the first rule's result, marked ``tir.is_scheduled``.
A rule that raises is skipped (the next one is tried) and the failure is recorded in
``failures`` and logged: a bug in one rule never stops a model from compiling.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.target import Target
from workbench.tir.function import PrimFunc
from workbench.tir.schedule import Schedule, Trace

__all__ = ["ScheduleRule", "ApplyDefaultSchedule", "CPUInfo"]

logger = logging.getLogger("workbench.dlight")


@dataclass(frozen=True)
class CPUInfo:
    """The facts of the target the rules size their tiles with."""

    vector_bits: int
    threads: int
    vnni: bool = False          # AVX-512 VNNI: uint8 x int8 dot products (vpdpbusd)

    @staticmethod
    def of(target: Target) -> "CPUInfo":
        from workbench import options
        threads = target.num_cores or options.get("num_threads")
        return CPUInfo(target.vector_width_bits, max(1, int(threads)),
                       target.has_feature("avx512vnni"))

    @property
    def accumulators(self) -> int:
        """Vector registers a register tile may keep accumulators in: the rest hold the
        operand vectors and the broadcast scalars. AVX-512 has 32 registers: 16. AVX2 (and
        narrower) has 16: 12, BLIS's 6x16 Haswell kernel -- 16 there spilled, and ResNet-18
        ran 1.3x slower (64.9 vs 49.8 ms on a 2-core AMD EPYC host)."""
        return 16 if self.vector_bits >= 512 else 12

    def lanes(self, dtype: str) -> int:
        """Vector lanes of ``dtype`` in one native register (at least 4)."""
        from workbench.ir import dtype as dt
        bits = dt.parse(dtype).bits
        bits = 8 if bits == 1 else bits
        return max(4, self.vector_bits // max(8, bits))


class ScheduleRule:
    """A default-schedule rule for one family of kernels (TVM's ``dlight.ScheduleRule``).

    Subclasses implement :meth:`apply`; ``name`` is what :class:`ApplyDefaultSchedule`
    records for the kernels the rule scheduled."""

    name: str = "rule"

    def apply(self, func: PrimFunc, target: Target, tunable: bool) -> Schedule | None:
        """A schedule of ``func`` for ``target``, or None when the rule does not fit it.
        ``tunable`` is TVM's flag for rules that sample; these rules never do."""
        raise NotImplementedError

    def is_target_available(self, target: Target) -> bool:
        return target.kind == "llvm"

    @staticmethod
    def from_callable(name: str) -> Callable[[Callable[..., Schedule | None]], "ScheduleRule"]:
        """Decorator: a rule from ``fn(func, target, tunable) -> Schedule | None``."""
        def wrap(fn: Callable[..., Schedule | None]) -> ScheduleRule:
            rule = ScheduleRule()
            rule.name = name
            rule.apply = fn  # type: ignore[method-assign]
            return rule
        return wrap

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ApplyDefaultSchedule(Pass):
    """Module pass: schedule every unscheduled PrimFunc with the first rule that fits.

    ``ApplyDefaultSchedule(*rules, target=None)`` (target: a Target or string, default the
    host ``llvm``). After a call: ``applied`` maps each scheduled function to the rule's
    name, ``traces`` to the schedule's trace, ``failures`` maps ``(function, rule)`` to the
    error of a rule that raised, and ``skipped`` lists the functions that were already
    scheduled. A function no rule fits stays as it was.
    """

    name = "ApplyDefaultSchedule"

    def __init__(self, *rules: ScheduleRule, target: Any = None) -> None:
        for r in rules:
            if not isinstance(r, ScheduleRule):
                raise TypeError(f"ApplyDefaultSchedule: expected ScheduleRule objects, got "
                                f"{r!r}")
        self.rules: Sequence[ScheduleRule] = rules
        self.target = target
        self.applied: dict[str, str] = {}
        self.traces: dict[str, Trace] = {}
        self.failures: dict[tuple[str, str], str] = {}
        self.skipped: list[str] = []

    def _target(self) -> Target:
        t = self.target
        if t is None:
            return Target.current() or Target("llvm")
        return t if isinstance(t, Target) else Target(t)

    def __call__(self, mod: IRModule | PrimFunc) -> IRModule:
        # A PrimFunc alone is accepted as a module of one function (a convenience of ours).
        return super().__call__(IRModule.from_expr(mod) if isinstance(mod, PrimFunc) else mod)

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        target = self._target()
        rules = [r for r in self.rules if r.is_target_available(target)]
        self.applied, self.traces, self.failures, self.skipped = {}, {}, {}, []
        out = mod.copy()
        for name, func in list(mod.items()):
            if not isinstance(func, PrimFunc):
                continue
            if func.attrs.get("tir.is_scheduled", False):
                self.skipped.append(name)
                continue
            for rule in rules:
                try:
                    sch = rule.apply(func, target, False)
                except Exception as err:  # noqa: BLE001 - a rule's bug must not stop a build
                    self.failures[(name, rule.name)] = f"{type(err).__name__}: {err}"
                    logger.warning("default schedule rule %s failed on %s: %s", rule.name,
                                   name, err)
                    continue
                if sch is None:
                    continue
                scheduled = sch.mod[sch.func_working_on]
                out[name] = scheduled.with_attr("tir.is_scheduled", True)
                self.applied[name] = rule.name
                self.traces[name] = sch.trace
                break
        return out
