"""PrepackConstantWeights (tuned kernels whose RewriteLayout block packs a constant weight take
it packed at compile time) and FuseTIR's ``layout_free_buffers`` (fused conv2d kernels can be
layout-rewritten by the tuner). Every compiled result is checked against numpy."""
from __future__ import annotations

import functools
import os
import sys

import numpy as np
import pytest

import workbench as wb
from workbench import relax, topi
from workbench.ir.module import GlobalVar, IRModule
from workbench.meta_schedule.arg_info import ArgInfo
from workbench.meta_schedule.database import MemoryDatabase, TuningRecord
from workbench.meta_schedule.relax_integration import _fuse, compile_relax, extract_tasks
from workbench.meta_schedule.search_strategy.base import TraceApplier
from workbench.meta_schedule.tune_context import TuneContext
from workbench.relax.frontend import nn
from workbench.relax.op.base import call_tir, call_tir_parts, is_call_tir
from workbench.relax.pipeline import get_default_pipeline
from workbench.relax.struct_info import TensorStructInfo
from workbench.relax.transform import FuseTIR, PrepackConstantWeights
from workbench.runtime.relax_vm import VirtualMachine
from workbench.tir.schedule.state import FuncIndex
from workbench.tir.transform.remove_weight_layout_rewrite_block import layout_rewrites


@pytest.fixture(autouse=True)
def _plain_layouts():
    """These tests are about packing the weights of NCHW convolutions (tuned and default
    schedules); the blocked layout reorders constant weights itself
    (tests/relax/test_relax_convert_layout.py)."""
    from workbench import options
    with options.override(convert_layout=False):
        yield

sys.path.insert(0, os.path.dirname(__file__))
from relax_compile_models import make_cnn  # noqa: E402

TARGET = "llvm -num-cores=2"
PREPROC = "meta_schedule.layout_rewrite_preproc"


# ---- numpy references ----------------------------------------------------------------------

def conv_ref(x, w, pad=1):
    """NCHW x OIHW convolution, stride 1, in float64."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    n, _, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    ho, wo = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    return sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + ho, j:j + wo], w[:, :, i, j])
               for i in range(kh) for j in range(kw))


def _rand(shape, seed):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


# ---- models ------------------------------------------------------------------------------------

class ConvRelu(nn.Module):
    def __init__(self) -> None:
        self.conv = nn.Conv2D(3, 8, 3, padding=1, bias=False)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return nn.relu(self.conv(x))


def conv_relu_model():
    mod, _ = ConvRelu().export_tvm({"forward": {"x": nn.spec.Tensor((2, 3, 8, 8), "float32")}})
    return mod


def three_convs_model():
    """``conv(conv(conv(x, w1), w2), w3)``, equal shapes and no epilogue: one ``conv2d``
    PrimFunc called three times (unfused, as single-op groups stay)."""
    x = relax.Var("x", TensorStructInfo((1, 8, 6, 6), "float32"))
    ws = [relax.Var(f"w{k}", TensorStructInfo((8, 8, 3, 3), "float32")) for k in (1, 2, 3)]
    bb = relax.BlockBuilder()
    with bb.function("main", [x, *ws]):
        with bb.dataflow():
            y = x
            for w in ws:
                y = bb.emit(relax.op.nn.conv2d(y, w, padding=1))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return bb.get()


# ---- tuned records with RewriteLayout ------------------------------------------------------------

def _packed_candidate(task_mod):
    """A post-processed llvm candidate of ``task_mod`` that has a preproc (weight packing)
    block, as the tuner would measure and store it."""
    ctx = TuneContext(task_mod, target=TARGET, space_generator="post-order-apply",
                      search_strategy="replay-trace", rand_state=1)
    spaces = ctx.generate_design_space()
    applier = TraceApplier(ctx.mod, ctx.space_generator.postprocs)
    for seed in range(16):
        trace = spaces[seed % len(spaces)].trace.simplified(remove_postproc=True)
        sch = applier.apply(trace, seed=seed, keep_decisions=False)
        if sch is not None and _preproc_blocks(sch.mod["main"]):
            return ctx, sch
    raise AssertionError(f"no candidate with a preproc block: {applier.summary()}")


def _tuned_database(mod, *names):
    """A MemoryDatabase with one record (a RewriteLayout candidate) for each named task."""
    db = MemoryDatabase()
    tasks = {t.task_name: t for t in extract_tasks(mod, TARGET)}
    for name in names:
        task = tasks[name]
        ctx, sch = _packed_candidate(task.mod)
        db.commit_tuning_record(TuningRecord(sch.trace, db.commit_workload(task.mod), [1e-3],
                                             ctx.target, ArgInfo.from_entry_func(sch.mod)))
    return db


@functools.lru_cache(maxsize=None)
def _conv_relu_db():
    return _tuned_database(conv_relu_model(), "fused_conv2d_relu")


@functools.lru_cache(maxsize=None)
def _three_convs_db():
    return _tuned_database(three_convs_model(), "conv2d")


def _preproc_blocks(func):
    index = FuncIndex(func)
    return [n for n in index.block_order if index.blocks[n].block.annotations.get(PREPROC)]


def _kernel_args(func, kernel):
    """The argument lists of every call of PrimFunc ``kernel`` in a (lowered) Relax function,
    in program order (a DPS call ``kernel(*inputs, *outputs)`` or a ``call_tir``)."""
    found = []
    for block in func.body.blocks:
        for b in block.bindings:
            v = b.value
            if isinstance(v, relax.Call) and isinstance(v.op, GlobalVar) and \
                    v.op.name_hint == kernel:
                found.append(list(v.args))
            elif isinstance(v, relax.Call) and getattr(v.op, "name", "") == "relax.call_tir" \
                    and v.args[0].name_hint == kernel:
                found.append(list(v.args[1].fields))
    return found


def _shape(buf):
    return tuple(int(d.value) for d in buf.shape)


def _run(exe, fname, *args):
    vm = VirtualMachine(exe, wb.cpu())
    return vm[fname](*[wb.nd.array(a) for a in args]).numpy()


# ---- compile_relax end to end ------------------------------------------------------------------

def test_compile_relax_with_params_packs_the_constant_weight_once(tmp_path):
    from workbench.runtime.relax_vm import Executable
    mod = conv_relu_model()
    w, x = _rand((8, 3, 3, 3), 0), _rand((2, 3, 8, 8), 1)
    seen = []
    exe = compile_relax(_conv_relu_db(), mod, TARGET, params={"conv.weight": w},
                        instrument=lambda name, m, s: seen.append(name))
    # Tuned kernels first, then default schedules for the rest (told which parameters are
    # constants), then packing for both.
    assert seen.index("PrepackConstantWeights") == seen.index("ApplyDefaultSchedule") + 1 \
        == seen.index("AnnotateConstantParams") + 2 \
        == seen.index("MetaScheduleApplyDatabase") + 3
    kernel = exe.lowered_mod["fused_conv2d_relu"]
    assert kernel.attrs["tir.is_scheduled"]
    # The kernel no longer packs: it takes the packed weight as its parameter ...
    assert _preproc_blocks(kernel) == []
    (rw,) = layout_rewrites(kernel)
    assert (rw.param_index, rw.shape, rw.dtype) == (1, (8, 3, 3, 3), "float32")
    packed_shape = _shape(kernel.buffer_map[kernel.params[1]])
    assert packed_shape == rw.packed_shape != (8, 3, 3, 3)
    # ... and the graph passes a constant holding the weight in that layout.
    (args,) = _kernel_args(exe.lowered_mod["forward"], "fused_conv2d_relu")
    const = args[1]
    assert isinstance(const, relax.Constant)
    assert const.struct_info.dtype == "float32"
    assert tuple(int(d.value) for d in const.struct_info.values) == packed_shape
    packed = const.data.numpy()
    np.testing.assert_array_equal(packed, rw.pack(w))
    # A re-layout: the same values, none lost or repeated (the packed shape has no padding).
    assert packed.size == w.size
    np.testing.assert_array_equal(np.sort(packed, axis=None), np.sort(w, axis=None))
    assert exe.kernel_names.count("fused_conv2d_relu") == 1
    want = np.maximum(conv_ref(x, w), 0)
    np.testing.assert_allclose(_run(exe, "forward", x), want, rtol=1e-4, atol=1e-4)
    # The packed constant is saved with the executable like any other.
    exe.save(tmp_path / "model.zip")
    np.testing.assert_allclose(_run(Executable.load(tmp_path / "model.zip"), "forward", x),
                               want, rtol=1e-4, atol=1e-4)


def test_compile_relax_without_params_keeps_packing_at_run_time():
    mod = conv_relu_model()
    w, x = _rand((8, 3, 3, 3), 2), _rand((2, 3, 8, 8), 3)
    exe = compile_relax(_conv_relu_db(), mod, TARGET)
    kernel = exe.lowered_mod["fused_conv2d_relu"]
    assert kernel.attrs["tir.is_scheduled"]
    assert _preproc_blocks(kernel) and not layout_rewrites(kernel)
    assert _shape(kernel.buffer_map[kernel.params[1]]) == (8, 3, 3, 3)
    np.testing.assert_allclose(_run(exe, "forward", x, w), np.maximum(conv_ref(x, w), 0),
                               rtol=1e-4, atol=1e-4)


def test_one_kernel_three_weights_two_constant_one_input():
    mod = three_convs_model()
    (task,) = extract_tasks(mod, TARGET)
    assert (task.task_name, task.weight) == ("conv2d", 3)
    w1, w2, w3 = (_rand((8, 8, 3, 3), k) * 0.3 for k in (4, 5, 6))
    x = _rand((1, 8, 6, 6), 7)
    exe = compile_relax(_three_convs_db(), mod, TARGET, params={"w1": w1, "w2": w2})
    low = exe.lowered_mod
    # The input weight w3 still needs the packing kernel; the constants get a stripped copy.
    original, stripped = low["conv2d"], low["conv2d_prepacked"]
    assert _preproc_blocks(original) and not _preproc_blocks(stripped)
    # The copy defines its own parameters (one Var in two functions did not read back from
    # TVMScript: each function of the text has its own).
    assert not {id(p) for p in original.params} & {id(p) for p in stripped.params}
    assert {"conv2d", "conv2d_prepacked"} <= set(exe.kernel_names)
    (rw,) = layout_rewrites(stripped)
    calls = _kernel_args(low["main"], "conv2d_prepacked")
    assert len(calls) == 2 and len(_kernel_args(low["main"], "conv2d")) == 1
    for args, w in zip(calls, (w1, w2)):
        assert isinstance(args[1], relax.Constant)
        np.testing.assert_array_equal(args[1].data.numpy(), rw.pack(w))
    want = conv_ref(conv_ref(conv_ref(x, w1), w2), w3)
    np.testing.assert_allclose(_run(exe, "main", x, w3), want, rtol=1e-4, atol=1e-4)
    # All three bound: the stripped kernel takes over the name, the packing one is gone.
    exe = compile_relax(_three_convs_db(), mod, TARGET, params={"w1": w1, "w2": w2, "w3": w3})
    assert "conv2d_prepacked" not in exe.lowered_mod
    assert not _preproc_blocks(exe.lowered_mod["conv2d"])
    assert len(_kernel_args(exe.lowered_mod["main"], "conv2d")) == 3
    np.testing.assert_allclose(_run(exe, "main", x), want, rtol=1e-4, atol=1e-4)


def test_relax_build_with_database_and_params_without_memory_planning():
    mod = three_convs_model()
    ws = [_rand((8, 8, 3, 3), k) * 0.3 for k in (8, 9, 10)]
    x = _rand((1, 8, 6, 6), 11)
    exe = wb.relax.build(mod, TARGET, params=dict(zip(("w1", "w2", "w3"), ws)),
                         database=_three_convs_db(), plan_memory=False)
    assert not _preproc_blocks(exe.lowered_mod["conv2d"])
    want = conv_ref(conv_ref(conv_ref(x, ws[0]), ws[1]), ws[2])
    np.testing.assert_allclose(_run(exe, "main", x), want, rtol=1e-4, atol=1e-4)


# ---- the pass on its own -------------------------------------------------------------------------

def _scheduled_module(bind):
    """The three-conv graph after fusion and MetaScheduleApplyDatabase, with ``bind`` bound."""
    from workbench.relax.transform import BindParams, MetaScheduleApplyDatabase
    mod = three_convs_model()
    if bind:
        mod = BindParams("main", bind)(mod)
    return MetaScheduleApplyDatabase(_three_convs_db(), TARGET)(_fuse(mod, TARGET))


def test_pass_packs_a_repeated_constant_once_and_sees_through_var_bindings():
    w = _rand((8, 8, 3, 3), 12)
    mod = _scheduled_module({})
    x = relax.Var("x", TensorStructInfo((1, 8, 6, 6), "float32"))
    kernel = mod.get_global_var("conv2d")
    out_si = TensorStructInfo((1, 8, 6, 6), "float32")
    # main(x): c = const(w); y = conv(x, c); y2 = conv(y, const(w)); y3 = conv(y2, const(w2))
    bb = relax.BlockBuilder(mod.copy())
    const = relax.Constant(w)
    other = relax.Constant(w * 2)
    with bb.function("f", [x]):
        with bb.dataflow():
            c = bb.emit(const)
            y = bb.emit(call_tir(kernel, [x, c], out_si))
            y = bb.emit(call_tir(kernel, [y, const], out_si))
            y = bb.emit(call_tir(kernel, [y, other], out_si))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    mod = bb.get()
    del mod["main"]  # its calls pass weights as inputs: they would keep the original alive
    p = PrepackConstantWeights()
    new = p(mod)
    assert not _preproc_blocks(new["conv2d"])  # every reference was rewritten
    assert _preproc_blocks(mod["conv2d"])  # the input module is unchanged
    calls = _kernel_args(new["f"], "conv2d")
    packed = [args[1] for args in calls]
    assert all(isinstance(c, relax.Constant) for c in packed)
    assert packed[0] is packed[1] and packed[2] is not packed[0]
    (rw,) = layout_rewrites(new["conv2d"])
    assert [entry[0] for entry in p.prepacked] == ["conv2d", "conv2d"]
    assert p.prepacked[0][2:] == ((8, 8, 3, 3), rw.packed_shape)
    np.testing.assert_array_equal(packed[2].data.numpy(), rw.pack(w * 2))
    xin = _rand((1, 8, 6, 6), 13)
    exe = wb.relax.build(new, TARGET)
    want = conv_ref(conv_ref(conv_ref(xin, w), w), w * 2)
    np.testing.assert_allclose(_run(exe, "f", xin), want, rtol=1e-4, atol=1e-4)


def test_pass_leaves_modules_without_constant_packed_weights_alone():
    mod = _scheduled_module({})  # all weights are inputs
    p = PrepackConstantWeights()
    out = p(mod)
    assert p.prepacked == [] and out is not mod
    for name, func in mod.items():
        assert out[name] is func
    unscheduled = _fuse(three_convs_model(), TARGET)  # no preproc block at all
    out = PrepackConstantWeights()(unscheduled)
    for name, func in unscheduled.items():
        assert out[name] is func
    with pytest.raises(TypeError, match="PrepackConstantWeights expects an IRModule"):
        PrepackConstantWeights()(mod["main"])


def test_pass_skips_a_constant_of_the_wrong_shape():
    # A kernel parameter bound to a constant of another shape is a broken program, but the
    # pass must not make it worse by packing garbage: it leaves the call alone.
    mod = _scheduled_module({})
    kernel = mod["conv2d"]
    bad = relax.Constant(_rand((8, 8, 9), 15))
    x = relax.Var("x", TensorStructInfo((1, 8, 6, 6), "float32"))
    bb = relax.BlockBuilder(mod.copy())
    with bb.function("g", [x]):
        with bb.dataflow():
            y = bb.emit_output(call_tir(mod.get_global_var("conv2d"), [x, bad],
                                        TensorStructInfo((1, 8, 6, 6), "float32")))
        bb.emit_func_output(y)
    mod = bb.get()
    del mod["main"]
    p = PrepackConstantWeights()
    out = p(mod)
    (args,) = _kernel_args(out["g"], "conv2d")
    assert args[1] is bad and out["conv2d"] is kernel and p.prepacked == []


# ---- FuseTIR keeps layout_free_buffers -----------------------------------------------------------

def _primitive_module(params, body):
    """A module with one hand-made Primitive function ``fused(*params)`` (its body built by
    ``body(bb, *params)``) and ``main`` calling it with the same arguments."""
    bb = relax.BlockBuilder()
    with bb.function("fused", params, attrs={"Primitive": 1}, private=True):
        with bb.dataflow():
            out = bb.emit_output(body(bb, *params))
        bb.emit_func_output(out)
    outer = [relax.Var(p.name_hint, p.struct_info) for p in params]
    with bb.function("main", outer):
        with bb.dataflow():
            y = bb.emit_output(relax.Call(bb.get().get_global_var("fused"), tuple(outer)))
        bb.emit_func_output(y)
    return bb.get()


def test_fuse_tir_remaps_layout_free_buffers_to_fused_parameters():
    b = relax.Var("b", TensorStructInfo((1, 8, 1, 1), "float32"))
    x = relax.Var("x", TensorStructInfo((1, 4, 6, 6), "float32"))
    w = relax.Var("w", TensorStructInfo((8, 4, 3, 3), "float32"))

    def body(bb, b, x, w):
        conv = bb.emit(bb.call_te(topi.nn.conv2d_nchw, x, w, 1, 1, 1))
        return bb.call_te(topi.add, conv, b)
    mod = _primitive_module([b, x, w], body)
    assert mod["conv2d_nchw"].attrs["layout_free_buffers"] == (1,)
    fused = FuseTIR()(mod)["fused"]
    # The conv2d's parameter 1 is the fused function's parameter 2.
    assert fused.attrs["layout_free_buffers"] == (2,)
    assert [buf.name for buf in fused.buffers][:3] == ["b", "x", "w"]
    bn, xn, wn = _rand((1, 8, 1, 1), 16), _rand((1, 4, 6, 6), 17), _rand((8, 4, 3, 3), 18)
    out = wb.nd.array(np.zeros((1, 8, 6, 6), "float32"))
    wb.build(IRModule({"fused": fused}))["fused"](wb.nd.array(bn), wb.nd.array(xn),
                                                   wb.nd.array(wn), out)
    np.testing.assert_allclose(out.numpy(), conv_ref(xn, wn) + bn, rtol=1e-4, atol=1e-4)


def test_fuse_tir_drops_the_mark_when_the_group_reads_the_weight_elsewhere():
    x = relax.Var("x", TensorStructInfo((8, 8, 4, 4), "float32"))
    w = relax.Var("w", TensorStructInfo((8, 8, 1, 1), "float32"))

    def body(bb, x, w):
        conv = bb.emit(bb.call_te(topi.nn.conv2d_nchw, x, w, 1, 0, 1))
        return bb.call_te(topi.add, conv, w)  # broadcasts (8, 8, 1, 1) over (8, 8, 4, 4)
    fused = FuseTIR()(_primitive_module([x, w], body))["fused"]
    assert "layout_free_buffers" not in fused.attrs


def test_fuse_tir_drops_the_mark_when_a_caller_computes_the_weight():
    # main scales the weight at run time (as FoldChannelScaleToConv2D leaves a squeeze-excite
    # projection): a re-laid-out copy would be made on every call, so the weight is not
    # layout-free; the same kernel given the caller's own parameter keeps the mark.
    x = relax.Var("x", TensorStructInfo((1, 4, 6, 6), "float32"))
    w = relax.Var("w", TensorStructInfo((8, 4, 3, 3), "float32"))
    s = relax.Var("s", TensorStructInfo((1, 4, 1, 1), "float32"))

    def conv(bb, x, w):
        return bb.call_te(topi.nn.conv2d_nchw, x, w, 1, 1, 1)
    mod = _primitive_module([x, w], conv)
    assert FuseTIR()(mod)["fused"].attrs["layout_free_buffers"] == (1,)

    mod = mod.copy()
    del mod["main"]
    bb = relax.BlockBuilder(mod)
    with bb.function("main", [x, w, s]):
        with bb.dataflow():
            ws = bb.emit(bb.call_te(topi.multiply, w, s))
            y = bb.emit_output(relax.Call(bb.get().get_global_var("fused"), (x, ws)))
        bb.emit_func_output(y)
    fused = FuseTIR()(bb.get())["fused"]
    assert "layout_free_buffers" not in fused.attrs


def test_folded_squeeze_excite_projection_weight_is_not_layout_free():
    # End to end: after FoldChannelScaleToConv2D the projection's weight is the product of a
    # constant and the gate, computed per call; every kernel reading it is left without the mark.
    import torch
    from workbench.relax.frontend.torch import from_exported_program

    class SE(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(32, 32, 3, padding=1)
            self.fc1 = torch.nn.Conv2d(32, 8, 1)
            self.fc2 = torch.nn.Conv2d(8, 32, 1)
            self.proj = torch.nn.Conv2d(32, 16, 1)

        def forward(self, x):
            y = torch.relu(self.conv(x))
            g = torch.sigmoid(self.fc2(torch.relu(self.fc1(y.mean((2, 3), keepdim=True)))))
            return self.proj(y * g)

    torch.manual_seed(0)
    model = SE().eval()
    xt = torch.randn(1, 32, 28, 28)
    ep = torch.export.export(model, (xt,))
    mod = from_exported_program(ep, keep_params_as_input=False)
    fused = _fuse(mod, TARGET)
    main = fused["main"]
    produced = {id(b.var) for blk in main.body.blocks for b in blk.bindings}
    checked = 0
    for blk in main.body.blocks:
        for b in blk.bindings:
            if not is_call_tir(b.value):
                continue
            gv, args, _, _ = call_tir_parts(b.value)
            free = fused[gv.name_hint].attrs.get("layout_free_buffers", ()) or ()
            for i in free:
                assert not (isinstance(args[i], relax.Var) and id(args[i]) in produced), \
                    f"{gv.name_hint}: argument {i} is computed per call but layout-free"
            checked += len(free)
    assert checked >= 3   # the constant weights of conv, fc1 and fc2 keep the mark
    ex = relax.build(mod, TARGET)
    got = VirtualMachine(ex, wb.cpu())["main"](wb.nd.array(xt.numpy()))
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(got.numpy(), model(xt).detach().numpy(), rtol=1e-4, atol=1e-4)


def test_cnn_fused_conv_kernel_is_layout_rewritten_and_prepacked():
    mod, names, params, reference = make_cnn(2)
    fused = _fuse(mod, TARGET)
    conv = fused["fused_conv2d_add_batch_norm_relu"]
    assert conv.attrs["layout_free_buffers"] == (1,)
    assert conv.buffers[1].name == "conv.weight"
    # Kernels without a layout-free weight parameter get no attr (the matmul reads the
    # transpose's result, which topi does not mark).
    assert "layout_free_buffers" not in fused["fused_matmul_add1"].attrs

    # RewriteLayout now applies to the fused kernel: the candidate packs the weight, and
    # compiles to the unscheduled kernel's result.
    task_mod = IRModule({"main": conv.with_attr("global_symbol", "main")})
    _, sch = _packed_candidate(task_mod)
    rng = np.random.default_rng(19)
    args = [rng.uniform(0.5, 1.5, _shape(buf)).astype("float32") for buf in conv.buffers]

    def run(m):
        out = wb.nd.array(np.zeros_like(args[-1]))
        wb.build(m, target="llvm")["main"](*[wb.nd.array(a) for a in args[:-1]], out)
        return out.numpy()
    np.testing.assert_allclose(run(sch.mod), run(task_mod), rtol=1e-4, atol=1e-4)

    # compile_relax with the parameters bound: the fused kernel takes the packed weight.
    db = _tuned_database(mod, "fused_conv2d_add_batch_norm_relu")
    exe = compile_relax(db, mod, TARGET, params=dict(zip(names, params)))
    kernel = exe.lowered_mod["fused_conv2d_add_batch_norm_relu"]
    assert kernel.attrs["tir.is_scheduled"] and not _preproc_blocks(kernel)
    (rw,) = layout_rewrites(kernel)
    assert rw.param_index == 1 and rw.shape == (8, 3, 3, 3)
    x = _rand((2, 3, 8, 8), 20)
    np.testing.assert_allclose(_run(exe, "forward", x), reference(x, params),
                               rtol=1e-4, atol=1e-4)


def test_default_pipeline_names_the_pass():
    names = get_default_pipeline().pass_names
    assert names.index("PrepackConstantWeights") == names.index("ApplyDefaultSchedule") + 1 \
        == names.index("AnnotateConstantParams") + 2 == names.index("FuseTIR") + 3
    assert names.index("PrepackConstantWeights") < names.index("CallTIRRewrite")
    db_names = get_default_pipeline(database=MemoryDatabase()).pass_names
    assert db_names.index("PrepackConstantWeights") == \
        db_names.index("ApplyDefaultSchedule") + 1 == \
        db_names.index("MetaScheduleApplyDatabase") + 3
    plain = get_default_pipeline(default_schedule=False).pass_names
    assert "ApplyDefaultSchedule" not in plain
    assert plain.index("PrepackConstantWeights") == plain.index("FuseTIR") + 1
