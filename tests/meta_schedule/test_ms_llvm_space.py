"""The llvm search space (issue 7): TVM's default rule / postproc / mutator lists, each rule's
design spaces on known workloads (instruction-kind shapes, replay round trips), mutators
changing only what they own, and post-processed candidates that compile and match numpy."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from ms_tuning_workloads import LLVM_SPACE_TARGET, matmul, matmul_relu, run, softmax

from workbench import te, tir, topi
from workbench.meta_schedule.mutator import (
    MutateComputeLocation, MutateParallel, MutateTileSize, MutateUnroll, Mutator,
)
from workbench.meta_schedule.postproc import (
    DisallowDynamicLoop, Postproc, RewriteLayout, RewriteParallelVectorizeUnroll,
    RewriteReductionBlock,
)
from workbench.meta_schedule.schedule_rule import (
    AddRFactor, ApplyCustomRule, AutoInline, InlineConstantScalars, MultiLevelTiling,
    ParallelizeVectorizeUnroll, RandomComputeLocation, ReuseType, ScheduleRule,
    register_custom_schedule_rule,
)
from workbench.meta_schedule.search_strategy.base import TraceApplier
from workbench.meta_schedule.tune_context import TuneContext
from workbench.tir.schedule import Schedule
from workbench.tir.schedule.testing import verify_trace_roundtrip

TARGET = LLVM_SPACE_TARGET

# ---- workloads -----------------------------------------------------------------------------


def conv2d_nhwc():
    data = te.placeholder((1, 6, 6, 4), "float32", name="data")
    kernel = te.placeholder((3, 3, 4, 8), "float32", name="kernel")
    out = topi.nn.conv2d_nhwc(data, kernel, 1, 1, 1)
    return te.create_prim_func([data, kernel, out])


def sum_to_scalar(n=256):
    A = te.placeholder((n,), "float32", name="A")
    k = te.reduce_axis((0, n), name="k")
    B = te.compute((), lambda: te.sum(A[k], axis=k), name="B")
    return te.create_prim_func([A, B])


def const_scalar_consumer():
    A = te.placeholder((16,), "float32", name="A")
    c = te.compute((), lambda: tir.const(2.0, "float32"), name="c")
    D = te.compute((16,), lambda i: A[i] * c[()], name="D")
    return te.create_prim_func([A, D])


def _ctx(func, seed=3, **space_kw):
    space = "post-order-apply"
    if space_kw:
        from workbench.meta_schedule.space_generator import PostOrderApply
        space = PostOrderApply(**space_kw)
    return TuneContext(func, target=TARGET, space_generator=space,
                       search_strategy="replay-trace", rand_state=seed)


def _kinds(sch_or_trace):
    trace = getattr(sch_or_trace, "trace", sch_or_trace)
    return [i.kind.name for i in trace.insts]


def _spaces(func, seed=3):
    ctx = _ctx(func, seed)
    spaces = ctx.generate_design_space()
    for sch in spaces:
        verify_trace_roundtrip(sch, ctx.mod)
    return ctx, spaces


def _random_args(func):
    """Like ms_tuning_workloads.random_args, also for 0-d buffers."""
    rng = np.random.RandomState(0)
    return [np.asarray(rng.rand(*[int(x.value) for x in func.buffer_map[p].shape]),
                       dtype=func.buffer_map[p].dtype) for p in func.params]


def _check_candidates(ctx, spaces, ref, rtol=1e-4, fresh=True):
    """Every space, post-processed with the llvm postprocs, compiles, is free of
    meta_schedule annotations, replays, and matches ``ref`` (numpy). ``fresh`` re-samples
    all decisions; otherwise the space's own decisions are kept with unrolling off (LLVM can
    take minutes on explicitly unrolled redundant compute_at nests; see the report)."""
    applier = TraceApplier(ctx.mod, ctx.space_generator.postprocs)
    for k, space in enumerate(spaces):
        trace = space.trace.simplified(remove_postproc=True)
        if fresh:
            # A fresh split may leave a unit rfactor piece, which fails to replay (as in
            # TVM), so fall back to the space's own (valid) decisions.
            sch = next((c for c in (applier.apply(trace, seed=10 * k + j, keep_decisions=False)
                                    for j in range(1, 4)) if c is not None), None) \
                or applier.apply(trace, seed=k + 1, keep_decisions=True)
        else:
            for inst in list(trace.insts):
                if inst.kind.name == "SampleCategorical":
                    trace = trace.with_decision(inst, 0, remove_postproc=True)
            sch = applier.apply(trace, seed=k + 1, keep_decisions=True)
        assert sch is not None, f"space {k} rejected by a postproc"
        assert applier.postproc_failures == [0] * len(applier.postprocs)
        text = sch.mod["main"].script()
        assert "meta_schedule.parallel" not in text and "meta_schedule.vectorize" not in text
        args = _random_args(sch.mod["main"])
        got = run(sch.mod, args)[-1]
        np.testing.assert_allclose(got, ref(*args[:-1]), rtol=rtol, atol=1e-5)
        verify_trace_roundtrip(sch, ctx.mod)


# ---- the default lists -------------------------------------------------------------------


def test_create_llvm_lists_equal_tvm():
    rules = ScheduleRule.create("llvm")
    assert [type(r) for r in rules] == [
        ApplyCustomRule, InlineConstantScalars, AutoInline, AddRFactor, MultiLevelTiling,
        ParallelizeVectorizeUnroll, RandomComputeLocation]
    ai = rules[2]
    assert (ai.into_producer, ai.into_consumer, ai.inline_const_tensor,
            ai.disallow_if_then_else, ai.require_injective, ai.require_ordered,
            ai.disallow_op) == (False, True, True, True, True, True, ["tir.exp"])
    rf = rules[3]
    assert (rf.max_jobs_per_core, rf.max_innermost_factor) == (16, 64)
    mlt = rules[4]
    assert (mlt.structure, mlt.tile_binds, mlt.max_innermost_factor, mlt.vector_load_lens,
            mlt.reuse_read) == ("SSRSRS", None, 64, None, None)
    assert mlt.reuse_write == {"req": "may", "levels": [1, 2], "scope": "global"}
    pvu = rules[5]
    assert (pvu.max_jobs_per_core, pvu.max_vectorize_extent, pvu.unroll_max_steps,
            pvu.unroll_explicit) == (16, 64, [0, 16, 64, 512], True)

    assert [type(p) for p in Postproc.create("llvm")] == [
        DisallowDynamicLoop, RewriteParallelVectorizeUnroll, RewriteReductionBlock,
        RewriteLayout]

    probs = Mutator.create("llvm")
    assert [(type(m), p) for m, p in probs.items()] == [
        (MutateTileSize, 0.9), (MutateComputeLocation, 0.05), (MutateUnroll, 0.03),
        (MutateParallel, 0.02)]
    assert next(m for m in probs if isinstance(m, MutateParallel)).max_jobs_per_core == 16
    for name, cls in (("add-rfactor", AddRFactor), ("apply-custom-rule", ApplyCustomRule),
                      ("inline-constant-scalars", InlineConstantScalars)):
        assert isinstance(ScheduleRule.create(name), cls)
    assert isinstance(Postproc.create("rewrite-layout"), RewriteLayout)
    assert isinstance(Mutator.create("mutate-parallel"), MutateParallel)
    assert isinstance(Mutator.create("mutate-compute-location"), MutateComputeLocation)
    with pytest.raises(ValueError, match="req"):
        ReuseType(req="sometimes")


# ---- design spaces -----------------------------------------------------------------------

_MLT_MATMUL = ["Annotate", "GetLoops"] + ["SamplePerfectTile", "Split"] * 3 + ["Reorder"]
_ROOT = ["Annotate", "Annotate", "SampleCategorical", "Annotate"]


def test_matmul_spaces_with_and_without_cache_write():
    ctx, spaces = _spaces(matmul(64))
    shapes = sorted(_kinds(s) for s in spaces)
    no_cache = ["GetSBlock"] * 2 + _MLT_MATMUL + _ROOT
    cached = ["GetSBlock"] * 2 + _MLT_MATMUL + ["CacheWrite", "ReverseComputeAt"] + _ROOT
    assert shapes == sorted([no_cache, cached, cached])
    # The two cached designs differ in the tile level the cache is computed at (1 vs 2).
    locs = sorted(str(i.inputs[1]) for s in spaces for i in s.trace.insts
                  if i.kind.name == "ReverseComputeAt")
    assert len(set(locs)) == 2
    _check_candidates(ctx, spaces, lambda a, b: a @ b)


def test_multi_level_tiling_write_reuse_order_is_tvms():
    # No elementwise consumer: [no cache, cache at level 1, cache at level 2].
    sch = Schedule(matmul(32))
    out = MultiLevelTiling(reuse_write=ReuseType("may", [1, 2], "global")).apply(
        sch, sch.get_sblock("C"))
    assert ["CacheWrite" in _kinds(s) for s in out] == [False, True, True]
    # An elementwise epilogue is the cache: [moved at level 1, at level 2, left alone].
    sch = Schedule(matmul_relu(32))
    out = MultiLevelTiling(reuse_write={"req": "may", "levels": [1, 2],
                                        "scope": "global"}).apply(sch, sch.get_sblock("C"))
    assert [_kinds(s)[-2:] for s in out] == [["GetConsumers", "ReverseComputeAt"]] * 2 + \
        [["Split", "Reorder"]]
    # req "must" drops the no-cache design; "no" adds nothing.
    sch = Schedule(matmul(32))
    out = MultiLevelTiling(reuse_write=ReuseType("must", [1], "global")).apply(
        sch, sch.get_sblock("C"))
    assert len(out) == 1 and "CacheWrite" in _kinds(out[0])
    sch = Schedule(matmul(32))
    assert len(MultiLevelTiling(reuse_write=ReuseType("no")).apply(
        sch, sch.get_sblock("C"))) == 1


def test_matmul_relu_epilogue_spaces():
    ctx, spaces = _spaces(matmul_relu(32))
    assert len(spaces) == 3
    assert sum(_kinds(s).count("ReverseComputeAt") for s in spaces) == 2
    assert not any("CacheWrite" in _kinds(s) for s in spaces)
    _check_candidates(ctx, spaces, lambda a, b: np.maximum(a @ b, 0))


def test_conv2d_nhwc_spaces():
    ctx, spaces = _spaces(conv2d_nhwc())
    assert len(spaces) == 3
    for sch in spaces:
        kinds = _kinds(sch)
        # n, h, w, co spatial (n=4 tiles), rh, rw, rc reduction (n=2 tiles).
        tiles = [i.attrs[0] for i in sch.trace.insts if i.kind.name == "SamplePerfectTile"]
        assert sorted(tiles) == [2, 2, 2, 4, 4, 4, 4]
        # The padding block (if_then_else, next to a reduction) is not inlined: it gets a
        # sampled compute location instead.
        assert kinds[-2:] == ["SampleComputeLocation", "ComputeAt"]
        assert "ComputeInline" not in kinds
    assert sum("CacheWrite" in _kinds(s) for s in spaces) == 2

    def ref(data, kernel):
        pad = np.pad(data, ((0, 0), (1, 1), (1, 1), (0, 0)))
        out = np.zeros((1, 6, 6, 8), "float32")
        for rh in range(3):
            for rw in range(3):
                out += np.einsum("nhwc,co->nhwo", pad[:, rh:rh + 6, rw:rw + 6, :],
                                 kernel[rh, rw])
        return out
    _check_candidates(ctx, spaces[:1], ref, fresh=False)


def test_softmax_spaces_rfactor_both_reductions():
    ctx, spaces = _spaces(softmax())
    # maxelem and expsum each: rfactor on the outer piece, on the inner piece, untouched ->
    # up to 3 x 3. rfactor refuses a piece of extent 1 (its variable drops out of the
    # binding, as in TVM), so with such a sampled split that design is missing.
    counts = sorted(_kinds(s).count("RFactor") for s in spaces)
    assert len(spaces) in (4, 6, 9) and counts[0] == 0 and counts[1] == 1
    assert counts[-1] == 2
    for sch in spaces:
        kinds = _kinds(sch)
        n_rf = kinds.count("RFactor")
        # Each rfactor annotates its write-back block, which RandomComputeLocation then
        # un-annotates after fetching the rfactor block as its producer.
        assert kinds.count("GetProducers") == n_rf and kinds.count("Unannotate") == n_rf
        assert "Reorder" not in kinds  # no MultiLevelTiling on softmax

    def ref(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    _check_candidates(ctx, spaces[::4], ref, fresh=False)


def test_add_rfactor_sum_to_scalar():
    ctx, spaces = _spaces(sum_to_scalar())
    rf_prefix = ["GetSBlock", "GetSBlock", "GetLoops", "SamplePerfectTile", "Split",
                 "RFactor", "Annotate"]
    assert sorted(_kinds(s) for s in spaces) == sorted(
        [rf_prefix + _ROOT, rf_prefix + _ROOT, ["GetSBlock", "GetSBlock"] + _ROOT])
    # The two rfactor designs factor different pieces of the split (outer, inner).
    split_outs = []
    for s in spaces:
        insts = s.trace.insts
        split = next((i for i in insts if i.kind.name == "Split"), None)
        if split is not None:
            rf = next(i for i in insts if i.kind.name == "RFactor")
            split_outs.append(split.outputs.index(rf.inputs[0]))
            assert rf.attrs == [0]  # factor_axis = number of spatial loops
    assert sorted(split_outs) == [0, 1]
    _check_candidates(ctx, spaces, lambda a: np.asarray(a.sum(), "float32"))

    # A matmul with enough spatial parallelism is left to MultiLevelTiling.
    sch = Schedule(matmul(64))
    rule = AddRFactor(16, 64)
    rule._initialize_with_tune_context(ctx)
    assert rule.apply(sch, sch.get_sblock("C")) == [sch] and len(sch.trace.insts) == 1


def test_inline_constant_scalars():
    func = const_scalar_consumer()
    ctx = _ctx(func, sch_rules=[InlineConstantScalars()], postprocs=[], mutator_probs={})
    (sch,) = ctx.generate_design_space()
    assert _kinds(sch) == ["GetSBlock", "GetSBlock", "GetSBlock", "ComputeInline"]
    assert "c" not in sch.func_index().blocks
    args = _random_args(sch.mod["main"])
    np.testing.assert_allclose(run(sch.mod, args)[-1], args[0] * 2, rtol=1e-6)
    # An output 0-d block is left alone.
    (sch,) = _ctx(sum_to_scalar(), sch_rules=[InlineConstantScalars()], postprocs=[],
                  mutator_probs={}).generate_design_space()
    assert "ComputeInline" not in _kinds(sch)


def _tile_c_by_8(sch, block):
    i, _, _ = sch.get_loops(block)
    sch.split(i, factors=[None, 8])
    return [sch]


def test_apply_custom_rule():
    register_custom_schedule_rule("test_llvm_space_tile8", _tile_c_by_8, override=True)
    sch = Schedule(matmul(32))
    sch.annotate(sch.get_sblock("C"), "schedule_rule", "test_llvm_space_tile8")
    ctx, spaces = _spaces(sch.mod)
    (space,) = spaces  # the other rules (MultiLevelTiling's 3 designs) skip the block
    kinds = _kinds(space)
    assert kinds == ["GetSBlock", "GetSBlock", "GetLoops", "Split"] + _ROOT
    assert "meta_schedule.tiling_structure" not in space.mod["main"].script()
    _check_candidates(ctx, spaces, lambda a, b: a @ b)

    # An annotation naming no registered function: warn, drop it, use the other rules.
    sch = Schedule(matmul(32))
    sch.annotate(sch.get_sblock("C"), "schedule_rule", "test_llvm_space_missing")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spaces = _ctx(sch.mod).generate_design_space()
    assert any("test_llvm_space_missing" in str(w.message) for w in caught)
    assert len(spaces) == 3 and all("Unannotate" in _kinds(s) for s in spaces)


# ---- mutators ----------------------------------------------------------------------------


def _diff(old, new):
    """(instructions that differ by identity, decisions that differ) of ``new`` vs ``old``."""
    old_insts = [i for i in old.insts if i.kind.name != "EnterPostproc"]
    assert len(old_insts) == len(new.insts)
    insts = [k for k, (a, b) in enumerate(zip(old_insts, new.insts)) if a is not b]
    decisions = [k for k, inst in enumerate(new.insts)
                 if new.decisions.get(inst) != old.decisions.get(old_insts[k])]
    return insts, decisions


def _mutate_many(mut, ctx, trace, n=12):
    mut._initialize_with_tune_context(ctx)
    return [mut.apply(trace) for _ in range(n)]


def test_mutate_tile_size_changes_one_tile_decision():
    ctx, spaces = _spaces(matmul(64))
    trace = spaces[0].trace
    for new in _mutate_many(MutateTileSize(), ctx, trace):
        insts, decisions = _diff(trace, new)
        assert insts == [] and len(decisions) == 1
        assert new.insts[decisions[0]].kind.name == "SamplePerfectTile"


def test_mutate_unroll_changes_only_the_unroll_decision():
    ctx, spaces = _spaces(matmul(32))
    trace = spaces[0].trace
    for new in _mutate_many(MutateUnroll(), ctx, trace):
        insts, decisions = _diff(trace, new)
        assert insts == [] and len(decisions) == 1
        assert new.insts[decisions[0]].kind.name == "SampleCategorical"


def test_mutate_compute_location_changes_one_location_decision():
    ctx, spaces = _spaces(conv2d_nhwc())
    trace = spaces[0].trace
    seen = set()
    for new in _mutate_many(MutateComputeLocation(), ctx, trace):
        insts, decisions = _diff(trace, new)
        assert insts == [] and len(decisions) == 1
        inst = new.insts[decisions[0]]
        assert inst.kind.name == "SampleComputeLocation"
        seen.add(new.decisions[inst])
        sch = Schedule(ctx.mod)
        new.apply_to_schedule(sch, remove_postproc=True)  # the mutated trace replays
    assert len(seen) >= 2
    # Nothing to mutate without a SampleComputeLocation.
    ctx2, spaces2 = _spaces(matmul(32))
    mut = MutateComputeLocation()
    mut._initialize_with_tune_context(ctx2)
    assert mut.apply(spaces2[0].trace) is None


def test_mutate_parallel_changes_only_the_annotation_value():
    ctx, spaces = _spaces(matmul(64))
    results = []
    for seed in range(8):
        c, sp = _spaces(matmul(64), seed=seed)
        for space in sp:
            for new in _mutate_many(MutateParallel(16), c, space.trace, n=3):
                if new is not None:
                    results.append((c, space.trace, new))
    assert results, "no design space offered an alternative parallel plan"
    for c, old, new in results:
        insts, decisions = _diff(old, new)
        assert decisions == [] and len(insts) == 1
        before = [i for i in old.insts if i.kind.name != "EnterPostproc"][insts[0]]
        after = new.insts[insts[0]]
        assert after.kind.name == "Annotate" and after.attrs == ["meta_schedule.parallel"]
        assert before.inputs[0] is after.inputs[0] and after.outputs == before.outputs
        assert before.inputs[1] == 32 and 1 <= after.inputs[1] <= 32 and after.inputs[1] != 32
        sch = Schedule(c.mod)
        new.apply_to_schedule(sch, remove_postproc=True)
    # An all-spatial 256x256 function has no plan under the limit: nothing to change.
    from ms_tuning_workloads import elementwise
    c, sp = _spaces(elementwise(256))
    assert _mutate_many(MutateParallel(16), c, sp[0].trace, n=1) == [None]


def test_rewrite_layout_leaves_functions_without_layout_free_buffers():
    sch = Schedule(matmul(16))
    sch.enter_postproc()
    before = len(sch.trace.insts)
    assert RewriteLayout().apply(sch) and len(sch.trace.insts) == before
