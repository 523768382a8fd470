"""Auto-tensorization in the tuner: rule kinds from CPU features, MultiLevelTilingWithIntrin /
MultiLevelTilingMicroKernel design spaces, RewriteLayout + RewriteTensorize postprocs,
candidates that compile and match numpy, traces that round-trip, and tune_tir end to end."""
from __future__ import annotations

import numpy as np
import pytest
from ms_tuning_workloads import fast_runner, tensorized_only_space, xgb_1thread

import workbench as wb
from workbench import te, topi
from workbench import meta_schedule as ms
from workbench.meta_schedule.postproc import RewriteTensorize
from workbench.meta_schedule.schedule_rule import MultiLevelTilingWithIntrin
from workbench.meta_schedule.search_strategy.base import TraceApplier
from workbench.meta_schedule.space_generator.space_generator import rule_kind_from_target
from workbench.meta_schedule.tune_context import TuneContext
from workbench.target import Target
from workbench.tir.schedule import Schedule
from workbench.tir.schedule.testing import verify_trace_roundtrip
from workbench.tir.transform import RemoveWeightLayoutRewriteBlock
from workbench.tir.transform.remove_weight_layout_rewrite_block import layout_rewrites

HOST = Target("llvm")
TARGET = "llvm -num-cores=2"
VNNI = "llvm -num-cores=2 -mcpu=cascadelake"
needs_vnni = pytest.mark.skipif(not HOST.has_feature("avx512vnni"), reason="host lacks VNNI")
needs_avx512 = pytest.mark.skipif(not HOST.has_feature("avx512f"), reason="host lacks AVX-512")


def int8_dense(m=16, n=32, k=64):
    x = te.placeholder((m, k), "uint8", name="X")
    w = te.placeholder((n, k), "int8", name="W")
    return te.create_prim_func([x, w, topi.nn.dense(x, w, out_dtype="int32")])


def fp32_matmul(m=32, n=64, k=64):
    a = te.placeholder((m, k), "float32", name="A")
    b = te.placeholder((k, n), "float32", name="B")
    return te.create_prim_func([a, b, topi.nn.matmul(a, b)])


def test_rule_kind_follows_cpu_features():
    assert rule_kind_from_target(Target("llvm -mcpu=cascadelake")) == "vnni"
    assert rule_kind_from_target(Target("llvm -mcpu=skylake-avx512")) == "avx512"
    assert rule_kind_from_target(Target("llvm -mcpu=haswell")) == "llvm"
    assert rule_kind_from_target(Target("llvm -mattr=+avx2,+fma")) == "llvm"
    names = [type(r).__name__ for r in ms.ScheduleRule.create("vnni")]
    assert names.index("MultiLevelTilingWithIntrin") < names.index("MultiLevelTiling")
    assert "MultiLevelTilingMicroKernel" in names
    assert [str(p) for p in ms.Postproc.create("avx512")][-2:] == ["RewriteLayout",
                                                                   "RewriteTensorize"]


def test_rule_checks_the_intrinsic_exists():
    with pytest.raises(ValueError, match="no tensor intrinsic named 'no_such_intrin'"):
        MultiLevelTilingWithIntrin("no_such_intrin")


def _candidates(func, target, n=2, seed=3, family=None):
    """(design spaces, up to ``n`` candidates: one per space, in order). ``family``: only
    candidates whose first tensorized intrinsic starts with it ("": the untensorized ones)."""
    ctx = TuneContext(func, target=target, space_generator="post-order-apply",
                      search_strategy="replay-trace", rand_state=seed)
    spaces = ctx.generate_design_space()
    applier = TraceApplier(ctx.mod, ctx.space_generator.postprocs)
    out = []
    for k, space in enumerate(spaces):
        trace = space.trace.simplified(remove_postproc=True)
        for j in range(6):
            sch = applier.apply(trace, seed=seed + 10 * k + j, keep_decisions=False)
            if sch is not None:
                if family is None or _family(sch).startswith(family) and \
                        (family or not _tensorized(sch)):
                    out.append(sch)
                break
        if len(out) >= n:
            break
    return spaces, out


def _tensorized(sch):
    return [i.attrs[0] for i in sch.trace.insts if i.kind.name == "Tensorize"]


def _family(sch):
    names = _tensorized(sch)
    return names[0] if names else ""


def _has_plain_space(spaces):
    """The tensorizing rules always keep one untensorized space (tiled by MultiLevelTiling)."""
    return any(not any(i.kind.name == "Blockize" for i in s.trace.insts) for s in spaces)


def _run_stripped(sch, args):
    """Run a candidate as the tuner measures it: packing blocks stripped, weights packed."""
    mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(sch.mod)
    rewrites = {r.param_index: r for r in layout_rewrites(mod["main"])}
    rt = wb.build(mod, target=TARGET)
    nd = [wb.nd.array(rewrites[i].pack(a) if i in rewrites else a) for i, a in enumerate(args)]
    rt["main"](*nd)
    return nd[-1].numpy()


def _before_postproc(sch):
    kinds = [i.kind.name for i in sch.trace.insts]
    at = kinds.index("EnterPostproc")
    return kinds[:at], kinds[at:]


def _check_packed_in_design_space(sch, func, packed_shape):
    """The weight is packed (TransformLayout) before the tile is blockized, RewriteLayout
    leaves it alone, the block is tensorized, and the trace replays."""
    before, post = _before_postproc(sch)
    assert before.index("TransformLayout") < before.index("Blockize")
    assert "TransformLayout" not in post and post.index("Tensorize") > 0
    packed = RemoveWeightLayoutRewriteBlock()(sch.mod)["main"]
    assert [r.packed_shape for r in layout_rewrites(packed)] == [packed_shape]
    verify_trace_roundtrip(sch, func)


def test_int8_dense_design_spaces_pack_the_weight_for_the_vnni_micro_kernel():
    func = int8_dense()
    spaces, cands = _candidates(func, VNNI, family="avx512_vnni_mk_")
    assert any(i.kind.name == "Blockize" for i in spaces[0].trace.insts)
    assert _has_plain_space(spaces) and _candidates(func, VNNI, family="")[1]
    assert cands
    for sch in cands:
        # The rule packs the layout-free weight [N/16, K/4, 16, 4] before tiling; RewriteLayout
        # leaves it alone.
        _check_packed_in_design_space(sch, func, (2, 16, 16, 4))


def test_int8_dense_without_a_micro_kernel_shape_uses_the_16x4_dot_product():
    func = int8_dense(m=13)          # no register tile (MR 4, 6, 7, 8) divides 13 rows
    spaces, cands = _candidates(func, VNNI, n=8)
    assert _has_plain_space(spaces)
    tensorized = [c for c in cands if _tensorized(c)]
    assert tensorized and all(_tensorized(c) == ["dot_16x4_vnni"] for c in tensorized)
    for sch in tensorized:
        # packed in the design space, as for the micro-kernels
        _check_packed_in_design_space(sch, func, (2, 16, 16, 4))


@needs_vnni
def test_int8_dense_candidates_match_numpy_exactly():
    func = int8_dense()
    _, cands = _candidates(func, TARGET, n=12)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (16, 64)).astype("uint8")
    w = rng.integers(-128, 128, (32, 64)).astype("int8")
    want = x.astype(np.int32) @ w.astype(np.int32).T
    family = "amx_int8_mk_" if HOST.has_feature("amx-int8") else "avx512_vnni_mk_"
    families = {_family(c) for c in cands}
    assert "" in families and "dot_16x4_vnni" in families
    assert any(f.startswith(family) for f in families)
    for sch in cands:          # every space: micro-kernels, the dot product, plain tiling
        got = _run_stripped(sch, [x, w, np.zeros((16, 32), "int32")])
        np.testing.assert_array_equal(got, want)
    _, cands = _candidates(int8_dense(m=13), TARGET, n=12)
    assert "dot_16x4_vnni" in {_family(c) for c in cands}
    for sch in cands:
        got = _run_stripped(sch, [x[:13], w, np.zeros((13, 32), "int32")])
        np.testing.assert_array_equal(got, want[:13])


def bf16_matmul(m=32, n=64, k=64):
    a = te.placeholder((m, k), "bfloat16", name="A")
    b = te.placeholder((k, n), "bfloat16", name="B")
    return te.create_prim_func([a, b, topi.nn.matmul(a, b, out_dtype="float32")])


@pytest.mark.parametrize("target,family", [
    ("llvm -num-cores=2 -mcpu=cooperlake", "avx512_bf16_mk_"),
    ("llvm -num-cores=2 -mcpu=sapphirerapids", "amx_bf16_mk_")])
def test_bf16_matmul_packs_the_weight_for_the_bf16_kernels(target, family, monkeypatch):
    from workbench.runtime import cpu_state
    # the design space only (nothing runs): the AMX rule must not depend on whether this
    # host's OS grants the tile state (an AMD host has none)
    monkeypatch.setitem(cpu_state._granted, "amx", None)
    func = bf16_matmul()
    spaces, cands = _candidates(func, target, family=family)
    assert cands and _has_plain_space(spaces)
    for sch in cands:
        before, post = _before_postproc(sch)
        assert before.index("TransformLayout") < before.index("Blockize")
        assert "TransformLayout" not in post
        packed = RemoveWeightLayoutRewriteBlock()(sch.mod)["main"]
        # matmul's B[K, N] packed [N/16, K/2, 16, 2]
        assert [r.packed_shape for r in layout_rewrites(packed)] == [(4, 32, 16, 2)]
        verify_trace_roundtrip(sch, func)


@pytest.mark.skipif(not HOST.has_feature("avx512bf16"), reason="host lacks AVX512-BF16")
def test_bf16_matmul_candidates_match_numpy():
    import ml_dtypes
    rng = np.random.default_rng(9)
    # Small integers: exact in float32 whatever the order of the sums.
    a = rng.integers(-8, 9, (32, 64)).astype(ml_dtypes.bfloat16)
    b = rng.integers(-8, 9, (64, 64)).astype(ml_dtypes.bfloat16)
    want = a.astype(np.float32) @ b.astype(np.float32)
    family = "amx_bf16_mk_" if HOST.has_feature("amx-bf16") else "avx512_bf16_mk_"
    # every space (18 on an AMX host, its AMX ones last)
    _, cands = _candidates(bf16_matmul(), TARGET, n=32)
    families = {_family(c) for c in cands}
    assert any(f.startswith(family) for f in families)
    assert {"", "dot_16x2_bf16"} <= families and "dot_16x2_bf16_generic" not in families
    for sch in cands:          # every space: micro-kernels, the dot product, plain tiling
        got = _run_stripped(sch, [a, b, np.zeros((32, 64), "float32")])
        np.testing.assert_array_equal(got, want)


def test_target_without_the_feature_falls_back():
    func = int8_dense()
    _, cands = _candidates(func, "llvm -num-cores=2 -mcpu=skylake-avx512", n=12)
    assert {_family(c) for c in cands} == {"", "dot_16x4_u8i8i32_generic"}
    _, cands = _candidates(func, "llvm -num-cores=2 -mcpu=haswell")
    assert cands and all(not _tensorized(c) for c in cands)


@needs_avx512
def test_fp32_micro_kernel_candidates_match_numpy():
    func = fp32_matmul()
    spaces, cands = _candidates(func, TARGET)
    assert cands
    rng = np.random.default_rng(1)
    a = rng.integers(-4, 5, (32, 64)).astype("float32")
    b = rng.integers(-4, 5, (64, 64)).astype("float32")
    for sch in cands:
        used = _tensorized(sch)
        assert len(used) == 1 and used[0].startswith("avx512_fp32_mk_"), used
        got = _run_stripped(sch, [a, b, np.zeros((32, 64), "float32")])
        np.testing.assert_array_equal(got, a @ b)
        verify_trace_roundtrip(sch, func)


def test_rewrite_tensorize_rejects_a_block_that_does_not_match():
    func = int8_dense()
    sch = Schedule(func)
    block = sch.get_sblock("T_matmul_NT")
    sch.annotate(block, "meta_schedule.auto_tensorize", "dot_16x4_vnni")
    assert RewriteTensorize().apply(sch) is False


@pytest.mark.tuning
@needs_vnni
def test_tune_tir_int8_dense_picks_the_vnni_kernel_and_compile_tir_is_exact(tmp_path):
    func = int8_dense(16, 32, 32)
    # the tensorized spaces only: with the untensorized one, 4 trials may all miss them
    db = ms.tune_tir(func, TARGET, str(tmp_path), max_trials_global=4, num_trials_per_iter=4,
                     strategy="replay-trace", runner=fast_runner(), cost_model=xgb_1thread(),
                     seed=2, space=tensorized_only_space())
    recs = db.get_all_tuning_records()
    assert recs and all(r.is_valid() for r in recs), [r.run_secs for r in recs]
    sch = ms.compile_tir(db, func, TARGET)
    # K = 32 is below AMX's 64-deep int8 tile step: the VNNI register-blocked kernel.
    assert _tensorized(sch)[0].startswith("avx512_vnni_mk_")
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (16, 32)).astype("uint8")
    w = rng.integers(-128, 128, (32, 32)).astype("int8")
    rt = wb.build(sch.mod, target=TARGET)          # compile_tir's module packs on each call
    out = wb.nd.empty((16, 32), "int32")
    rt["main"](wb.nd.array(x), wb.nd.array(w), out)
    np.testing.assert_array_equal(out.numpy(), x.astype(np.int32) @ w.astype(np.int32).T)


@pytest.mark.tuning
@needs_vnni
def test_tune_relax_int8_model_uses_vnni_and_matches_numpy(tmp_path):
    from workbench import relax
    from workbench.meta_schedule.relax_integration import compile_relax, tune_relax
    from workbench.relax import op as R
    from workbench.relax.struct_info import TensorStructInfo
    rng = np.random.default_rng(5)
    w = rng.integers(-128, 128, (64, 32)).astype("int8")          # (in, out), a constant
    bb = relax.BlockBuilder()
    x = relax.Var("x", TensorStructInfo((16, 64), "uint8"))
    with bb.function("main", [x]):
        with bb.dataflow():
            acc = bb.emit(R.matmul(x, relax.const(w), out_dtype="int32"))
            out = bb.emit_output(R.requantize(
                acc, relax.const(np.float32(0.01)), relax.const(np.int32(0)),
                relax.const(np.float32(0.5)), relax.const(np.int32(2))))
        bb.emit_func_output(out)
    mod = bb.get()
    # The tensorized design spaces are what is checked: no default-schedule trial first, no
    # untensorized space.
    db = tune_relax(mod, None, TARGET, str(tmp_path), max_trials_global=4,
                    num_trials_per_iter=4, strategy="replay-trace", runner=fast_runner(),
                    cost_model=xgb_1thread(), seed=1, default_schedule_first=False,
                    space=tensorized_only_space())
    exe = compile_relax(db, mod, TARGET)
    from workbench.tir import PrimFunc
    kernels = [f for _, f in exe.lowered_mod.items() if isinstance(f, PrimFunc)]
    scripts = "".join(f.script() for f in kernels)
    # The register-blocked kernel (AMX tiles where the CPU has them), its weight packed once
    # at compile time: no packing block is left in the kernels.
    assert ("llvm.x86.tdpbusd" if HOST.has_feature("amx-int8")
            else "llvm.x86.avx512.vpdpbusd.512") in scripts
    assert "layout_rewrite_preproc" not in scripts
    vm = relax.VirtualMachine(exe, wb.cpu())
    xv = rng.integers(0, 256, (16, 64)).astype("uint8")
    got = vm["main"](wb.nd.array(xv)).numpy()
    accv = xv.astype(np.int64) @ w.astype(np.int64)
    want = np.clip(np.round(accv * (np.float64(np.float32(0.01)) / np.float32(0.5))) + 2,
                   -128, 127).astype("int8")
    np.testing.assert_array_equal(got, want)


def packed_int8_dense(m=32, n=64, k=64):
    """uint8 x int8 with the weight already in TVM's VNNI layout [N/16, K/4, 16, 4]."""
    x = te.placeholder((m, k), "uint8", name="X")
    w = te.placeholder((n // 16, k // 4, 16, 4), "int8", name="W")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((m, n), lambda i, j: te.sum(
        x[i, r].astype("int32") * w[j // 16, r // 4, j % 16, r % 4].astype("int32"), axis=r),
        name="C")
    return te.create_prim_func([x, w, c])


def test_packed_int8_weight_takes_the_vnni_micro_kernel_as_it_is():
    func = packed_int8_dense()
    spaces, cands = _candidates(func, VNNI, family="avx512_vnni_mk_")
    assert cands and _has_plain_space(spaces)
    # Nothing to pack: the weight parameter is read as it is.
    assert all("CacheRead" not in _before_postproc(c)[0] for c in cands)


@needs_vnni
def test_vnni_micro_kernel_candidates_are_exact():
    func = packed_int8_dense()
    _, cands = _candidates(func, TARGET)
    rng = np.random.default_rng(7)
    x = rng.integers(0, 256, (32, 64)).astype("uint8")
    w = rng.integers(-128, 128, (64, 64)).astype("int8")
    wp = w.reshape(4, 16, 16, 4).transpose(0, 2, 1, 3).copy()
    for sch in cands:
        got = _run_stripped(sch, [x, wp, np.zeros((32, 64), "int32")])
        np.testing.assert_array_equal(got, x.astype(np.int32) @ w.astype(np.int32).T)
        verify_trace_roundtrip(sch, func)


def int8_conv2d_nhwc(h=8, c=32, o=32):
    data = te.placeholder((1, h, h, c), "uint8", name="data")
    weight = te.placeholder((3, 3, c, o), "int8", name="weight")
    out = topi.nn.conv2d_nhwc(data, weight, 1, 1, 1, out_dtype="int32")
    return te.create_prim_func([data, weight, out])


def _conv_ref(x, w):
    h = x.shape[1]
    xp = np.pad(x.astype(np.int64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = np.zeros((1, h, h, w.shape[3]), np.int64)
    for dh in range(3):
        for dw in range(3):
            want += np.einsum("nhwc,co->nhwo", xp[:, dh:dh + h, dw:dw + h, :],
                              w[dh, dw].astype(np.int64))
    return want.astype(np.int32)


def test_int8_conv2d_hwio_weight_is_packed_for_the_vnni_micro_kernel():
    func = int8_conv2d_nhwc()
    _, cands = _candidates(func, VNNI, family="avx512_vnni_mk_")
    assert cands
    for sch in cands:
        packed = RemoveWeightLayoutRewriteBlock()(sch.mod)["main"]
        # HWIO [3, 3, 32, 32] -> [KH, KW, O/16, I/4, 16, 4]
        assert [r.packed_shape for r in layout_rewrites(packed)] == [(3, 3, 2, 8, 16, 4)]
        verify_trace_roundtrip(sch, func)
    if HOST.has_feature("avx512vnni"):
        rng = np.random.default_rng(4)
        x = rng.integers(0, 256, (1, 8, 8, 32)).astype("uint8")
        w = rng.integers(-128, 128, (3, 3, 32, 32)).astype("int8")
        for sch in cands:
            got = _run_stripped(sch, [x, w, np.zeros((1, 8, 8, 32), "int32")])
            np.testing.assert_array_equal(got, _conv_ref(x, w))


@pytest.mark.tuning
@needs_vnni
def test_tune_relax_int8_conv2d_model_packs_the_weight_and_is_exact(tmp_path):
    from workbench import relax
    from workbench.meta_schedule.relax_integration import compile_relax, tune_relax
    from workbench.relax import op as R
    from workbench.relax.struct_info import TensorStructInfo
    from workbench.tir import PrimFunc
    rng = np.random.default_rng(6)
    w = rng.integers(-128, 128, (3, 3, 32, 32)).astype("int8")      # HWIO, a constant
    bb = relax.BlockBuilder()
    x = relax.Var("x", TensorStructInfo((1, 8, 8, 32), "uint8"))
    with bb.function("main", [x]):
        with bb.dataflow():
            out = bb.emit_output(R.nn.conv2d(x, relax.const(w), padding=(1, 1),
                                             data_layout="NHWC", out_dtype="int32"))
        bb.emit_func_output(out)
    mod = bb.get()
    # The packed, tensorized design space is what is checked: no default-schedule trial first.
    db = tune_relax(mod, None, TARGET, str(tmp_path), max_trials_global=4,
                    num_trials_per_iter=4, strategy="replay-trace", runner=fast_runner(),
                    cost_model=xgb_1thread(), seed=1, default_schedule_first=False,
                    space=tensorized_only_space())
    exe = compile_relax(db, mod, TARGET)
    scripts = "".join(f.script() for _, f in exe.lowered_mod.items() if isinstance(f, PrimFunc))
    assert "llvm.x86.avx512.vpdpbusd.512" in scripts
    assert "layout_rewrite_preproc" not in scripts       # packed once at compile time
    vm = relax.VirtualMachine(exe, wb.cpu())
    xv = rng.integers(0, 256, (1, 8, 8, 32)).astype("uint8")
    np.testing.assert_array_equal(vm["main"](wb.nd.array(xv)).numpy(), _conv_ref(xv, w))


def test_amx_is_dropped_where_the_os_refuses_the_tile_state(monkeypatch):
    from workbench.meta_schedule.schedule_rule.multi_level_tiling_with_intrin import (
        intrin_supported,
    )
    from workbench.runtime import cpu_state
    spr = Target("llvm -mcpu=sapphirerapids")
    monkeypatch.setitem(cpu_state._granted, "amx", None)
    assert intrin_supported("amx_int8_mk_32x32x64", spr)
    monkeypatch.setitem(cpu_state._granted, "amx", "refused (test)")
    assert not cpu_state.available("amx")
    assert not intrin_supported("amx_int8_mk_32x32x64", spr)
    assert intrin_supported("avx512_vnni_mk_4x64x64", spr)
    _, cands = _candidates(int8_dense(), "llvm -num-cores=2 -mcpu=sapphirerapids", n=12)
    families = {_family(c) for c in cands}
    assert any(f.startswith("avx512_vnni_mk_") for f in families)
    assert not any(f.startswith("amx") for f in families)
