"""SpaceGenerator: turns a workload IRModule into design spaces (traced schedules whose
sampling instructions carry example decisions).

Every generator holds the three lists the search needs: ``sch_rules``, ``postprocs`` and
``mutator_probs``. Each may be given explicitly or left as ``"from-target"`` (or None), in
which case ``_initialize_with_tune_context`` fills it from the target's rule kind (TVM's
``GetRuleKindFromTarget``: ``"vnni"``, ``"avx512"`` or ``"llvm"``, see
:func:`rule_kind_from_target`) with ``ScheduleRule.create`` / ``Postproc.create`` /
``Mutator.create``, then initializes every rule, postproc and mutator with the context (as
TVM).

``SpaceGenerator.create(kind)``: ``"post-order-apply"`` (the default), ``"union"``, or a
callable ``f(sch) -> None | Schedule | list[Schedule]`` (a :class:`ScheduleFn`).
"""
from __future__ import annotations

import abc
import copy
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence, Union

from workbench.ir.module import IRModule
from workbench.tir.schedule import Schedule
from workbench.tir.schedule.handles import RandomEngine

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.mutator import Mutator
    from workbench.meta_schedule.postproc import Postproc
    from workbench.meta_schedule.schedule_rule import ScheduleRule
    from workbench.meta_schedule.tune_context import TuneContext

__all__ = ["SpaceGenerator", "PySpaceGenerator", "SpaceGeneratorType"]

FROM_TARGET = "from-target"
SpaceGeneratorType = Union["SpaceGenerator", str, Callable[[Schedule], Any]]


def _explicit(value: Any, what: str) -> Any:
    """None for "from-target"; otherwise the given list/dict (checked)."""
    if value is None or value == FROM_TARGET:
        return None
    if isinstance(value, str):
        raise ValueError(f"{what} must be 'from-target' or a list, got {value!r}")
    return value


class SpaceGenerator(abc.ABC):
    """Abstract design-space generator (see the module docstring)."""

    def __init__(self, sch_rules: Any = FROM_TARGET, postprocs: Any = FROM_TARGET,
                 mutator_probs: Any = FROM_TARGET) -> None:
        rules = _explicit(sch_rules, "sch_rules")
        procs = _explicit(postprocs, "postprocs")
        probs = _explicit(mutator_probs, "mutator_probs")
        self.sch_rules: list["ScheduleRule"] | None = None if rules is None else list(rules)
        self.postprocs: list["Postproc"] | None = None if procs is None else list(procs)
        self.mutator_probs: dict["Mutator", float] | None = \
            None if probs is None else dict(probs)
        self.rand = RandomEngine(None)

    # -- lifecycle -----------------------------------------------------------------------------
    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        """Fill "from-target" lists from the context's target and initialize their members."""
        from workbench.meta_schedule.mutator import Mutator
        from workbench.meta_schedule.postproc import Postproc
        from workbench.meta_schedule.schedule_rule import ScheduleRule
        if None in (self.sch_rules, self.postprocs, self.mutator_probs):
            kind = _target_kind(context)
            if self.sch_rules is None:
                self.sch_rules = ScheduleRule.create(kind)
            if self.postprocs is None:
                self.postprocs = Postproc.create(kind)
            if self.mutator_probs is None:
                self.mutator_probs = Mutator.create(kind)
        self.rand = RandomEngine(context.fork_seed())
        for rule in self.sch_rules:
            rule._initialize_with_tune_context(context)
        for proc in self.postprocs:
            proc._initialize_with_tune_context(context)
        for mutator in self.mutator_probs:
            mutator._initialize_with_tune_context(context)

    @abc.abstractmethod
    def generate_design_space(self, mod: IRModule) -> list[Schedule]:
        """The design spaces of ``mod``: traced schedules (at least one)."""

    def clone(self) -> "SpaceGenerator":
        """A deep copy (rules, postprocs and mutators included)."""
        return copy.deepcopy(self)

    # -- factory -------------------------------------------------------------------------------
    @staticmethod
    def create(kind: Any = "post-order-apply", *args: Any, **kwargs: Any) -> "SpaceGenerator":
        """"post-order-apply" | "union" | a schedule function (module docstring)."""
        from workbench.meta_schedule.space_generator.post_order_apply import PostOrderApply
        from workbench.meta_schedule.space_generator.schedule_fn import ScheduleFn
        from workbench.meta_schedule.space_generator.space_generator_union import (
            SpaceGeneratorUnion,
        )
        if isinstance(kind, SpaceGenerator):
            return kind
        if callable(kind):
            return ScheduleFn(kind, *args, **kwargs)
        if kind == "post-order-apply":
            return PostOrderApply(*args, **kwargs)
        if kind == "union":
            return SpaceGeneratorUnion(*args, **kwargs)
        raise ValueError(f"SpaceGenerator.create: unknown kind {kind!r}; expected "
                         "'post-order-apply', 'union' or a schedule function")


def _target_kind(context: "TuneContext") -> str:
    if context.target is None:
        raise ValueError("the space generator needs a target to fill its 'from-target' "
                         "rules, postprocs and mutators; give TuneContext a target")
    kind = getattr(context.target, "kind", "llvm")
    if kind != "llvm":
        raise ValueError(f"target kind {kind!r} is not supported (Workbench targets 'llvm')")
    return rule_kind_from_target(context.target)


def rule_kind_from_target(target: Any) -> str:
    """TVM's ``GetRuleKindFromTarget`` for x86: ``"vnni"`` with AVX-512 VNNI, ``"avx512"``
    with AVX-512F and BW, else ``"llvm"``. (TVM also says "vnni" for AVX-VNNI alone, whose
    256-bit instruction its 512-bit intrinsic cannot use; here that is "avx512" or "llvm".)"""
    has = getattr(target, "has_feature", None)
    if has is None:
        return "llvm"
    if has("avx512vnni"):
        return "vnni"
    if has("avx512f") and has("avx512bw"):
        return "avx512"
    return "llvm"


def check_lists(rules: Sequence[Any] | None, procs: Sequence[Any] | None,
                probs: Mapping[Any, float] | None) -> None:
    """Fail clearly when a generator is used before initialization."""
    if rules is None or procs is None or probs is None:
        raise RuntimeError("the space generator is not initialized: create it through a "
                           "TuneContext (which calls _initialize_with_tune_context)")


class PySpaceGenerator(SpaceGenerator):
    """Base for user space generators (decorate with ``@derived_object``): implement
    ``generate_design_space``; call ``super().__init__(sch_rules, postprocs, mutator_probs)``."""

    _tvm_metadata = {"cls": SpaceGenerator,
                     "methods": ["_initialize_with_tune_context", "generate_design_space",
                                 "clone"]}
