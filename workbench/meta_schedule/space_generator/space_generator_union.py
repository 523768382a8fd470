"""SpaceGeneratorUnion: the concatenated design spaces of several generators."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from workbench.ir.module import IRModule
from workbench.meta_schedule.space_generator.space_generator import FROM_TARGET, SpaceGenerator
from workbench.tir.schedule import Schedule

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.tune_context import TuneContext


class SpaceGeneratorUnion(SpaceGenerator):
    def __init__(self, space_generators: Sequence[SpaceGenerator], sch_rules: Any = FROM_TARGET,
                 postprocs: Any = FROM_TARGET, mutator_probs: Any = FROM_TARGET) -> None:
        super().__init__(sch_rules, postprocs, mutator_probs)
        self.space_generators = [SpaceGenerator.create(g) for g in space_generators]

    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        super()._initialize_with_tune_context(context)
        for g in self.space_generators:
            g._initialize_with_tune_context(context)

    def generate_design_space(self, mod: IRModule) -> list[Schedule]:
        out: list[Schedule] = []
        for g in self.space_generators:
            out.extend(g.generate_design_space(mod))
        return out
