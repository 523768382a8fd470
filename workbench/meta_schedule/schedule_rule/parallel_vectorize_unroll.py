"""ParallelizeVectorizeUnroll: mark the root block with how much to parallelize, vectorize and
unroll (reference meta_schedule.md section 4.3 item 6). The annotations are materialised by the
``RewriteParallelVectorizeUnroll`` postprocessor; the unroll depth is a sampled decision that
the ``MutateUnroll`` mutator changes."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from workbench.meta_schedule import analysis as A
from workbench.meta_schedule.schedule_rule.schedule_rule import (
    ScheduleRule, register_schedule_rule,
)
from workbench.tir.schedule import BlockRV, Schedule

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.tune_context import TuneContext


@register_schedule_rule("parallel-vectorize-unroll")
class ParallelizeVectorizeUnroll(ScheduleRule):
    def __init__(self, max_jobs_per_core: int = 16, max_vectorize_extent: int = 64,
                 unroll_max_steps: Sequence[int] = (0, 16, 64, 512),
                 unroll_explicit: bool = True) -> None:
        self.max_jobs_per_core = max_jobs_per_core
        self.max_vectorize_extent = max_vectorize_extent
        self.unroll_max_steps = list(unroll_max_steps)
        self.unroll_explicit = unroll_explicit
        self.max_parallel_extent = -1

    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        if self.max_jobs_per_core != -1:
            self.max_parallel_extent = self.max_jobs_per_core * _num_cores(context)

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        if not A.is_root(sch, block):
            return [sch]
        if self.max_parallel_extent > 0:
            sch.annotate(block, "meta_schedule.parallel", self.max_parallel_extent)
        if self.max_vectorize_extent > 0:
            sch.annotate(block, "meta_schedule.vectorize", self.max_vectorize_extent)
        if self.unroll_max_steps and not A.func_is_all_spatial(sch.func_index()):
            n = len(self.unroll_max_steps)
            v = sch.sample_categorical(self.unroll_max_steps, [1.0 / n] * n)
            key = "meta_schedule.unroll_explicit" if self.unroll_explicit else \
                "meta_schedule.unroll_implicit"
            sch.annotate(block, key, v)
        return [sch]


def _num_cores(context: "TuneContext") -> int:
    """The target's ``num-cores`` (TVM requires it); Workbench falls back to the tuning
    context's thread count so a plain ``"llvm"`` target still works."""
    target = context.target
    n = getattr(target, "num_cores", 0) if target is not None else 0
    return int(n) if n else int(context.num_threads)
