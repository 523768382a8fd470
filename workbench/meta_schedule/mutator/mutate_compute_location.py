"""MutateComputeLocation: re-draw one SampleComputeLocation decision among the locations that
are valid at that point of the trace (reference meta_schedule.md section 6; TVM's
mutate_compute_location.cc).

Contract: replays the trace (postprocs removed) on a fresh schedule of the tuning context's
module, collecting for each SampleComputeLocation the candidate list minus the current
decision; picks an instruction with a non-empty list uniformly, then a new location uniformly,
and returns ``trace.with_decision(inst, new, remove_postproc=True)``. Only that decision
changes. None when no such instruction exists (or the trace no longer replays).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.meta_schedule.mutator.mutator import Mutator, register_mutator
from workbench.tir.schedule import Schedule, ScheduleError, Trace
from workbench.tir.schedule.primitive.compute_location import collect_compute_location

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.tune_context import TuneContext


@register_mutator("mutate-compute-location")
class MutateComputeLocation(Mutator):
    def __init__(self) -> None:
        self.mod: Any = None

    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        super()._initialize_with_tune_context(context)
        self.mod = context.mod

    def apply(self, trace: Trace) -> Trace | None:
        if self.mod is None:
            raise RuntimeError("MutateComputeLocation needs a tuning context with a module "
                               "(call _initialize_with_tune_context first)")
        rand = self._rng()
        cands = self._candidates(trace, rand.fork_seed())
        if not cands:
            return None
        inst, locations = cands[rand.randint(0, len(cands))]
        new = locations[rand.randint(0, len(locations))]
        return trace.with_decision(inst, new, remove_postproc=True)

    def _candidates(self, trace: Trace, seed: int) -> list[tuple[Any, list[int]]]:
        sch = Schedule(self.mod, seed=seed)
        out: list[tuple[Any, list[int]]] = []

        def provider(inst, inputs, attrs, decision):
            if inst.kind.name == "SampleComputeLocation" and decision is not None:
                name = sch.get(inputs[0]).name_hint
                index = sch.func_index()
                locs = [c for c, _ in collect_compute_location(index.func, index, name)
                        if c != int(decision)]
                if locs:
                    out.append((inst, locs))
            return decision

        try:
            trace.apply_to_schedule(sch, remove_postproc=True, decision_provider=provider)
        except ScheduleError:
            return []  # the trace no longer replays on this module: nothing safe to mutate
        return out
