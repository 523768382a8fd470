"""The compilation passes one by one: FuseOps, FuseTIR, DeadCodeElimination, CallTIRRewrite,
StaticPlanBlockMemory, VMShapeLower, the pipeline's observability, and If code generation."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax, tir
from workbench.relax import op
from workbench.relax.pipeline import get_default_pipeline, run_with_log
from workbench.relax.transform import (
    AnnotateTIROpPattern, CallTIRRewrite, DeadCodeElimination, FuseOps, FuseTIR, LegalizeOps,
    StaticPlanBlockMemory, ToNonDataflow, estimate_memory_usage, memory_usage,
)
from workbench.tir.function import PrimFunc


def f32(*shape):
    return relax.TensorStructInfo(shape, "float32")


def build_func(params, body_fn, dataflow=True):
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        if dataflow:
            with bb.dataflow():
                out = body_fn(bb)
                out = bb.emit_output(out)
        else:
            out = bb.emit(body_fn(bb))
        bb.emit_func_output(out)
    return bb.get()


def legalized(mod):
    return AnnotateTIROpPattern()(LegalizeOps()(mod))


def primitive_functions(mod):
    return {n: f for n, f in mod.items()
            if isinstance(f, relax.Function) and f.attrs.get("Primitive")}


def call_tir_count(func):
    return func.script().count("R.call_tir(")


# ---- FuseOps ---------------------------------------------------------------------------------

def test_relax_compile_fuse_elementwise_chain():
    x = relax.Var("x", f32(4, 8))
    mod = build_func([x], lambda bb: op.exp(bb.emit(op.add(x, relax.const(1.0)))))
    fused = FuseOps()(legalized(mod))
    prims = primitive_functions(fused)
    assert list(prims) == ["fused_add_exp"]
    assert prims["fused_add_exp"].attrs["Primitive"] == 1
    assert "cls.fused_add_exp(" in fused["main"].script()
    assert call_tir_count(fused["main"]) == 0


def test_relax_compile_fuse_matmul_epilogue_not_two_reductions():
    x, w1, w2 = (relax.Var(n, f32(8, 8)) for n in ("x", "w1", "w2"))

    def body(bb):
        h = bb.emit(op.nn.relu(op.matmul(x, w1)))
        return op.matmul(h, w2)
    fused = FuseOps()(legalized(build_func([x, w1, w2], body)))
    # matmul + relu (an elementwise epilogue) fuse; the second matmul stays alone.
    assert list(primitive_functions(fused)) == ["fused_matmul_relu"]
    assert call_tir_count(fused["main"]) == 1


def test_relax_compile_fuse_diamond_into_post_dominator():
    x = relax.Var("x", f32(4, 4))

    def body(bb):
        r = bb.emit(op.nn.relu(x))
        a = bb.emit(op.exp(r))
        b = bb.emit(op.negative(r))
        return op.add(a, b)
    fused = FuseOps()(legalized(build_func([x], body)))
    (name, func), = primitive_functions(fused).items()
    assert name == "fused_relu_exp_negative_add"
    assert len(func.params) == 1


def test_relax_compile_fuse_stops_at_block_outputs():
    x = relax.Var("x", f32(4, 4))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit_output(op.exp(x))         # used after the block: an output
            b = bb.emit_output(op.negative(a))
        bb.emit_func_output(relax.Tuple([a, b]))
    fused = FuseOps()(legalized(bb.get()))
    assert primitive_functions(fused) == {}


def test_relax_compile_fusion_off_is_identity():
    x = relax.Var("x", f32(4, 8))
    mod = legalized(build_func([x], lambda bb: op.exp(bb.emit(op.add(x, relax.const(1.0))))))
    out = FuseOps(fuse_opt_level=0)(mod)
    assert primitive_functions(out) == {}
    assert "FuseOps" not in get_default_pipeline(fuse=False).pass_names
    assert "StaticPlanBlockMemory" not in get_default_pipeline(plan_memory=False).pass_names


# ---- FuseTIR ---------------------------------------------------------------------------------

def _add_twice_module():
    x, y = relax.Var("x", f32(4, 8)), relax.Var("y", f32(4, 8))

    def body(bb):
        a = bb.emit(op.add(x, y))
        b = bb.emit(op.add(a, y))
        return op.nn.relu(b)
    return build_func([x, y], body)


def test_relax_compile_fuse_tir_one_kernel_per_group():
    mod = FuseTIR()(FuseOps()(legalized(_add_twice_module())))
    prims = [n for n, f in mod.items() if isinstance(f, PrimFunc)]
    assert prims == ["fused_add_add_relu"]  # the unfused kernels are gone
    func = mod["fused_add_add_relu"]
    root = func.body.block
    # Two intermediates, one loop nest per kernel, unique block names, fresh loop vars.
    assert [b.name for b in root.alloc_buffers] == ["T_add", "T_add_1"]
    text = func.script()
    assert 'T.block("T_add")' in text and 'T.block("T_add_1")' in text
    assert func.attrs["op_pattern"] == 0 and func.attrs["tir.noalias"] is True
    assert [b.name for b in func.buffers] == ["x", "y", "T_relu"]
    assert "R.call_tir(cls.fused_add_add_relu, (x, y)" in mod["main"].script()
    # It is ordinary block-form TIR: the reference interpreter runs it, schedules accept it.
    a, b = np.random.rand(4, 8).astype("float32"), np.random.rand(4, 8).astype("float32")
    out = np.zeros((4, 8), "float32")
    from workbench.tir.interpreter import run
    run(func, a, b, out)
    np.testing.assert_allclose(out, np.maximum(a + b + b, 0), rtol=1e-6)
    sch = tir.Schedule(func)
    sch.compute_inline(sch.get_block("T_add_1"))


def test_relax_compile_fuse_tir_symbolic_dims():
    n = tir.SizeVar("n", "int64")
    x = relax.Var("x", f32(n, 8))
    mod = build_func([x], lambda bb: op.exp(bb.emit(op.add(x, relax.const(1.0)))))
    mod = FuseTIR()(FuseOps()(legalized(mod)))
    func = mod["fused_add_exp"]
    (buf_x, _, buf_out) = func.buffers
    assert buf_x.shape[0] is buf_out.shape[0]  # one symbolic dim, the kernel's own
    assert not any(buf_x.shape[0] is d for d in x.struct_info.values)


# ---- DeadCodeElimination ----------------------------------------------------------------------

def test_relax_compile_dce_removes_unused_bindings_and_functions():
    x = relax.Var("x", f32(4,))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            bb.emit(op.exp(x))                           # unused
            unused_tuple = bb.emit(relax.Tuple([x, x]))  # unused
            del unused_tuple
            out = bb.emit_output(op.negative(x))
        bb.emit_func_output(out)
    mod = legalized(bb.get())
    assert "exp" in mod
    dce = DeadCodeElimination()
    out = dce(mod)
    text = out["main"].script()
    assert "cls.exp" not in text and "(x, x)" not in text and "cls.negative" in text
    assert dce.removed_bindings == 2
    assert "exp" not in out and "negative" in out  # the unused kernel is gone too


def test_relax_compile_dce_keeps_effects():
    x = relax.Var("x", f32(4,))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit(relax.Call(relax.ExternFunc("my.side_effect"), (x,), {},
                           (relax.ObjectStructInfo(),)))
        bb.emit_func_output(x)
    out = DeadCodeElimination()(bb.get())
    assert "my.side_effect" in out["main"].script()


# ---- CallTIRRewrite, memory planning -----------------------------------------------------------

def _chain(length: int, shape=(16, 16)):
    x = relax.Var("x", f32(*shape))

    def body(bb):
        v = x
        for _ in range(length - 1):
            v = bb.emit(op.exp(v))
        return op.exp(v)
    return build_func([x], body)


def test_relax_compile_call_tir_rewrite_is_destination_passing():
    mod = CallTIRRewrite()(ToNonDataflow()(legalized(_chain(2))))
    text = mod["main"].script()
    assert "R.call_tir" not in text
    assert text.count("R.builtin.alloc_tensor(R.shape([16, 16])") == 2
    assert "cls.exp(x, alloc)" in text


def test_relax_compile_memory_plan_reuses_storage():
    mod = CallTIRRewrite()(ToNonDataflow()(legalized(_chain(5))))
    planned = StaticPlanBlockMemory()(mod)
    text = planned["main"].script()
    # 4 intermediates of 1 KiB ping-pong between 2 storages; the output is not planned.
    assert text.count("R.memory.alloc_storage") == 2
    assert text.count("R.memory.alloc_tensor") == 4
    assert text.count("R.builtin.alloc_tensor") == 1
    usage = memory_usage(planned)["main"]
    assert (usage.unplanned_bytes, usage.planned_bytes) == (5 * 1024, 3 * 1024)
    assert "reduces constant memory size to 60.0%" in estimate_memory_usage(planned)


def _reduce_chain(cols: int):
    x = relax.Var("x", f32(64, cols))

    def body(bb):
        a = bb.emit(op.exp(x))                  # 64 * cols floats
        b = bb.emit(op.sum(a, axis=[1]))        # 256 bytes; a is dead after this
        c = bb.emit(op.exp(b))                  # 256 bytes: may take a's storage
        return op.negative(c)
    return build_func([x], body)


@pytest.mark.parametrize("cols, storages", [(4, 2), (64, 3)])
def test_relax_compile_memory_plan_size_classes(cols: int, storages: int):
    # A free storage is reused for a request within 16x of its size (1 KiB for 256 B), not
    # beyond (16 KiB for 256 B gets a storage of its own), as TVM's 1-d allocator.
    mod = CallTIRRewrite()(ToNonDataflow()(legalized(_reduce_chain(cols))))
    text = StaticPlanBlockMemory()(mod)["main"].script()
    assert text.count("R.memory.alloc_storage") == storages
    exe = relax.build(_reduce_chain(cols), "llvm")
    vm = relax.VirtualMachine(exe, wb.cpu())
    xs = np.random.rand(64, cols).astype("float32") * 0.01 - 1
    np.testing.assert_allclose(vm["main"](wb.nd.array(xs)).numpy(),
                               -np.exp(np.exp(xs).sum(1)), rtol=1e-4)


def test_relax_compile_memory_plan_symbolic_sizes():
    n = tir.SizeVar("n", "int64")
    x = relax.Var("x", f32(n, 16))

    def body(bb):
        v = x
        for _ in range(4):
            v = bb.emit(op.exp(v))
        return op.exp(v)
    mod = build_func([x], body)
    exe = relax.build(mod, "llvm", fuse=False)
    usage = memory_usage(exe.lowered_mod, {"n": 3})["main"]
    assert usage.planned_count == 3 and usage.planned_bytes == 3 * 3 * 64
    vm = relax.VirtualMachine(exe, wb.cpu())
    for rows in (2, 7):
        xs = np.random.rand(rows, 16).astype("float32") * 0.01 - 3
        np.testing.assert_allclose(vm["main"](wb.nd.array(xs)).numpy(),
                                   np.exp(np.exp(np.exp(np.exp(np.exp(xs))))), rtol=1e-4)


# ---- VMShapeLower ------------------------------------------------------------------------------

def test_relax_compile_shape_lower_derived_dims():
    n, m = tir.SizeVar("n", "int64"), tir.SizeVar("m", "int64")
    x = relax.Var("x", f32(n, m))
    y = relax.Var("y", f32(m,))

    def body(bb):
        flat = bb.emit(op.reshape(op.add(x, y), (n * m,)))
        return op.exp(flat)
    exe = relax.build(build_func([x, y], body), "llvm")
    text = exe.as_text()
    assert "vm.builtin.alloc_shape_heap" in text and "shape_func" in text
    vm = relax.VirtualMachine(exe, wb.cpu())
    for shape in ((2, 3), (4, 5)):
        xs = np.random.rand(*shape).astype("float32")
        ys = np.random.rand(shape[1]).astype("float32")
        out = vm["main"](wb.nd.array(xs), wb.nd.array(ys)).numpy()
        np.testing.assert_allclose(out, np.exp((xs + ys).reshape(-1)), rtol=1e-5)
    with pytest.raises(RuntimeError, match=r"param=y.*mismatch to a previous populated value"):
        vm["main"](wb.nd.array(np.zeros((2, 3), "float32")),
                   wb.nd.array(np.zeros(4, "float32")))


# ---- pipeline observability, If ------------------------------------------------------------------

def test_relax_compile_pipeline_is_observable():
    mod, log = run_with_log(_chain(2))
    names = [r.pass_name for r in log]
    assert names == get_default_pipeline().pass_names
    # batch norm folding, then the blocked layout (after the clean-up that forwards batch
    # norm's tuple), channel scales onto the next convolution's weights, the explicit
    # attention chain as one nn.attention call, linear layers' views moved out of their
    # epilogues, products padded to whole vector registers, then legalization
    assert names[:10] == ["FoldBatchnormToConv2D", "CanonicalizeBindings",
                          "DeadCodeElimination", "ConvertLayoutNCHWc",
                          "FoldChannelScaleToConv2D", "FuseAttention", "SinkReshapes",
                          "PadMatmulColumns", "LegalizeOps", "AnnotateTIROpPattern"]
    assert get_default_pipeline(convert_layout=False).pass_names[:7] == \
        ["FoldBatchnormToConv2D", "FoldChannelScaleToConv2D", "FuseAttention", "SinkReshapes",
         "PadMatmulColumns", "LegalizeOps", "AnnotateTIROpPattern"]
    assert names[-1] == "AttachGlobalSymbol"
    legal = names.index("LegalizeOps")
    assert "R.call_tir" not in log[legal - 1].script and "R.call_tir" in log[legal].script
    assert "vm.builtin.check_tensor_info" in log[-1].script
    seen = []
    relax.build(_chain(2), "llvm", instrument=lambda name, m, s: seen.append(name))
    assert seen == names


def test_relax_compile_if_codegen():
    c = relax.Var("c", relax.TensorStructInfo((), "bool"))
    x, y = relax.Var("x", f32(4,)), relax.Var("y", f32(4,))
    mod = build_func([c, x, y], lambda bb: relax.If(c, op.add(x, y), op.multiply(x, y)),
                     dataflow=False)
    exe = wb.compile(mod, "llvm")
    text = exe.as_text()
    assert "vm.builtin.read_if_cond" in text and "If    %" in text and "goto" in text
    vm = relax.VirtualMachine(exe, wb.cpu())
    a, b = np.arange(4, dtype="float32"), np.full(4, 2.0, "float32")
    np.testing.assert_allclose(vm["main"](wb.nd.array(np.array(True)), wb.nd.array(a),
                                          wb.nd.array(b)).numpy(), a + b)
    np.testing.assert_allclose(vm["main"](wb.nd.array(np.array(False)), wb.nd.array(a),
                                          wb.nd.array(b)).numpy(), a * b)


def test_relax_compile_tuple_outputs_and_constants():
    x = relax.Var("x", f32(3,))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(op.add(x, relax.const(np.array([1, 2, 3], "float32"))))
            out = bb.emit_output(relax.Tuple([a, relax.Tuple([x])]))
        bb.emit_func_output(out)
    exe = relax.build(bb.get(), "llvm")
    vm = relax.VirtualMachine(exe, wb.cpu())
    xs = np.ones(3, "float32")
    first, (second,) = vm["main"](wb.nd.array(xs))
    np.testing.assert_allclose(first.numpy(), [2, 3, 4])
    np.testing.assert_allclose(second.numpy(), xs)
