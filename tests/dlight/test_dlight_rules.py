"""The default-schedule rules on single kernels: te kernels through ``workbench.build(...,
default_schedule=True)``, traces that replay, rules chosen by structure (not op names),
tuned kernels left alone, and a rule that raises falling through to the next."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import dlight, options, te, topi
from workbench.dlight import ApplyDefaultSchedule, ScheduleRule
from workbench.dlight.cpu import Fallback, Injective, Matmul, RowReduction, SpatialReduction
from workbench.ir.module import IRModule
from workbench.target import Target
from workbench.tir import op
from workbench.tir.schedule import Schedule
from workbench.tir.schedule.testing import verify_trace_roundtrip
from workbench.tir.stmt import For, ForKind

TARGET = Target("llvm -num-cores=4")  # parallel loops whatever this machine has
RNG = np.random.default_rng(0)


def rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _run(func, *arrays, out_shapes, default_schedule=True):
    mod = wb.build(func, default_schedule=default_schedule)
    outs = [wb.nd.empty(s, "float32") for s in out_shapes]
    mod["main"](*[wb.nd.array(a) for a in arrays], *outs)
    return [o.numpy() for o in outs]


def _loop_kinds(func):
    kinds = []

    def walk(stmt):
        if isinstance(stmt, For):
            kinds.append(stmt.kind)
        for child in getattr(stmt, "seq", ()) or ():
            walk(child)
        for attr in ("body", "block"):
            sub = getattr(stmt, attr, None)
            if sub is not None and not isinstance(sub, (list, tuple)):
                walk(sub)
    walk(func.body)
    return kinds


# ---- single kernels through workbench.build --------------------------------------------------

def matmul_te(m=70, k=48, n=96):
    a, b = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    return te.create_prim_func([a, b, topi.matmul(a, b)])


def dense_te(m=33, k=64, n=80):
    x, w = te.placeholder((m, k), name="X"), te.placeholder((n, k), name="W")
    bias = te.placeholder((n,), name="bias")
    y = topi.nn.dense(x, w, bias)
    return te.create_prim_func([x, w, bias, topi.nn.relu(y)])


def conv_te(layout="NCHW", stride=1, groups=1):
    if layout == "NCHW":
        x, w = te.placeholder((2, 8, 11, 11), name="X"), \
            te.placeholder((16, 8 // groups, 3, 3), name="W")
    else:
        x, w = te.placeholder((2, 11, 11, 8), name="X"), \
            te.placeholder((3, 3, 8 // groups, 16), name="W")
    y = topi.nn.conv2d(x, w, stride, 1, 1, data_layout=layout, groups=groups)
    return te.create_prim_func([x, w, topi.nn.relu(y)])


def softmax_te(rows=12, cols=64):
    x = te.placeholder((rows, cols), name="X")
    return te.create_prim_func([x, topi.nn.softmax(x)])


def np_conv_nchw(x, w, stride, pad, groups=1):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), np.float32)
    og = o // groups
    for f in range(o):
        g = f // og
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, i:i + stride * oh:stride, j:j + stride * ow:stride]
                out[:, f] += np.einsum("nchw,c->nhw", patch, w[f, :, i, j])
    return out


def test_build_matmul_with_default_schedule():
    a, b = rand(70, 48), rand(48, 96)
    (got,) = _run(matmul_te(), a, b, out_shapes=[(70, 96)])
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)
    sch_mod = dlight.default_schedule(matmul_te())
    func = sch_mod["main"]
    assert func.attrs["tir.is_scheduled"]
    kinds = _loop_kinds(func)
    assert ForKind.PARALLEL in kinds and ForKind.VECTORIZED in kinds and ForKind.UNROLLED in kinds


def test_build_dense_packs_weight_in_kernel():
    x, w, bias = rand(33, 64), rand(80, 64), rand(80)
    (got,) = _run(dense_te(), x, w, bias, out_shapes=[(33, 80)])
    np.testing.assert_allclose(got, np.maximum(x @ w.T + bias, 0), rtol=1e-4, atol=1e-4)
    script = dlight.default_schedule(dense_te())["main"].script()
    assert "meta_schedule.layout_rewrite_preproc" in script   # W[j, k] read as panels


@pytest.mark.parametrize("stride,groups", [(1, 1), (2, 1), (1, 2), (2, 8)])
def test_build_conv2d_nchw(stride, groups):
    x, w = rand(2, 8, 11, 11), rand(16, 8 // groups, 3, 3)
    y = np.maximum(np_conv_nchw(x, w, stride, 1, groups), 0)
    (got,) = _run(conv_te("NCHW", stride, groups), x, w, out_shapes=[y.shape])
    np.testing.assert_allclose(got, y, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride", [1, 2])
def test_build_conv2d_nhwc(stride):
    x, w = rand(2, 11, 11, 8), rand(3, 3, 8, 16)
    y = np.maximum(np_conv_nchw(x.transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1), stride, 1),
                   0).transpose(0, 2, 3, 1)
    (got,) = _run(conv_te("NHWC", stride), x, w, out_shapes=[y.shape])
    np.testing.assert_allclose(got, y, rtol=1e-4, atol=1e-4)


def test_build_softmax():
    x = rand(12, 64)
    (got,) = _run(softmax_te(), x, out_shapes=[(12, 64)])
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_without_flag_build_keeps_the_loop_nest():
    func = matmul_te(8, 8, 8)
    lowered_plain = wb.lower(func)["main"]
    assert ForKind.PARALLEL not in _loop_kinds(lowered_plain)
    a, b = rand(8, 8), rand(8, 8)
    (got,) = _run(func, a, b, out_shapes=[(8, 8)], default_schedule=False)
    np.testing.assert_allclose(got, a @ b, rtol=1e-5, atol=1e-5)


# ---- rules by structure, traces ------------------------------------------------------------

def einsum_te():
    """A batched contraction written directly in te with made-up names: no topi op, yet
    an outer product by structure."""
    a = te.placeholder((4, 24, 32), name="lhs")
    b = te.placeholder((4, 32, 40), name="rhs")
    k = te.reduce_axis((0, 32), name="z")
    c = te.compute((4, 24, 40), lambda q, r, s: te.sum(a[q, r, k] * b[q, k, s], axis=k),
                   name="mystery")
    d = te.compute(c.shape, lambda *i: op.tanh(c[i]) * 0.5, name="after")
    return te.create_prim_func([a, b, d])


def column_sum_te():
    x = te.placeholder((50, 64), name="x")
    k = te.reduce_axis((0, 50), name="k")
    return te.create_prim_func([x, te.compute((64,), lambda j: te.sum(x[k, j] * x[k, j],
                                                                     axis=k), name="colsq")])


def row_norm_te():
    """``x / sqrt(sum(x^2) per row)``: a row reduction and its consumer."""
    x = te.placeholder((16, 128), name="x")
    k = te.reduce_axis((0, 128), name="k")
    ss = te.compute((16,), lambda i: te.sum(x[i, k] * x[i, k], axis=k), name="ss")
    return te.create_prim_func([x, te.compute((16, 128), lambda i, j: x[i, j] / op.sqrt(ss[i]),
                                              name="normed")])


def transpose_add_te():
    x = te.placeholder((64, 48), name="x")
    y = te.placeholder((48, 64), name="y")
    return te.create_prim_func([x, y, te.compute((48, 64), lambda i, j: x[j, i] + y[i, j],
                                                 name="tadd")])


@pytest.mark.parametrize("make,rule,check", [
    (einsum_te, Matmul, lambda a, b: np.tanh(a @ b) * 0.5),
    (column_sum_te, SpatialReduction, lambda x: (x * x).sum(0)),
    (row_norm_te, RowReduction, lambda x: x / np.sqrt((x * x).sum(-1, keepdims=True))),
    (transpose_add_te, Injective, lambda x, y: x.T + y),
])
def test_rule_chosen_by_structure_and_trace_replays(make, rule, check):
    func = make()
    chosen = ApplyDefaultSchedule(*dlight.cpu.default_rules())
    chosen(func)
    assert chosen.applied == {"main": rule.name} and chosen.failures == {}
    sch = rule().apply(func, TARGET, False)
    assert isinstance(sch, Schedule)
    verify_trace_roundtrip(sch, IRModule({"main": func}))
    inputs = [rand(*[int(d.value) for d in func.buffer_map[p].shape]) for p in func.params[:-1]]
    out = func.buffer_map[func.params[-1]]
    (got,) = _run(func, *inputs, out_shapes=[tuple(int(d.value) for d in out.shape)])
    np.testing.assert_allclose(got, check(*inputs), rtol=1e-4, atol=1e-4)


def test_rules_do_not_match_other_families():
    assert Matmul().apply(softmax_te(), TARGET, False) is None
    assert RowReduction().apply(matmul_te(), TARGET, False) is None
    assert Injective().apply(matmul_te(), TARGET, False) is None
    assert SpatialReduction().apply(softmax_te(), TARGET, False) is None


def test_fallback_only_parallelizes_and_vectorizes():
    func = softmax_te(256, 96)
    sch = Fallback().apply(func, TARGET, False)
    instructions = {inst.kind.name for inst in sch.trace.insts}
    assert instructions <= {"GetSBlock", "GetChildBlocks", "GetLoops", "Split", "Fuse",
                            "Parallel", "Vectorize"}, instructions
    assert "Parallel" in instructions
    verify_trace_roundtrip(sch, IRModule({"main": func}))
    x = rand(256, 96)
    mod = wb.build(sch.mod)
    out = wb.nd.empty((256, 96), "float32")
    mod["main"](wb.nd.array(x), out)
    e = np.exp(x - x.max(-1, keepdims=True))
    np.testing.assert_allclose(out.numpy(), e / e.sum(-1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_scheduled_functions_are_left_alone():
    func = matmul_te(16, 16, 16).with_attr("tir.is_scheduled", True)
    p = dlight.DefaultCPUSchedule()
    out = p(IRModule({"main": func}))
    assert out["main"] is func and p.skipped == ["main"] and p.applied == {}


def test_a_rule_that_raises_falls_through_to_the_next():
    @ScheduleRule.from_callable("broken")
    def broken(func, target, tunable):
        raise RuntimeError("boom")

    p = ApplyDefaultSchedule(broken, Matmul())
    out = p(matmul_te(16, 16, 16))
    assert p.failures == {("main", "broken"): "RuntimeError: boom"}
    assert p.applied == {"main": "Matmul"} and out["main"].attrs["tir.is_scheduled"]


def test_apply_default_schedule_checks_its_arguments():
    with pytest.raises(TypeError, match="ScheduleRule"):
        ApplyDefaultSchedule(lambda f, t, b: None)
    with pytest.raises(TypeError, match="an IRModule or a PrimFunc"):
        dlight.default_schedule("not a module")


def test_narrower_vectors_for_an_avx2_target():
    """Tiles follow the target's vector width: an AVX2 target gets 8-lane tiles, and the
    kernels still compute the right thing."""
    target = Target("llvm -mattr=+avx2,+fma -num-cores=2")
    assert dlight.CPUInfo.of(target).lanes("float32") == 8
    func = conv_te("NCHW", 2, 1)
    mod = dlight.default_schedule(func, target)
    assert "T.vectorized(16)" in mod["main"].script()   # two 8-lane registers per row
    x, w = rand(2, 8, 11, 11), rand(16, 8, 3, 3)
    y = np.maximum(np_conv_nchw(x, w, 2, 1), 0)
    out = wb.nd.empty(y.shape, "float32")
    wb.build(mod, target)["main"](wb.nd.array(x), wb.nd.array(w), out)
    np.testing.assert_allclose(out.numpy(), y, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mattr, budget", [("+avx2,+fma", 12), ("+avx512f", 16)])
def test_register_tile_fits_the_vector_registers(mattr, budget):
    """AVX2 has 16 vector registers, AVX-512 32: a register tile keeps at most 12 / 16
    accumulators (16 on AVX2 spilled: ResNet-18 1.3x slower on a 2-core EPYC)."""
    from workbench.dlight.cpu.anchor import match_anchor
    from workbench.dlight.cpu.common import inline_cheap_stages
    from workbench.dlight.cpu.matmul import plan_outer_product
    cpu = dlight.CPUInfo.of(Target(f"llvm -mattr={mattr} -num-cores=2"))
    assert cpu.accumulators == budget
    used = []
    for func in (matmul_te(64, 64, 64), matmul_te(48, 48, 96), conv_te("NHWC", 1, 1)):
        sch = Schedule(func)
        inline_cheap_stages(sch)
        plan = plan_outer_product(match_anchor(sch).anchor, cpu)
        used.append(plan.U * -(-plan.V // cpu.lanes("float32")))
    assert max(used) <= budget and max(used) > budget // 2, used


@pytest.mark.parametrize("mattr, block, tile", [("+avx2,+fma", 8, 8), ("+avx512f", 16, 24)])
def test_blocked_conv_tiles_output_channel_blocks_by_pixels(mattr, block, tile):
    """A convolution on NCHW{B}c (conv2d_NCHWc) gets MLAS's register tile: W output-channel
    blocks x U pixels of one row (each broadcast input value feeds W vectors, each weight
    vector U pixels), W * U <= 24 accumulators with AVX-512 and <= 8 with AVX2 (12 spilled);
    results against numpy on each target this host can run (both are built everywhere)."""
    from workbench.dlight.cpu.anchor import match_anchor
    from workbench.dlight.cpu.common import inline_cheap_stages
    from workbench.dlight.cpu.matmul import plan_outer_product
    from workbench.relax.op.layout import to_layout_numpy
    from workbench.topi.nn.conv2d_nchwc import conv2d_nchwc
    target = Target(f"llvm -mattr={mattr} -num-cores=2")
    cpu = dlight.CPUInfo.of(target)
    x = te.placeholder((1, 32 // block, 14, 14, block), name="x")
    w = te.placeholder((64 // block, 32 // block, 3, 3, block, block), name="w")
    y = conv2d_nchwc(x, w, 1, 1, 1, 1, f"NCHW{block}c", f"OIHW{block}i{block}o",
                     f"NCHW{block}c")
    func = te.create_prim_func([x, w, y])
    sch = Schedule(func)
    inline_cheap_stages(sch)
    f = match_anchor(sch).anchor
    plan = plan_outer_product(f, cpu)
    names = [v.name for v in f.iters]
    assert (names[plan.v], names[plan.u], names[plan.w]) == ("v_cb", "v_xx", "v_cc")
    assert plan.V == block and plan.W > 1 and 1 < plan.W * plan.U <= tile
    mod = dlight.default_schedule(func, target)
    rt = wb.build(mod, target)
    if not Target("llvm").has_feature(mattr.split(",")[0][1:]):
        pytest.skip(f"this host cannot run {mattr} code (the plan was checked, the code built)")
    xs, ws = rand(1, 32, 14, 14), rand(64, 32, 3, 3)
    out = wb.nd.empty((1, 64 // block, 14, 14, block), "float32")
    rt["main"](wb.nd.array(to_layout_numpy(xs, "NCHW", f"NCHW{block}c")),
               wb.nd.array(to_layout_numpy(ws, "OIHW", f"OIHW{block}i{block}o")), out)
    want = np_conv_nchw(xs, ws, 1, 1)
    np.testing.assert_allclose(to_layout_numpy(out.numpy(), f"NCHW{block}c", "NCHW"), want,
                               rtol=1e-4, atol=1e-4)


def _single(make_outputs, inputs):
    """A te kernel of ``make_outputs(*placeholders)`` over the numpy ``inputs``, built with
    its default schedule; returns the outputs and the rule that scheduled it."""
    phs = [te.placeholder(a.shape, dtype=str(a.dtype), name=f"in{i}")
           for i, a in enumerate(inputs)]
    outs = make_outputs(*phs)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    func = te.create_prim_func([*phs, *outs])
    p = dlight.DefaultCPUSchedule(TARGET)
    mod = p(func)
    assert p.failures == {}
    nds = [wb.nd.empty(tuple(int(d.value) for d in o.shape), o.dtype) for o in outs]
    wb.build(mod, TARGET)["main"](*[wb.nd.array(a) for a in inputs], *nds)
    return [n.numpy() for n in nds], p.applied["main"]


def _np_pool(x, k, s, p, kind):
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf if kind == "max"
                else 0)
    oh, ow = (xp.shape[2] - k) // s + 1, (xp.shape[3] - k) // s + 1
    win = np.stack([xp[:, :, i:i + s * oh:s, j:j + s * ow:s] for i in range(k) for j in range(k)])
    return win.max(0) if kind == "max" else win.mean(0)


@pytest.mark.parametrize("name", ["max_pool", "avg_pool", "global_pool", "layer_norm",
                                  "sum_keepdims", "mean_axis0", "argmax", "concat", "take",
                                  "transpose_3d"])
def test_single_kernel_families_match_numpy(name):
    x4 = rand(2, 16, 13, 13)
    x2 = rand(24, 96)
    cases = {
        "max_pool": (lambda x: topi.nn.pool2d(x, (3, 3), (2, 2), (1, 1), (1, 1), "max"), [x4],
                     lambda x: _np_pool(x, 3, 2, 1, "max"), "SpatialReduction"),
        "avg_pool": (lambda x: topi.nn.pool2d(x, (2, 2), (2, 2), (1, 1), (0, 0), "avg"), [x4],
                     lambda x: _np_pool(x, 2, 2, 0, "avg"), "SpatialReduction"),
        "global_pool": (lambda x: topi.nn.global_pool(x, "avg"), [x4],
                        lambda x: x.mean((2, 3), keepdims=True), "RowReduction"),
        "layer_norm": (lambda x, g, b: topi.nn.layer_norm(x, g, b), [x2, rand(96), rand(96)],
                       lambda x, g, b: (x - x.mean(-1, keepdims=True)) /
                       np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b, "RowReduction"),
        "sum_keepdims": (lambda x: topi.sum(x, axis=-1, keepdims=True), [x2],
                         lambda x: x.sum(-1, keepdims=True), "RowReduction"),
        "mean_axis0": (lambda x: topi.mean(x, axis=0), [x2], lambda x: x.mean(0),
                       "SpatialReduction"),
        "argmax": (lambda x: topi.argmax(x, axis=1), [x2], lambda x: x.argmax(1),
                   "RowReduction"),
        "concat": (lambda a, b: topi.concatenate([a, b], axis=1), [x2, rand(24, 32)],
                   lambda a, b: np.concatenate([a, b], 1), "Injective"),
        "take": (lambda a, i: topi.take(a, i, axis=0), [x2, np.array([3, 0, 23, 7], "int64")],
                 lambda a, i: a[i], "Injective"),
        "transpose_3d": (lambda x: topi.transpose(x, (2, 0, 1)), [rand(16, 8, 32)],
                         lambda x: x.transpose(2, 0, 1), "Injective"),
    }
    make, inputs, reference, rule = cases[name]
    (got,), applied = _single(make, inputs)
    assert applied == rule
    np.testing.assert_allclose(got, reference(*inputs), rtol=1e-4, atol=1e-4)


def _depthwise(c, h, k, s, layout="NCHW"):
    if layout == "NCHW":
        x = te.placeholder((1, c, h, h), "float32", name="x")
        w = te.placeholder((c, 1, k, k), "float32", name="w")
        return te.create_prim_func([x, w, topi.nn.depthwise_conv2d_nchw(x, w, s, k // 2, 1)])
    x = te.placeholder((1, h, h, c), "float32", name="x")
    w = te.placeholder((k, k, c, 1), "float32", name="w")
    return te.create_prim_func([x, w, topi.nn.depthwise_conv2d_nhwc(x, w, s, k // 2, 1)])


def _loop_nests(func):
    """The block names under each loop nest at the root of ``func``'s main, in order, and
    whether that nest's outermost loop is parallel."""
    from workbench.tir.analysis import blocks_under, child_stmts

    out = []

    def walk(stmt):
        if isinstance(stmt, For):
            names = {b.name_hint for b in blocks_under(stmt)}
            out.append((names, stmt.kind == ForKind.PARALLEL))
            return
        for child in child_stmts(stmt):
            walk(child)
    walk(func["main"].body)
    return out


@pytest.mark.parametrize("c,h,k,s", [(40, 17, 5, 2), (24, 15, 3, 1), (96, 28, 3, 2)])
def test_depthwise_nchw_pads_one_plane_at_a_time(c, h, k, s):
    """NCHW depthwise conv: the padding is computed inside the parallel loop, one (batch,
    channel) plane per iteration (no pass of its own over the whole input), and the result
    matches numpy at odd sizes, 5x5 windows and strides."""
    func = _depthwise(c, h, k, s)
    sch = dlight.default_schedule(func, TARGET)
    nests = _loop_nests(sch)
    assert nests[0][1] and {"PaddedInput", "DepthwiseConv2d_update"} <= nests[0][0], nests
    x, w = rand(1, c, h, h), rand(c, 1, k, k)
    ho = (h + 2 * (k // 2) - k) // s + 1
    out = wb.nd.empty((1, c, ho, ho), "float32")
    wb.build(sch, target=TARGET)["main"](wb.nd.array(x), wb.nd.array(w), out)
    p = k // 2
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
    want = sum(xp[:, :, i:i + s * ho:s, j:j + s * ho:s] * w[None, :, 0, i, j, None, None]
               for i in range(k) for j in range(k))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


def test_depthwise_pads_separately_without_enough_planes_or_in_nhwc():
    """Two planes for four threads, or the channel last (NHWC, 48 channels: wider than one
    vector, so the padding is not read in the tile): the padding keeps its own parallel
    pass."""
    for func in (_depthwise(2, 112, 3, 1), _depthwise(48, 40, 3, 1, "NHWC")):
        sch = dlight.default_schedule(func, TARGET)
        nests = _loop_nests(sch)
        assert nests[0][0] == {"PaddedInput"}, nests


@pytest.mark.parametrize("target", ["llvm -mcpu=sapphirerapids -num-cores=2",
                                    "llvm -mcpu=haswell -num-cores=2"])
@pytest.mark.parametrize("c,h,s,k", [(32, 19, 1, 3), (96, 23, 2, 3), (48, 9, 1, 5),
                                     (64, 11, 2, 5), (16, 1, 1, 3)])
def test_blocked_depthwise_reads_the_padding_in_its_tile(target, c, h, s, k):
    """NCHW{B}c depthwise conv: the padding is inlined into the convolution (no padded copy
    is written; each tap's guard is a scalar per channel-block vector, and only the taken side
    loads: MobileNetV2's 96x112^2 stride-2 layer 116 -> 41 us, EfficientNet-B0 4% faster on a
    2-core Zen 4) -- with AVX-512's 32 registers for every stride, with AVX2's 16 only for
    strided windows (stride 1 keeps the padded band). Odd sizes, borders and a 1x1 image (all
    taps but the centre in the padding) equal numpy wherever the host runs the code."""
    from workbench.dlight.base import CPUInfo
    from workbench.relax.op.layout import to_layout_numpy
    from workbench.topi.nn.conv2d_nchwc import conv2d_nchwc
    cpu = CPUInfo.of(wb.Target(target))
    block = cpu.lanes("float32")
    x = te.placeholder((1, c // block, h, h, block), name="x")
    w = te.placeholder((c // block, 1, k, k, block), name="w")
    y = conv2d_nchwc(x, w, s, k // 2, 1, c, f"NCHW{block}c", f"OIHW{block}o", f"NCHW{block}c")
    sch = dlight.default_schedule(te.create_prim_func([x, w, y]), wb.Target(target))
    inlined = cpu.accumulators >= 16 or s > 1
    nests = _loop_nests(sch)
    assert inlined == all(not any("pad" in b.lower() for b in names) for names, _ in nests), \
        sch.script()
    assert "T.vectorized" in sch.script()
    host = wb.Target("llvm")
    if not host.has_feature("avx512f" if block == 16 else "avx2"):
        return
    xs, ws = rand(1, c, h, h), rand(c, 1, k, k)
    ho = (h + 2 * (k // 2) - k) // s + 1
    out = wb.nd.empty((1, c // block, ho, ho, block), "float32")
    wb.build(sch, target)["main"](wb.nd.array(to_layout_numpy(xs, "NCHW", f"NCHW{block}c")),
                                  wb.nd.array(to_layout_numpy(ws, "OIHW", f"OIHW{block}o")), out)
    p = k // 2
    xp = np.pad(xs.astype(np.float64), ((0, 0), (0, 0), (p, p), (p, p)))
    want = sum(xp[:, :, i:i + s * ho:s, j:j + s * ho:s] * ws[None, :, 0, i, j, None, None]
               for i in range(k) for j in range(k))
    np.testing.assert_allclose(to_layout_numpy(out.numpy(), f"NCHW{block}c", "NCHW"), want,
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", ["llvm -mcpu=sapphirerapids -num-cores=2",
                                    "llvm -mcpu=haswell -num-cores=2"])
@pytest.mark.parametrize("ci,co,h,s,k", [(32, 48, 15, 2, 3), (16, 32, 13, 2, 5),
                                         (16, 16, 3, 2, 3), (32, 32, 9, 1, 3)])
def test_blocked_conv_reads_strided_padding_in_its_tile(target, ci, co, h, s, k):
    """NCHW{B}c direct convolution (Matmul): with AVX-512's 32 registers a strided window
    reads its padding in the tile (no padded copy: ResNet's 3x3 stride-2 convolutions 5-16%
    faster on Sapphire Rapids); a stride-1 window, and every window with AVX2's 16
    registers, keeps the padded copy. Odd sizes and borders (a 3x3 image: every output's
    window crosses the padding) equal numpy wherever the host runs the code."""
    from workbench.dlight.base import CPUInfo
    from workbench.relax.op.layout import to_layout_numpy
    from workbench.topi.nn.conv2d_nchwc import conv2d_nchwc
    cpu = CPUInfo.of(wb.Target(target))
    b = cpu.lanes("float32")
    x = te.placeholder((1, ci // b, h, h, b), name="x")
    w = te.placeholder((co // b, ci // b, k, k, b, b), name="w")
    y = conv2d_nchwc(x, w, s, k // 2, 1, 1, f"NCHW{b}c", f"OIHW{b}i{b}o", f"NCHW{b}c")
    sch = dlight.default_schedule(te.create_prim_func([x, w, y]), wb.Target(target))
    nests = _loop_nests(sch)
    assert any("conv2d_NCHWc_update" in names for names, _ in nests), nests
    inlined = cpu.accumulators >= 16 and s > 1
    assert inlined == all(not any("pad" in n.lower() for n in names) for names, _ in nests), \
        sch.script()
    if not wb.Target("llvm").has_feature("avx512f" if b == 16 else "avx2"):
        return
    xs, ws = rand(1, ci, h, h), rand(co, ci, k, k)
    ho = (h + 2 * (k // 2) - k) // s + 1
    out = wb.nd.empty((1, co // b, ho, ho, b), "float32")
    wb.build(sch, target)["main"](wb.nd.array(to_layout_numpy(xs, "NCHW", f"NCHW{b}c")),
                                  wb.nd.array(to_layout_numpy(ws, "OIHW", f"OIHW{b}i{b}o")),
                                  out)
    want = np_conv_nchw(xs, ws, s, k // 2)
    np.testing.assert_allclose(to_layout_numpy(out.numpy(), f"NCHW{b}c", "NCHW"), want,
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("c,h,s", [(48, 13, 1), (40, 17, 2)])
def test_depthwise_nhwc_with_a_channel_multiplier_dim_is_tiled(c, h, s):
    """topi's NHWC depthwise weight is ``(k, k, C, 1)``: the trailing unit dimension does not
    hide that the weight is contiguous in the channel, so SpatialReduction vectorizes and
    parallelizes it (it ran as one serial loop: 536 -> 20 us at 48x40^2 on a Zen 4)."""
    func = _depthwise(c, h, 3, s, "NHWC")
    sch = dlight.default_schedule(func, TARGET)
    nests = _loop_nests(sch)
    conv = next(n for n in nests if "DepthwiseConv2d_update" in n[0])
    assert conv[1], nests                                    # parallel
    assert "T.vectorized" in sch.script()
    x, w = rand(1, h, h, c), rand(3, 3, c, 1)
    ho = (h + 2 - 3) // s + 1
    out = wb.nd.empty((1, ho, ho, c), "float32")
    wb.build(sch, target=TARGET)["main"](wb.nd.array(x), wb.nd.array(w), out)
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = sum(xp[:, i:i + s * ho:s, j:j + s * ho:s, :] * w[i, j, :, 0]
               for i in range(3) for j in range(3))
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target", ["llvm -mcpu=sapphirerapids -num-cores=4",
                                    "llvm -mcpu=haswell -num-cores=4"])
@pytest.mark.parametrize("stride", [2, 1])
def test_blocked_max_pool_splits_rows_and_pads_in_the_tile_or_per_band(target, stride):
    """NCHW16c / NCHW8c max pooling (ResNet's stem pool): the threads split the output rows
    (as the convolution before did: each core pools the rows it wrote; with
    parallel_rows_first off, whole planes). Where the padding is read in the tile (AVX-512;
    AVX2 for strided windows: 64x112^2 75 -> 32 us on a Zen 4) there is no padded buffer;
    elsewhere (AVX2, stride 1) it is computed inside the parallel loop, a band of rows of one
    channel block at a time, a whole channel block per pixel in one vector copy (it was 16
    scalar selects a pixel: 150 -> 128 us). The result matches numpy."""
    from workbench.dlight.base import CPUInfo
    cpu = CPUInfo.of(wb.Target(target))
    block = cpu.lanes("float32")                                  # the layout pass's block
    x = te.placeholder((1, 8, 23, 23, block), "float32", name="x")
    y = topi.nn.pool2d(x, (3, 3), (stride, stride), (1, 1), (1, 1, 1, 1), "max",
                       layout="NCHWc")
    sch = dlight.default_schedule(te.create_prim_func([x, y]), wb.Target(target))
    nests = _loop_nests(sch)
    assert nests[0][1] and len(nests) == 1, nests           # one parallel nest
    (par,) = _parallel_loop_names(sch)
    with options.override(parallel_rows_first=False):
        planes = dlight.default_schedule(te.create_prim_func([x, y]), wb.Target(target))
    assert _parallel_loop_names(planes)[0].startswith("i0_i1"), planes.script()
    pads = [b for b in sch["main"].body.block.alloc_buffers if "pad" in b.name]
    if cpu.accumulators >= 16 or stride > 1:
        assert not pads and par.startswith("i0_i2_i1"), sch.script()   # rows, then planes
    else:
        assert par.startswith("i0_i2_0_i1"), sch.script()    # bands of rows, then planes
        script = sch.script()
        # the plane's copy ends in a vectorized loop over the channel block
        at = script.index(f'with T.block("{pads[0].name}")')
        assert f"T.vectorized({block})" in script[at - 200:at], script[at - 200:at]
    if not wb.Target("llvm").has_feature("avx512f" if block == 16 else "avx2"):
        return
    xs = rand(1, 8, 23, 23, block)
    ho = (23 + 2 - 3) // stride + 1
    out = wb.nd.empty((1, 8, ho, ho, block), "float32")
    wb.build(sch, target=target)["main"](wb.nd.array(xs), out)
    xp = np.pad(xs, ((0, 0), (0, 0), (1, 1), (1, 1), (0, 0)), constant_values=-np.inf)
    want = np.max([xp[:, :, i:i + stride * ho:stride, j:j + stride * ho:stride]
                   for i in range(3) for j in range(3)], axis=0)
    np.testing.assert_array_equal(out.numpy(), want)


def _parallel_loop_names(mod) -> list[str]:
    """The names of the loops fused into each parallel loop of ``mod``'s main, outermost
    first (``nn_yy_0_cc_fused`` -> ``['nn', 'yy_0', 'cc']``)."""
    import re
    return [re.sub(r"_fused$", "", m).split("_fused_")[0]
            for m in re.findall(r"for (\w+) in T\.parallel", mod.script())]


@pytest.mark.parametrize("target", ["llvm -num-cores=2", "llvm -mcpu=haswell -num-cores=2"])
@pytest.mark.parametrize("c,h,s", [(64, 14, 1), (320, 7, 1), (128, 15, 2), (96, 28, 1)])
def test_blocked_depthwise_splits_threads_by_bands_of_rows(target, c, h, s):
    """NCHW{B}c depthwise conv: the threads split the output rows (each core reads the rows
    the layer before wrote on it, MobileNetV2 on 2 cores). Where the padding is not read in
    the tile (AVX2, stride 1) it is computed per band of rows of one channel block inside the
    parallel loop (a few KB, not the whole plane), odd heights leave a shorter last band;
    results equal numpy. The option off keeps the planes-only split."""
    from workbench.dlight.base import CPUInfo
    from workbench.relax.op.layout import to_layout_numpy
    from workbench.topi.nn.conv2d_nchwc import conv2d_nchwc
    block = CPUInfo.of(wb.Target(target)).lanes("float32")
    x = te.placeholder((1, c // block, h, h, block), name="x")
    w = te.placeholder((c // block, 1, 3, 3, block), name="w")
    y = conv2d_nchwc(x, w, s, 1, 1, c, f"NCHW{block}c", f"OIHW{block}o", f"NCHW{block}c")
    func = te.create_prim_func([x, w, y])
    mod = dlight.default_schedule(func, wb.Target(target))
    (par,) = _parallel_loop_names(mod)      # one nest: the padding is inside
    in_tile = CPUInfo.of(wb.Target(target)).accumulators >= 16 or s > 1
    assert par.startswith("nn_yy_cc" if in_tile else "nn_yy_0_cc"), mod.script()
    with options.override(parallel_rows_first=False):
        plain = dlight.default_schedule(func, wb.Target(target))
    # channel blocks first (the padded planes alone, or all the loops when nothing is padded)
    assert _parallel_loop_names(plain)[-1].startswith(("nn_cc", "cc_nn")), plain.script()
    if "haswell" not in target or CPUInfo.of(wb.Target("llvm")).lanes("float32") >= 8:
        xs, ws = rand(1, c, h, h), rand(c, 1, 3, 3)
        ho = (h + 2 - 3) // s + 1
        out = wb.nd.empty((1, c // block, ho, ho, block), "float32")
        wb.build(mod, target)["main"](wb.nd.array(to_layout_numpy(xs, "NCHW", f"NCHW{block}c")),
                                      wb.nd.array(to_layout_numpy(ws, "OIHW",
                                                                  f"OIHW{block}o")), out)
        xp = np.pad(xs.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
        want = sum(xp[:, :, i:i + s * ho:s, j:j + s * ho:s] * ws[None, :, 0, i, j, None, None]
                   for i in range(3) for j in range(3))
        np.testing.assert_allclose(to_layout_numpy(out.numpy(), f"NCHW{block}c", "NCHW"),
                                   want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cin,cout,h,expect", [(64, 384, 14, "rows"), (384, 64, 14, "rows"),
                                               (96, 576, 14, "rows"),
                                               (160, 960, 7, "channels"),
                                               (512, 512, 7, "channels")])
def test_blocked_conv_threads_take_rows_when_weights_are_small(cin, cout, h, expect):
    """A blocked 1x1 convolution with small weights (MobileNetV2's expand and project up to
    256 KB) splits its threads by output rows, like the depthwise conv between them; one with
    larger weights (614 KB, ResNet's 1 MB) keeps the output-channel blocks first, so each
    thread reads only its half of them. Results equal numpy either way."""
    from workbench.relax.op.layout import to_layout_numpy
    from workbench.topi.nn.conv2d_nchwc import conv2d_nchwc
    block = 16
    target = wb.Target("llvm -mcpu=skylake-avx512 -num-cores=2")
    x = te.placeholder((1, cin // block, h, h, block), name="x")
    w = te.placeholder((cout // block, cin // block, 1, 1, block, block), name="w")
    y = conv2d_nchwc(x, w, 1, 0, 1, 1, f"NCHW{block}c", f"OIHW{block}i{block}o",
                     f"NCHW{block}c")
    func = te.create_prim_func([x, w, y])
    mod = dlight.default_schedule(func, target)
    (par,) = _parallel_loop_names(mod)
    assert par.startswith("nn_yy" if expect == "rows" else "cc"), par
    from workbench.dlight.base import CPUInfo
    if CPUInfo.of(wb.Target("llvm")).lanes("float32") >= 16:
        xs, ws = rand(1, cin, h, h), rand(cout, cin, 1, 1)
        out = wb.nd.empty((1, cout // block, h, h, block), "float32")
        wb.build(mod, target)["main"](
            wb.nd.array(to_layout_numpy(xs, "NCHW", f"NCHW{block}c")),
            wb.nd.array(to_layout_numpy(ws, "OIHW", f"OIHW{block}i{block}o")), out)
        want = np.einsum("nchw,oc->nohw", xs.astype(np.float64), ws[:, :, 0, 0])
        np.testing.assert_allclose(to_layout_numpy(out.numpy(), f"NCHW{block}c", "NCHW"),
                                   want, rtol=1e-4, atol=1e-4)
