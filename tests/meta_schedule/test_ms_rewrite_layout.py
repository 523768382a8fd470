"""RewriteLayout (weight pre-packing): SuggestIndexMap on known tilings, the postproc on
sampled conv2d schedules (compiles, matches numpy, replays), RemoveWeightLayoutRewriteBlock
(the stripped kernel takes packed weights), ArgInfo with remove_preproc, the runner's output
check for packed candidates, tune_tir + compile_tir end to end, and compile_relax."""
from __future__ import annotations

import functools
import os

import numpy as np
import pytest
from ms_tuning_workloads import fast_runner, matmul, run, xgb_1thread

import workbench as wb
from workbench import relax, te, topi
from workbench.codegen import compile_to_object
from workbench.ir.module import IRModule
from workbench.ir.structural import structural_equal
from workbench.meta_schedule.arg_info import ArgInfo
from workbench.meta_schedule.builder.local_builder import default_build, default_export
from workbench.meta_schedule.postproc import Postproc, RewriteLayout
from workbench.meta_schedule.runner.reference import WrongResult, check_arguments
from workbench.meta_schedule.runner.utils import random_arguments
from workbench.meta_schedule.search_strategy.base import TraceApplier
from workbench.meta_schedule.tune_context import TuneContext
from workbench.runtime import load_module
from workbench.tir import op
from workbench.tir.buffer import decl_buffer
from workbench.tir.expr import Var
from workbench.tir.schedule import Schedule
from workbench.tir.schedule.analysis import suggest_index_map, suggest_read_layout
from workbench.tir.schedule.index_map import IndexMap
from workbench.tir.schedule.state import FuncIndex
from workbench.tir.schedule.testing import verify_trace_roundtrip
from workbench.tir.stmt import For, ForKind
from workbench.tir.transform import RemoveWeightLayoutRewriteBlock
from workbench.tir.transform.remove_weight_layout_rewrite_block import (
    add_layout_pack_funcs, layout_pack_func, layout_rewrites, pack_array,
)

TARGET = "llvm -num-cores=2"
PREPROC = "meta_schedule.layout_rewrite_preproc"


# ---- workloads and numpy references ---------------------------------------------------------

def conv2d_relu(n=1, hw=6, ci=8, co=16):
    """topi conv2d_nhwc (3x3, pad 1) + relu, as benchmarks/bench_tuning.py builds it."""
    data = te.placeholder((n, hw, hw, ci), "float32", name="data")
    weight = te.placeholder((3, 3, ci, co), "float32", name="weight")
    conv = topi.nn.conv2d_nhwc(data, weight, 1, 1, 1)
    return te.create_prim_func([data, weight, topi.nn.relu(conv)])


def conv2d_relu_ref(x, w):
    n, h, wd, _ = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = sum(np.einsum("nhwc,cf->nhwf", xp[:, i:i + h, j:j + wd, :], w[i, j])
              for i in range(3) for j in range(3))
    return np.maximum(out, 0)


def dense(m=16, n=24, k=32):
    data = te.placeholder((m, k), "float32", name="data")
    weight = te.placeholder((n, k), "float32", name="weight")
    return te.create_prim_func([data, weight, topi.nn.dense(data, weight)])


def _args(func, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, [int(s.value) for s in func.buffer_map[p].shape])
            .astype("float32") for p in func.params]


def _candidate(func, seed=3, space=0):
    """A post-processed candidate (llvm rules and postprocs, fresh random decisions)."""
    ctx = TuneContext(func, target=TARGET, space_generator="post-order-apply",
                      search_strategy="replay-trace", rand_state=seed)
    spaces = ctx.generate_design_space()
    applier = TraceApplier(ctx.mod, ctx.space_generator.postprocs)
    trace = spaces[space].trace.simplified(remove_postproc=True)
    sch = next(s for s in (applier.apply(trace, seed=seed + j, keep_decisions=False)
                           for j in range(8)) if s is not None)
    return ctx, sch


@functools.lru_cache(maxsize=None)
def _conv_candidate():
    """One post-processed conv2d_relu() candidate, shared by the tests that only read it."""
    return _candidate(conv2d_relu())


def _preproc_blocks(func):
    index = FuncIndex(func)
    return [n for n in index.block_order if index.blocks[n].block.annotations.get(PREPROC)]


# ---- SuggestIndexMap ---------------------------------------------------------------------------

def test_suggest_index_map_tiled_conv2d():
    sch = Schedule(conv2d_relu(hw=8, ci=16, co=32))
    b = sch.get_sblock("conv2d_nhwc")
    nn, yy, xx, ff, ry, rx, rc = sch.get_loops(b)
    ff0, ff1, ff2 = sch.split(ff, [8, 2, 2])
    rc0, rc1 = sch.split(rc, [8, 2])
    sch.reorder(nn, yy, xx, ff0, rc0, ry, rx, ff1, rc1, ff2)
    func = sch.mod["main"]
    weight = func.buffer_map[func.params[1]]
    name, read_index, imap = suggest_read_layout(func, weight)
    assert (name, read_index) == ("conv2d_nhwc", 1)
    # Loop order ff0 (8), rc0 (8), ry, rx, ff1 (2), rc1 (2), ff2 (2); ff's pieces by lower
    # factor 4, 2, 1; rc's by 2, 1.
    want = IndexMap.from_func(lambda i0, i1, i2, i3: (
        i3 // 4, i2 // 2, i0, i1, i3 // 2 % 2, i2 % 2, i3 % 2))
    assert structural_equal(imap, want), imap
    assert [int(s.value) for s in imap.map_shape(weight.shape)] == [8, 8, 3, 3, 2, 2, 2]


def test_suggest_index_map_tiled_dense_and_numpy_packing():
    sch = Schedule(dense())
    b = sch.get_sblock("T_matmul_NT")
    i, j, k = sch.get_loops(b)
    j0, j1 = sch.split(j, [3, 8])
    k0, k1 = sch.split(k, [4, 8])
    sch.reorder(i, j0, k0, j1, k1)
    func = sch.mod["main"]
    weight = func.buffer_map[func.params[1]]
    _, _, imap = suggest_read_layout(func, weight)
    assert structural_equal(imap, IndexMap.from_func(
        lambda i0, i1: (i0 // 8, i1 // 8, i0 % 8, i1 % 8)))
    w = np.arange(24 * 32, dtype="float32").reshape(24, 32)
    # pack_array agrees with the same packing written as a numpy reshape + transpose.
    np.testing.assert_array_equal(pack_array(w, imap),
                                  w.reshape(3, 8, 4, 8).transpose(0, 2, 1, 3))


def test_suggest_index_map_fused_loop_pieces():
    # W[j, k] with j = f // 4 * 2 + j1, k = f % 4 * 2 + k1: the fused loop f gives two pieces,
    # ordered first (the outer loop) with the larger lower factor first.
    buf = decl_buffer((6, 8), "float32", "W")
    f, j1, k1 = Var("f", "int32"), Var("j1", "int32"), Var("k1", "int32")
    loops = [For(v, op.const(0, "int32"), op.const(n, "int32"), ForKind.SERIAL, None)
             for v, n in ((f, 12), (j1, 2), (k1, 2))]
    j = op.add(op.mul(op.floordiv(f, 4), 2), j1)
    k = op.add(op.mul(op.floormod(f, 4), 2), k1)
    imap = suggest_index_map(buf, [j, k], loops)
    assert structural_equal(imap, IndexMap.from_func(
        lambda i0, i1: (i0 // 2, i1 // 2, i0 % 2, i1 % 2))), imap


@pytest.mark.parametrize("case", ["offset", "gap", "partial", "not-a-loop"])
def test_suggest_index_map_not_analysable(case):
    buf = decl_buffer((16,), "float32", "W")
    i = Var("i", "int32")
    extent = 8 if case == "partial" else 16
    loops = [For(i, op.const(0, "int32"), op.const(extent, "int32"), ForKind.SERIAL, None)]
    index = {"offset": op.add(i, 1), "gap": op.mul(i, 2), "partial": i,
             "not-a-loop": Var("n", "int32")}[case]
    if case == "gap":
        loops = [For(i, op.const(0, "int32"), op.const(8, "int32"), ForKind.SERIAL, None)]
    assert suggest_index_map(buf, [index], loops) is None


# ---- the postproc ------------------------------------------------------------------------------

def test_functions_without_layout_free_buffers_are_untouched():
    func = matmul(16)
    assert "layout_free_buffers" not in func.attrs
    sch = Schedule(func)
    sch.enter_postproc()
    before, mod = len(sch.trace.insts), sch.mod
    assert RewriteLayout().apply(sch)
    assert len(sch.trace.insts) == before and sch.mod["main"] is mod["main"]
    assert RemoveWeightLayoutRewriteBlock()(func) is func
    assert ArgInfo.from_entry_func(IRModule({"main": func}), remove_preproc=True) == \
        ArgInfo.from_prim_func(func)
    # The llvm postproc list keeps TVM's order with RewriteLayout last.
    assert [type(p).__name__ for p in Postproc.create("llvm")][-1] == "RewriteLayout"


def test_postproc_on_sampled_conv2d_compiles_matches_numpy_and_replays():
    func = conv2d_relu()
    ctx, sch = _conv_candidate()
    kinds = [i.kind.name for i in sch.trace.insts]
    post = kinds[kinds.index("EnterPostproc"):]
    assert post[-3:] == ["CacheRead", "Annotate", "TransformLayout"]
    main = sch.mod["main"]
    (preproc,) = _preproc_blocks(main)
    assert preproc == "weight_global"
    # The signature is unchanged: the compiled schedule packs the weight on every call.
    assert [int(s.value) for s in main.buffer_map[main.params[1]].shape] == [3, 3, 8, 16]
    x, w, _ = args = _args(func)
    np.testing.assert_allclose(run(sch.mod, args)[-1], conv2d_relu_ref(x, w),
                               rtol=1e-4, atol=1e-4)
    # The trace replays (JSON and Python) to the same IR.
    verify_trace_roundtrip(sch, ctx.mod)


def test_postproc_after_an_existing_cache_read_chain():
    func = conv2d_relu(hw=6, ci=8, co=16)
    sch = Schedule(func)
    b = sch.get_sblock("conv2d_nhwc")
    nn, yy, xx, ff, ry, rx, rc = sch.get_loops(b)
    ff0, ff1 = sch.split(ff, [4, 4])
    rc0, rc1 = sch.split(rc, [2, 4])
    sch.reorder(nn, yy, ff0, rc0, xx, ry, rx, rc1, ff1)
    sch.cache_read(b, 1, "global")  # the anchor reads a copy of the weight
    sch.enter_postproc()
    assert RewriteLayout().apply(sch)
    main = sch.mod["main"]
    assert _preproc_blocks(main) == ["weight_global_1"]
    index = {n: info.block for n, info in FuncIndex(main).blocks.items()}
    # Both the copy and the buffer the anchor reads have the packed layout.
    packed = [4, 2, 3, 3, 4, 4]
    assert [int(s.value) for s in index["weight_global"].writes[0].buffer.shape] == packed
    assert [int(s.value) for s in index["conv2d_nhwc"].reads[1].buffer.shape] == packed
    x, w, _ = args = _args(func)
    np.testing.assert_allclose(run(sch.mod, args)[-1], conv2d_relu_ref(x, w),
                               rtol=1e-4, atol=1e-4)
    verify_trace_roundtrip(sch, func)
    stripped = RemoveWeightLayoutRewriteBlock()(sch.mod)
    (rw,) = layout_rewrites(stripped["main"])
    np.testing.assert_allclose(run(stripped, [x, rw.pack(w), args[2]])[-1],
                               conv2d_relu_ref(x, w), rtol=1e-4, atol=1e-4)


# ---- stripping the preproc block ---------------------------------------------------------------

def test_stripped_kernel_takes_packed_weights():
    func = conv2d_relu()
    _, sch = _conv_candidate()
    transform = next(i for i in reversed(sch.trace.insts) if i.kind.name == "TransformLayout")
    imap = transform.inputs[1]
    packed_shape = [int(s.value) for s in imap.map_shape(func.buffer_map[func.params[1]].shape)]

    stripped = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(sch.mod)
    main = stripped["main"]
    assert _preproc_blocks(main) == []
    assert "weight_global" not in [b.name for b in main.body.block.alloc_buffers]
    assert [int(s.value) for s in main.buffer_map[main.params[1]].shape] == packed_shape
    (rw,) = layout_rewrites(main)
    assert (rw.param_index, rw.shape, list(rw.packed_shape)) == (1, (3, 3, 8, 16), packed_shape)
    assert structural_equal(rw.index_map, imap)
    # The input module is not modified; stripping twice changes nothing more.
    assert _preproc_blocks(sch.mod["main"]) == ["weight_global"]
    assert RemoveWeightLayoutRewriteBlock()(main) is main

    # ArgInfo reports what each version takes.
    infos = ArgInfo.from_entry_func(sch.mod, remove_preproc=True)
    assert list(infos[1].shape) == packed_shape
    assert list(ArgInfo.from_entry_func(sch.mod, remove_preproc=False)[1].shape) == [3, 3, 8, 16]
    assert list(ArgInfo.from_entry_func(sch.mod)[1].shape) == packed_shape  # TVM's default

    # Weights packed by numpy through the index map give numpy's result.
    x, w, out = _args(func)
    got = run(stripped, [x, pack_array(w, imap), out])[-1]
    np.testing.assert_allclose(got, conv2d_relu_ref(x, w), rtol=1e-4, atol=1e-4)


def test_strip_leaves_preproc_blocks_it_cannot_strip():
    # A "preproc" copy of an intermediate buffer (not a parameter) must keep running.
    A = te.placeholder((8, 8), "float32", name="A")
    B = te.compute((8, 8), lambda i, j: A[i, j] * 2.0, name="B")
    C = te.compute((8, 8), lambda i, j: B[i, j] + 1.0, name="C")
    func = te.create_prim_func([A, C])
    sch = Schedule(func)
    copy = sch.cache_read(sch.get_sblock("C"), 0, "global")
    sch.annotate(copy, PREPROC, 1)
    assert RemoveWeightLayoutRewriteBlock()(sch.mod)["main"] is sch.mod["main"]
    assert ArgInfo.from_entry_func(sch.mod) == ArgInfo.from_prim_func(func)


def test_packing_function_matches_numpy_packing():
    _, sch = _conv_candidate()
    (rw,) = layout_rewrites(RemoveWeightLayoutRewriteBlock()(sch.mod)["main"])
    pack = wb.build(IRModule({"pack": layout_pack_func(rw.shape, rw.dtype, rw.index_map,
                                                        "pack")}))
    w = np.random.default_rng(5).standard_normal(rw.shape).astype("float32")
    dst = wb.nd.array(np.zeros(rw.packed_shape, "float32"))
    pack["pack"](wb.nd.array(w), dst)
    np.testing.assert_array_equal(dst.numpy(), rw.pack(w))


# ---- the builder and the runner's output check ---------------------------------------------------

def _built(mod, tmp_path):
    path = default_export(default_build(mod, wb.target.Target(TARGET), None))
    return load_module(path)


def _reference_artifact(func, tmp_path):
    path = os.path.join(str(tmp_path), "reference.o")
    with open(path, "wb") as f:
        f.write(compile_to_object(IRModule({"main": func}), TARGET).obj)
    return path


def test_runner_check_packs_reference_inputs(tmp_path):
    func = conv2d_relu()
    _, sch = _conv_candidate()
    rt_mod = _built(sch.mod, tmp_path)
    assert "main__layout_pack_1" in rt_mod.function_names
    assert rt_mod.entry_name == "main"
    reference = _reference_artifact(func, tmp_path)
    packed_args = [a.as_json() for a in ArgInfo.from_entry_func(sch.mod, remove_preproc=True)]
    original_args = [a.as_json() for a in ArgInfo.from_prim_func(func)]
    assert packed_args[1] != original_args[1]
    check_arguments(rt_mod, wb.cpu(), packed_args, reference)  # passes
    # Stale argument info (the original shape) is a failure, never a silent pass.
    with pytest.raises(WrongResult, match="packing function main__layout_pack_1"):
        check_arguments(rt_mod, wb.cpu(), original_args, reference)
    # The runner's inputs for the reference are the original layout's seeded inputs.
    x, w, _ = random_arguments(original_args)
    assert x.shape == (1, 6, 6, 8) and w.shape == (3, 3, 8, 16)


def test_runner_check_catches_a_packing_that_disagrees_with_the_kernel(tmp_path):
    func = conv2d_relu()
    _, sch = _conv_candidate()
    stripped = RemoveWeightLayoutRewriteBlock()(sch.mod)
    (rw,) = layout_rewrites(stripped["main"])
    # A different bijection onto the same packed shape: the packed flat index rotated by one.
    shape = rw.packed_shape
    strides = [int(np.prod(shape[k + 1:])) for k in range(len(shape))]
    size = int(np.prod(shape))
    flat = None
    for f, s in zip(rw.index_map.final_indices, strides):
        term = op.mul(f, s)
        flat = term if flat is None else op.add(flat, term)
    rotated = op.floormod(op.add(flat, 1), size)
    wrong = IndexMap(rw.index_map.initial_indices, tuple(
        op.floormod(op.floordiv(rotated, s), n) for s, n in zip(strides, shape)))
    assert not np.array_equal(pack_array(np.arange(size).reshape(rw.shape), wrong, shape),
                              rw.pack(np.arange(size).reshape(rw.shape)))
    mod = stripped.copy()
    mod["main__layout_pack_1"] = layout_pack_func(rw.shape, rw.dtype, wrong,
                                                  "main__layout_pack_1")
    rt_mod = wb.build(mod)
    packed_args = [a.as_json() for a in ArgInfo.from_entry_func(sch.mod)]
    reference = _reference_artifact(func, tmp_path)
    with pytest.raises(WrongResult, match="max abs error"):
        check_arguments(rt_mod, wb.cpu(), packed_args, reference)
    # The honest packing functions pass.
    check_arguments(wb.build(add_layout_pack_funcs(stripped)), wb.cpu(), packed_args,
                    reference)


# ---- end to end ------------------------------------------------------------------------------

@pytest.mark.tuning
def test_tune_tir_conv2d_packs_weights_and_compile_tir_matches_numpy(tmp_path):
    import workbench.meta_schedule as ms
    from workbench.meta_schedule.tir_integration import compile_tir

    func = conv2d_relu()
    db = ms.tune_tir(func, TARGET, str(tmp_path), max_trials_global=8, num_trials_per_iter=8,
                     strategy="replay-trace", runner=fast_runner(), cost_model=xgb_1thread(),
                     seed=4, default_schedule_first=False)    # the search's postprocessing
    records = db.get_all_tuning_records()
    assert len(records) == 8
    # Every candidate passed the output check with its weights packed.
    assert all(r.run_secs and r.is_valid() for r in records), \
        [r.run_secs for r in records]
    packed = [r for r in records if list(r.args_info[1].shape) != [3, 3, 8, 16]]
    assert packed, "no candidate had its weight re-laid out"
    for r in records:
        kinds = [i.kind.name for i in r.trace.insts]
        assert "TransformLayout" in kinds[kinds.index("EnterPostproc"):]
    sch = compile_tir(db, func, TARGET)
    assert _preproc_blocks(sch.mod["main"])  # packs at run time
    x, w, _ = args = _args(func, seed=7)
    np.testing.assert_allclose(run(sch.mod, args)[-1], conv2d_relu_ref(x, w),
                               rtol=1e-4, atol=1e-4)


def test_compile_relax_with_a_rewritten_dense_kernel():
    from workbench.meta_schedule.database import MemoryDatabase, TuningRecord
    from workbench.meta_schedule.relax_integration import compile_relax, extract_tasks
    from workbench.relax.struct_info import TensorStructInfo
    from workbench.runtime.relax_vm import VirtualMachine

    x = relax.Var("x", TensorStructInfo((4, 32), "float32"))
    w = relax.Var("w", TensorStructInfo((24, 32), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            y = bb.emit_output(bb.call_te(topi.nn.dense, x, w))
        bb.emit_func_output(y)
    mod = bb.get()
    (task,) = extract_tasks(mod, "llvm")
    assert task.mod["main"].attrs["layout_free_buffers"] == (1,)
    ctx, sch = _candidate(task.mod["main"], seed=1)
    assert _preproc_blocks(sch.mod["main"])
    db = MemoryDatabase()
    db.commit_tuning_record(TuningRecord(sch.trace, db.commit_workload(task.mod), [1e-3],
                                         ctx.target, ArgInfo.from_entry_func(sch.mod)))
    exe = compile_relax(db, mod, TARGET)
    (kernel,) = [f for _, f in exe.lowered_mod.items()
                 if getattr(f, "attrs", {}).get("tir.is_scheduled")]
    assert _preproc_blocks(kernel)  # the VM kernel takes the original layout and packs it
    rng = np.random.default_rng(1)
    xv = rng.standard_normal((4, 32)).astype("float32")
    wv = rng.standard_normal((24, 32)).astype("float32")
    got = VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(xv), wb.nd.array(wv)).numpy()
    np.testing.assert_allclose(got, xv @ wv.T, rtol=1e-4, atol=1e-4)
