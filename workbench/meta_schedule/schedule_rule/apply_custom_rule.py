"""ApplyCustomRule: hand a block annotated ``schedule_rule = "<name>"`` to a user function
(reference meta_schedule.md section 4.3 item 1).

A custom rule is a global function named ``meta_schedule.<key>.<name>`` taking
``(sch, block)`` and returning the resulting schedules (a list, one Schedule, or None for "the
same schedule"). ``<key>`` is each of the target's keys in order (``"cpu"`` for llvm), then
the target kind (``"llvm"``): TVM looks up only the keys; the kind is a Workbench convenience.
Register with :func:`register_custom_schedule_rule` or ``workbench.runtime.register_func``.

PostOrderApply skips annotated blocks for every other rule, so the user function owns the
block. An annotation naming no registered function is removed with a warning (as TVM), and
the block then goes through the remaining rules.
"""
from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Callable

from workbench.meta_schedule import analysis as A
from workbench.meta_schedule.schedule_rule.schedule_rule import (
    ScheduleRule, register_schedule_rule,
)
from workbench.tir.schedule import BlockRV, Schedule

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.tune_context import TuneContext

ANN_KEY = "schedule_rule"


def custom_rule_name(name: str, key: str) -> str:
    """The global function name of custom rule ``name`` for target key ``key``."""
    return f"meta_schedule.{key}.{name}"


def register_custom_schedule_rule(name: str, f: Callable | None = None, key: str = "cpu",
                                  override: bool = False):
    """Register ``f(sch, block) -> list[Schedule] | Schedule | None`` as custom rule ``name``
    for target key ``key`` (``"cpu"`` covers llvm). Usable as a decorator."""
    from workbench.runtime import register_func
    return register_func(custom_rule_name(name, key), f, override=override)


@register_schedule_rule("apply-custom-rule")
class ApplyCustomRule(ScheduleRule):
    def __init__(self) -> None:
        self.target_keys: list[str] = ["cpu", "llvm"]

    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        target = context.target
        if target is not None:
            keys = list(getattr(target, "keys", ()) or ())
            self.target_keys = keys + [k for k in (target.kind,) if k not in keys]

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        from workbench.runtime import get_global_func
        name = A.block_info(sch, block).block.annotations.get(ANN_KEY)
        if name is None or str(name) == "None":
            return [sch]
        tried = [custom_rule_name(str(name), k) for k in self.target_keys]
        for fname in tried:
            f = get_global_func(fname, allow_missing=True)
            if f is None:
                continue
            result = f(sch, block)
            if result is None:
                return [sch]
            if isinstance(result, Schedule):
                return [result]
            return list(result)
        warnings.warn(f"ApplyCustomRule: unknown schedule rule {str(name)!r} for target keys "
                      f"{self.target_keys}; checked {tried}. Removing the annotation.",
                      stacklevel=2)
        sch.unannotate(block, ANN_KEY)
        return [sch]
