"""MutateParallel: change the *value* of the root's ``meta_schedule.parallel`` annotation to
another extent that leads to a different fusion plan (reference meta_schedule.md section 6;
TVM's mutate_parallel.cc). Decisions are untouched.

Contract: picks an ``Annotate(block, N)`` with key ``meta_schedule.parallel`` uniformly,
replays the trace (postprocs removed) on a fresh schedule of the context's module, and lists,
for each top-level block, the prefix products of its outermost run of constant spatial loops
(stopping once one reaches ``limit = max_jobs_per_core * cores``). Each product p <= limit
gives a plan (how many loops each block would fuse for parallelism); plans are deduplicated,
the current N's plan dropped, and one of the rest chosen uniformly. Returns the trace (cut at
EnterPostproc, all decisions kept) with that Annotate's value replaced, or None.
"""
from __future__ import annotations

import bisect
from typing import TYPE_CHECKING, Any

from workbench.meta_schedule import analysis as A
from workbench.meta_schedule.mutator.mutator import Mutator, register_mutator
from workbench.meta_schedule.schedule_rule.parallel_vectorize_unroll import _num_cores
from workbench.tir.analysis import collect_vars, realizes_under
from workbench.tir.schedule import Schedule, ScheduleError, Trace
from workbench.tir.schedule.instruction import Instruction
from workbench.tir.stmt import BlockRealize, For, IterType

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.tune_context import TuneContext

_KEY = "meta_schedule.parallel"


@register_mutator("mutate-parallel")
class MutateParallel(Mutator):
    def __init__(self, max_jobs_per_core: int = 16) -> None:
        self.max_jobs_per_core = max_jobs_per_core
        self.max_parallel_extent = -1
        self.mod: Any = None

    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        super()._initialize_with_tune_context(context)
        self.mod = context.mod
        self.max_parallel_extent = self.max_jobs_per_core * _num_cores(context)

    def apply(self, trace: Trace) -> Trace | None:
        if self.mod is None:
            raise RuntimeError("MutateParallel needs a tuning context with a module "
                               "(call _initialize_with_tune_context first)")
        rand = self._rng()
        block_names: dict[int, str] = {}
        anns: list[Instruction] = []
        for inst in trace.insts:
            if inst.kind.name == "EnterPostproc":
                break
            if inst.kind.name == "GetSBlock" and inst.outputs:
                block_names[id(inst.outputs[0])] = inst.attrs[0]
            elif inst.kind.name == "Annotate" and inst.attrs and inst.attrs[0] == _KEY:
                anns.append(inst)
        if not anns:
            return None
        ann = anns[rand.randint(0, len(anns))]
        block = block_names.get(id(ann.inputs[0]))
        if block is None:
            return None
        sch = Schedule(self.mod, seed=rand.fork_seed())
        try:
            trace.apply_to_schedule(sch, remove_postproc=True)
        except ScheduleError:
            return None
        limit = self.max_parallel_extent
        prods = _analyze_parallel(sch, block, limit)
        plan2limit: dict[tuple[int, ...], int] = {}
        for ps in prods:
            for p in ps:
                if p <= limit:
                    plan2limit.setdefault(_num_fused_loops(prods, p), p)
        plan2limit.pop(_num_fused_loops(prods, int(ann.inputs[1])), None)
        if not plan2limit:
            return None
        # TVM iterates a std::map, i.e. plans in sorted order.
        plans = sorted(plan2limit)
        new_value = plan2limit[plans[rand.randint(0, len(plans))]]
        new_inst = Instruction(ann.kind, [ann.inputs[0], new_value], list(ann.attrs),
                               list(ann.outputs))
        insts: list[Instruction] = []
        for inst in trace.insts:
            if inst.kind.name == "EnterPostproc":
                break
            insts.append(new_inst if inst is ann else inst)
        kept = set(insts)
        return Trace(insts, {i: d for i, d in trace.decisions.items() if i in kept})


def _analyze_parallel(sch: Schedule, block: str, limit: int) -> list[list[int]]:
    """Per block realize directly under ``block``'s scope: prefix products (outermost first)
    of the constant spatial loops above it that are outside every non-spatial loop, stopping
    once a product reaches ``limit`` (TVM's AnalyzeParallel)."""
    info = sch.func_index().blocks[block]
    realizes = realizes_under(info.block.body)
    non_spatial = set()
    for r in realizes:
        for iv, value in zip(r.block.iter_vars, r.iter_values):
            if iv.iter_type != IterType.DATA_PAR:
                collect_vars(value, non_spatial)
    out: list[list[int]] = []
    for r in realizes:
        extents: list[int] = []
        for lp in reversed(_loops_above(info.block.body, r)):  # innermost first
            ext = A.const_int(lp.extent)
            if ext is not None and lp.loop_var not in non_spatial:
                extents.append(ext)
            else:
                extents.clear()
        if not extents:
            continue
        prods, p = [], 1
        for ext in reversed(extents):
            p *= ext
            prods.append(p)
            if p >= limit:
                break
        out.append(prods)
    return out


def _loops_above(root: Any, target: BlockRealize) -> list[For]:
    """The For loops from ``root`` down to ``target`` (outermost first)."""
    from workbench.tir.analysis import child_stmts

    def walk(node: Any, path: list[For]) -> list[For] | None:
        if node is target:
            return path
        if isinstance(node, BlockRealize):
            return None
        if isinstance(node, For):
            path = path + [node]
        for c in child_stmts(node):
            found = walk(c, path)
            if found is not None:
                return found
        return None

    return walk(root, []) or []


def _num_fused_loops(prods: list[list[int]], limit: int) -> tuple[int, ...]:
    """TVM's GetNumFusedLoops: per block, how many outer loops a parallel limit fuses."""
    plan = []
    for ps in prods:
        i = bisect.bisect_right(ps, limit)
        if i > 0 and ps[i - 1] == limit:
            i -= 1
        if i != len(ps):
            i += 1
        plan.append(i)
    return tuple(plan)
