"""ScheduleRule: a rule that rewrites one block of a schedule into 1..k schedules.

Lifecycle (as TVM): a space generator fills its rule list, calls
``_initialize_with_tune_context(ctx)`` on each rule once (rules read e.g. the target's core
count there), then ``apply(sch, block)`` for every block in post-order. ``clone()`` deep-copies.

``ScheduleRule.create(kind)``:

- a target kind, ``"llvm"`` (alias ``"cpu"``): the default rule **list** for that target;
  ``"vnni"`` / ``"avx512"`` (TVM's x86 rule kinds, which the space generator picks from the
  target's CPU features): the llvm list with the tensorizing rules before MultiLevelTiling;
- a single rule name (``"apply-custom-rule"``, ``"inline-constant-scalars"``,
  ``"auto-inline"``, ``"add-rfactor"``, ``"multi-level-tiling"``,
  ``"parallel-vectorize-unroll"``, ``"random-compute-location"``): one rule with its
  class defaults.

The llvm list is TVM's ``ScheduleRule::DefaultLLVM()``, in TVM's order and with its
parameters (reference meta_schedule.md section 4.3): ApplyCustomRule, InlineConstantScalars,
AutoInline, AddRFactor, MultiLevelTiling, ParallelizeVectorizeUnroll, RandomComputeLocation.
"""
from __future__ import annotations

import abc
import copy
from typing import TYPE_CHECKING, Any

from workbench.meta_schedule.utils import KindTable
from workbench.tir.schedule import BlockRV, Schedule

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.tune_context import TuneContext

__all__ = ["ScheduleRule", "PyScheduleRule", "register_schedule_rule"]

_TARGET_KINDS = ("llvm", "cpu")
# TVM's rule kinds for x86 targets with dot-product instructions (GetRuleKindFromTarget).
X86_TENSORIZE_KINDS = ("vnni", "avx512")

_KINDS = KindTable("ScheduleRule")
#: ``@register_schedule_rule(name)``: a rule class for ``ScheduleRule.create(name)``.
register_schedule_rule = _KINDS.register


class ScheduleRule(abc.ABC):
    """Modifies a block in a schedule; returns the resulting schedules (at least one)."""

    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        """Read what the rule needs from the tuning context (default: nothing)."""

    @abc.abstractmethod
    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        """Apply the rule to ``block`` of ``sch``; may modify ``sch`` and/or return copies."""

    def clone(self) -> "ScheduleRule":
        """A deep copy of the rule."""
        return copy.deepcopy(self)

    def __str__(self) -> str:
        return type(self).__name__

    @staticmethod
    def create(kind: str) -> Any:
        """The default rule list of a target kind, or one rule by name (module docstring)."""
        from workbench.meta_schedule import schedule_rule as _rules  # noqa: F401 (registers)
        if kind in _TARGET_KINDS:
            return _default_llvm()
        if kind in X86_TENSORIZE_KINDS:
            return _default_x86(kind)
        return _KINDS.create(kind)


def _default_llvm() -> list[ScheduleRule]:
    """TVM's ``ScheduleRule::DefaultLLVM()`` (C++ values, which differ from some Python class
    defaults, e.g. ParallelizeVectorizeUnroll's vector extent)."""
    from workbench.meta_schedule.schedule_rule import (
        AddRFactor, ApplyCustomRule, AutoInline, InlineConstantScalars, MultiLevelTiling,
        ParallelizeVectorizeUnroll, RandomComputeLocation, ReuseType,
    )
    return [
        ApplyCustomRule(),
        InlineConstantScalars(),
        AutoInline(into_producer=False, into_consumer=True, inline_const_tensor=True,
                   disallow_if_then_else=True, require_injective=True, require_ordered=True,
                   disallow_op=["tir.exp"]),
        AddRFactor(max_jobs_per_core=16, max_innermost_factor=64),
        MultiLevelTiling(structure="SSRSRS", tile_binds=None, max_innermost_factor=64,
                         vector_load_lens=None, reuse_read=None,
                         reuse_write=ReuseType(req="may", levels=[1, 2], scope="global")),
        ParallelizeVectorizeUnroll(max_jobs_per_core=16, max_vectorize_extent=64,
                                   unroll_max_steps=[0, 16, 64, 512], unroll_explicit=True),
        RandomComputeLocation(),
    ]


def _default_x86(kind: str) -> list[ScheduleRule]:
    """TVM's ``ScheduleRule::DefaultX86(kind)`` extended: on "vnni" the int8 AMX and VNNI
    register-blocked micro-kernels (weights packed [N/16, K/4, 16, 4]), the int8 dot product
    ("vnni": ``dot_16x4_vnni``; "avx512": the exact ``dot_16x4_u8i8i32_generic`` -- TVM uses the
    saturating ``dot_16x4_avx512``), the bf16 AMX and AVX512-BF16 micro-kernels (weights packed
    [N/16, K/2, 16, 2]), the bf16 dot product (``dot_16x2_bf16`` where the target has
    AVX512-BF16, else its generic form) and the float32 AVX-512 micro-kernel, each through
    MultiLevelTilingWithIntrin (the dot products on weights packed like the micro-kernels'),
    then plain MultiLevelTiling. Each tensorizing rule also passes the block on untouched, so
    the plain MultiLevelTiling always gives one untensorized space. A rule whose intrinsic the
    target cannot run drops it at initialization."""
    from workbench.meta_schedule.schedule_rule import (
        MultiLevelTilingMicroKernel, MultiLevelTilingWithIntrin, ReuseType,
    )
    rules = _default_llvm()
    mlt_at = next(k for k, r in enumerate(rules) if type(r).__name__ == "MultiLevelTiling")
    common = dict(structure="SSRSRS", max_innermost_factor=64,
                  reuse_write=ReuseType(req="may", levels=[1, 2], scope="global"))
    int8 = "dot_16x4_vnni" if kind == "vnni" else "dot_16x4_u8i8i32_generic"
    with_intrin: list[ScheduleRule] = [
        # int8 / bf16 weights are packed [N/16, K/P, 16, P] for the register-blocked kernels
        # and the 16 x P dot products (in the design space when not packed already); AMX tiles
        # first where the CPU has them.
        *([MultiLevelTilingMicroKernel("amx-int8", **common),
           MultiLevelTilingMicroKernel("vnni", **common)] if kind == "vnni" else []),
        MultiLevelTilingWithIntrin(int8, pack=("int8", 4), **common),
        MultiLevelTilingMicroKernel("amx-bf16", **common),
        MultiLevelTilingMicroKernel("avx512-bf16", **common),
        MultiLevelTilingWithIntrin(["dot_16x2_bf16", "dot_16x2_bf16_generic"],
                                   pack=("bfloat16", 2), first_supported=True, **common),
        MultiLevelTilingMicroKernel("avx512", **common),
    ]
    return rules[:mlt_at] + with_intrin + rules[mlt_at:]


class PyScheduleRule(ScheduleRule):
    """Base for rules written by users (decorate the subclass with ``@derived_object``):
    implement ``apply``; optionally ``_initialize_with_tune_context`` and ``clone``."""

    _tvm_metadata = {"cls": ScheduleRule,
                     "methods": ["_initialize_with_tune_context", "apply", "clone", "__str__"]}
