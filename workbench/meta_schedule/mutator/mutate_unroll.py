"""MutateUnroll: re-draw the sampled unroll depth that annotates the root block
(``meta_schedule.unroll_explicit`` / ``_implicit``), excluding the current choice."""
from __future__ import annotations

from workbench.meta_schedule.mutator.mutator import Mutator, register_mutator
from workbench.tir.schedule import Trace

_KEYS = ("meta_schedule.unroll_explicit", "meta_schedule.unroll_implicit")


@register_mutator("mutate-unroll")
class MutateUnroll(Mutator):
    def apply(self, trace: Trace) -> Trace | None:
        rand = self._rng()
        producers = {}
        cands = []
        for inst in trace.insts:
            if inst.kind.name == "EnterPostproc":
                break
            if inst.kind.name == "SampleCategorical" and inst.outputs:
                producers[id(inst.outputs[0])] = inst
            elif inst.kind.name == "Annotate" and inst.attrs and inst.attrs[0] in _KEYS:
                src = producers.get(id(inst.inputs[1]))
                if src is not None and src in trace.decisions and len(src.attrs[0]) > 1:
                    cands.append(src)
        if not cands:
            return None
        inst = cands[rand.randint(0, len(cands))]
        current = int(trace.decisions[inst])
        probs = [float(p) for p in inst.attrs[1]]
        options = [(i, p) for i, p in enumerate(probs) if i != current and p > 0]
        if not options:
            return None
        total = sum(p for _, p in options)
        x = rand.uniform() * total
        acc = 0.0
        choice = options[-1][0]
        for i, p in options:
            acc += p
            if x < acc:
                choice = i
                break
        return trace.with_decision(inst, choice, remove_postproc=True)
