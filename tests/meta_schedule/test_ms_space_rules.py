"""Space generators, the part-1 llvm rules, postprocessors and mutators, and TuneContext."""
from __future__ import annotations

import numpy as np
import pytest
from ms_tuning_workloads import LLVM_SPACE_TARGET, elementwise, matmul, matmul_relu, random_args, run

from workbench.meta_schedule.mutator import Mutator, MutateTileSize, MutateUnroll
from workbench.meta_schedule.postproc import (
    DisallowDynamicLoop, Postproc, RewriteParallelVectorizeUnroll, RewriteReductionBlock,
)
from workbench.meta_schedule.schedule_rule import (
    AutoInline, MultiLevelTiling, ParallelizeVectorizeUnroll, ScheduleRule,
)
from workbench.meta_schedule.search_strategy.base import TraceApplier
from workbench.meta_schedule.space_generator import (
    PostOrderApply, ScheduleFn, SpaceGenerator, SpaceGeneratorUnion,
)
from workbench.meta_schedule.tune_context import TuneContext
from workbench.meta_schedule.utils import estimate_tir_flops
from workbench.tir.schedule import Schedule
from workbench.tir.schedule.testing import verify_trace_roundtrip

TARGET = LLVM_SPACE_TARGET


def _ctx(func, space="post-order-apply", seed=3):
    return TuneContext(func, target=TARGET, space_generator=space,
                       search_strategy="replay-trace", rand_state=seed)


def _kinds(sch):
    return [i.kind.name for i in sch.trace.insts]


def test_post_order_apply_matmul_spaces():
    ctx = _ctx(matmul(64))
    spaces = ctx.generate_design_space()
    assert len(spaces) == 3  # no write cache, cache at level 1, cache at level 2
    for sch in spaces:
        kinds = _kinds(sch)
        assert kinds[:2] == ["GetSBlock", "GetSBlock"]  # C, then root (post-order)
        assert kinds.count("SamplePerfectTile") == 3 and "Reorder" in kinds
        assert kinds.count("SampleCategorical") == 1
        verify_trace_roundtrip(sch, ctx.mod)
    assert sum("CacheWrite" in _kinds(s) for s in spaces) == 2


def test_matmul_relu_epilogue_moves_into_tiles():
    spaces = _ctx(matmul_relu()).generate_design_space()
    assert len(spaces) == 3
    assert sum("ReverseComputeAt" in _kinds(s) for s in spaces) == 2
    assert not any("CacheWrite" in _kinds(s) for s in spaces)


def test_auto_inline_elementwise_producer():
    from workbench import te
    A = te.placeholder((32, 32), name="A")
    B = te.compute((32, 32), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((32, 32), lambda i, j: B[i, j] * 2.0, name="C")
    func = te.create_prim_func([A, C])
    ctx = _ctx(func, space=PostOrderApply(sch_rules=[AutoInline()], postprocs=[],
                                          mutator_probs={}))
    (sch,) = ctx.generate_design_space()
    assert "ComputeInline" in _kinds(sch)
    args = random_args(sch.mod["main"])
    np.testing.assert_allclose(run(sch.mod, args)[-1], (args[0] + 1) * 2, rtol=1e-6)


def test_postprocs_materialise_annotations_and_results_match():
    for func, ref in ((matmul(64), lambda a, b: a @ b),
                      (elementwise(), lambda a: a * 2 + 1)):
        ctx = _ctx(func)
        applier = TraceApplier(ctx.mod, ctx.space_generator.postprocs)
        kinds_seen = set()
        for k, space in enumerate(ctx.generate_design_space() * 4):
            sch = applier.apply(space.trace.simplified(remove_postproc=True), seed=k + 1,
                                keep_decisions=False)
            assert sch is not None
            text = sch.mod["main"].script()
            # Some sampled tiles leave nothing to parallelize or vectorize; most do not.
            kinds_seen.update(kind for kind in ("T.parallel", "T.vectorized") if kind in text)
            assert "meta_schedule.parallel" not in text
            args = random_args(sch.mod["main"])
            np.testing.assert_allclose(run(sch.mod, args)[-1], ref(*args[:-1]), rtol=1e-4,
                                       atol=1e-5)
            verify_trace_roundtrip(sch, ctx.mod)
        assert kinds_seen == {"T.parallel", "T.vectorized"}


def test_rewrite_reduction_block_decomposes():
    sch = Schedule(matmul(16))
    sch.enter_postproc()
    assert RewriteReductionBlock().apply(sch)
    names = set(sch.func_index().blocks)
    assert {"C_init", "C_update"} <= names
    assert DisallowDynamicLoop().apply(sch)


def test_mutate_tile_size_keeps_the_product():
    ctx = _ctx(matmul(64))
    space = ctx.generate_design_space()[0]
    mut = MutateTileSize()
    mut._initialize_with_tune_context(ctx)
    changed = 0
    for _ in range(20):
        new = mut.apply(space.trace)
        assert new is not None
        for inst, d in new.decisions.items():
            if inst.kind.name == "SamplePerfectTile":
                assert int(np.prod(d)) == 64 and (len(d) == 2 or d[-1] <= 64)
        changed += any(new.decisions[i] != space.trace.decisions[i]
                       for i in new.decisions if i.kind.name == "SamplePerfectTile")
    assert changed == 20
    assert mut.apply(Schedule(matmul(8)).trace) is None  # nothing to mutate


def test_mutate_unroll_changes_the_depth():
    ctx = _ctx(matmul(32))
    space = ctx.generate_design_space()[0]
    inst = next(i for i in space.trace.insts if i.kind.name == "SampleCategorical")
    mut = MutateUnroll()
    mut._initialize_with_tune_context(ctx)
    for _ in range(10):
        new = mut.apply(space.trace)
        assert new.decisions[inst] != space.trace.decisions[inst]


def test_factories():
    # The full llvm lists are checked (types, order, parameters) in test_ms_llvm_space.py.
    rules = ScheduleRule.create("llvm")
    assert [type(r).__name__ for r in rules] == [
        "ApplyCustomRule", "InlineConstantScalars", "AutoInline", "AddRFactor",
        "MultiLevelTiling", "ParallelizeVectorizeUnroll", "RandomComputeLocation"]
    assert isinstance(ScheduleRule.create("auto-inline"), AutoInline)
    assert [type(p).__name__ for p in Postproc.create("llvm")] == [
        "DisallowDynamicLoop", "RewriteParallelVectorizeUnroll", "RewriteReductionBlock",
        "RewriteLayout"]
    assert isinstance(Postproc.create("rewrite-parallel-vectorize-unroll"),
                      RewriteParallelVectorizeUnroll)
    probs = Mutator.create("llvm")
    assert sorted((type(m).__name__, p) for m, p in probs.items()) == [
        ("MutateComputeLocation", 0.05), ("MutateParallel", 0.02), ("MutateTileSize", 0.9),
        ("MutateUnroll", 0.03)]
    assert isinstance(Mutator.create("mutate-tile-size"), MutateTileSize)
    for factory in (ScheduleRule.create, Postproc.create, Mutator.create):
        with pytest.raises(ValueError, match="CPUs"):
            factory("cuda")
        with pytest.raises(ValueError, match="unknown kind"):
            factory("nope")
    assert isinstance(SpaceGenerator.create(), PostOrderApply)
    assert isinstance(SpaceGenerator.create(lambda s: None), ScheduleFn)
    with pytest.raises(ValueError):
        SpaceGenerator.create("beam")
    rule = MultiLevelTiling()
    assert rule.clone() is not rule and rule.clone().structure == "SSRSRS"
    assert ParallelizeVectorizeUnroll().clone().unroll_max_steps == [0, 16, 64, 512]


def test_schedule_fn_and_union():
    def one(sch):
        return sch

    def two(sch):
        return [sch, sch.copy()]

    union = SpaceGeneratorUnion([ScheduleFn(one), two, ScheduleFn(lambda s: None)],
                                sch_rules=[], postprocs=[], mutator_probs={})
    ctx = _ctx(matmul(16), space=union)
    assert len(ctx.generate_design_space()) == 4
    with pytest.raises(TypeError, match="must return"):
        _ctx(matmul(16), space=lambda s: 3).generate_design_space()


def test_tune_context_clone_and_seeds():
    ctx = _ctx(matmul(16), seed=42)
    a, b = ctx.clone(), ctx.clone()
    assert a.space_generator is not ctx.space_generator
    assert a.search_strategy is not b.search_strategy
    assert a.rand_state != b.rand_state
    assert a.space_generator.sch_rules[0] is not ctx.space_generator.sch_rules[0]
    assert a.num_threads >= 1 and a.task_name == "main"
    with pytest.raises(ValueError, match="needs a target"):
        TuneContext(matmul(16), space_generator="post-order-apply")
    assert estimate_tir_flops(ctx.mod) == 2 * 16 ** 3
