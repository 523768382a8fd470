"""Fusion quality: AnnotateTIROpPattern classifies a symbolic-batch reshape as injective and
layer_norm (a two-value reduction block, then an injective output) as out-elementwise-fusable,
as TVM does, and FuseOps/FuseTIR then fuse them with their neighbours."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax, te, tir
from workbench.relax import op
from workbench.relax.transform import AnnotateTIROpPattern, FuseOps, LegalizeOps
from workbench.relax.transform import OpPatternKind as K
from workbench.relax.transform.annotate_tir_op_pattern import analyze_op_pattern
from workbench.tir.expr import IntImm
from workbench.tir.functor import IRMutator

N = tir.SizeVar("n", "int64")


def f32(*shape):
    return relax.TensorStructInfo(shape, "float32")


def build_func(params, body_fn):
    bb = relax.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(body_fn(bb))
        bb.emit_func_output(out)
    return bb.get()


def patterns(mod):
    mod = AnnotateTIROpPattern()(LegalizeOps()(mod))
    return {k: f.attrs["op_pattern"] for k, f in mod.items() if not isinstance(f, relax.Function)}


# ---- classification ------------------------------------------------------------------------------

@pytest.mark.parametrize("src,dst", [((N, 8, 4, 4), (N, 128)), ((N, 128), (N, 8, 4, 4)),
                                     ((N, 8, 16), (N, 8, 2, 8)), ((6, 4), (3, 8))])
def test_reshape_is_injective_with_a_symbolic_batch(src, dst):
    x = relax.Var("x", f32(*src))
    kinds = patterns(build_func([x], lambda bb: op.reshape(x, dst)))
    assert kinds == {"reshape": K.kInjective}


def test_reshape_indices_do_not_use_the_batch_dim():
    # TVM's injective rule: load indices may only use the store's variables. The outermost
    # unravelled index needs no ``% n`` (the flat index is below the element count).
    x = relax.Var("x", f32(N, 8, 4, 4))
    legal = LegalizeOps()(build_func([x], lambda bb: op.reshape(x, (N, 128))))
    text = legal["reshape"].script()
    assert "% n" not in text and "T.int64(0) * n" not in text


def test_layer_norm_is_out_ewise_fusable():
    x = relax.Var("x", f32(N, 16))
    g, b = relax.Var("g", f32(16)), relax.Var("b", f32(16))
    kinds = patterns(build_func([x, g, b], lambda bb: op.nn.layer_norm(x, g, b, axes=[-1])))
    assert kinds == {"layer_norm": K.kOutEWiseFusable}


_sum_pair = te.comm_reducer(lambda x, y: (x[0] + y[0], x[1] + y[1]),
                            lambda t0, t1: (tir.const(0, t0), tir.const(0, t1)), name="sum_sq")


def _sum_sqsum():
    A = te.placeholder((32, 64), name="A")
    k = te.reduce_axis((0, 64), name="k")
    s, sq = te.compute((32,), lambda i: _sum_pair((A[i, k], A[i, k] * A[i, k]), axis=k),
                       name="sum_sqsum")
    return te.create_prim_func([A, s, sq])


def test_two_value_reduction_block_is_comm_reduce():
    # TVM's test_sum_sqsum: one block storing two buffers at the same indices.
    func = _sum_sqsum()
    stores = []

    class Count(IRMutator):
        def visit_BufferStore(self, s):
            stores.append(s)
            return self.generic_visit(s)
    Count().visit(func.body)
    assert len({s.buffer.name for s in stores}) == 2
    assert analyze_op_pattern(func) == K.kCommReduce


def test_stores_at_different_indices_are_opaque():
    func = _sum_sqsum()

    class SecondStoreAtZero(IRMutator):
        def visit_BufferStore(self, s):
            s = self.generic_visit(s)
            if s.buffer.name.endswith("v1"):
                return s.replace(indices=(IntImm(s.indices[0].dtype, 0),))
            return s
    assert analyze_op_pattern(SecondStoreAtZero().visit(func)) == K.kOpaque


# ---- fusion and execution -------------------------------------------------------------------------

def test_symbolic_reshape_fuses_with_elementwise_neighbours():
    x = relax.Var("x", f32(N, 8, 4, 4))
    mod = build_func([x], lambda bb: op.exp(bb.emit(op.reshape(bb.emit(op.nn.relu(x)),
                                                               (N, 128)))))
    fused = FuseOps()(AnnotateTIROpPattern()(LegalizeOps()(mod)))
    assert [n for n, f in fused.items() if isinstance(f, relax.Function)
            and f.attrs.get("Primitive")] == ["fused_relu_reshape_exp"]
    exe = relax.build(mod, "llvm")
    # the build's pipeline sinks the reshape below the elementwise exp first (SinkReshapes,
    # symbolic shapes included): still one kernel
    assert [k for k in exe.kernel_names if not k.startswith("shape_func")] == \
        ["fused_relu_exp_reshape"]
    vm = relax.VirtualMachine(exe, wb.cpu())
    for batch in (2, 3):
        xs = np.random.default_rng(batch).standard_normal((batch, 8, 4, 4)).astype("float32")
        np.testing.assert_allclose(vm["main"](wb.nd.array(xs)).numpy(),
                                   np.exp(np.maximum(xs, 0).reshape(batch, -1)), rtol=1e-5)


def test_layer_norm_fuses_with_its_elementwise_producer_and_consumer():
    x, y = relax.Var("x", f32(N, 16)), relax.Var("y", f32(N, 16))
    g, b = relax.Var("g", f32(16)), relax.Var("b", f32(16))

    def body(bb):
        s = bb.emit(op.add(x, y))
        return op.nn.relu(bb.emit(op.nn.layer_norm(s, g, b, axes=[-1])))
    exe = relax.build(build_func([x, y, g, b], body), "llvm")
    kernels = [k for k in exe.kernel_names if not k.startswith("shape_func")]
    # As in TVM, an out-elementwise-fusable op takes its elementwise consumers; a row
    # normalisation also takes an elementwise producer (the residual add: SkipLayerNorm).
    assert kernels == ["fused_add_layer_norm_relu"]
    vm = relax.VirtualMachine(exe, wb.cpu())
    rng = np.random.default_rng(0)
    gs, bs = rng.standard_normal(16).astype("float32"), rng.standard_normal(16).astype("float32")
    for batch in (1, 4):
        xs, ys = (rng.standard_normal((batch, 16)).astype("float32") for _ in range(2))
        out = vm["main"](*[wb.nd.array(a) for a in (xs, ys, gs, bs)]).numpy()
        s = (xs + ys).astype("float64")
        mu, var = s.mean(-1, keepdims=True), s.var(-1, keepdims=True)
        want = np.maximum((s - mu) / np.sqrt(var + 1e-5) * gs + bs, 0)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)


def test_batch_norm_fuses_with_a_symbolic_flatten():
    # The fused kernel's output buffer is (n * 12,): FuseTIR gives the compound dim a plain var.
    x = relax.Var("x", f32(N, 3, 2, 2))
    stats = [relax.Var(s, f32(3)) for s in ("g", "b", "m", "v")]

    def body(bb):
        bn = bb.emit(op.nn.batch_norm(x, *stats, axis=1))
        return op.flatten(bb.emit(relax.TupleGetItem(bn, 0)))
    exe = relax.build(build_func([x, *stats], body), "llvm")
    assert "fused_batch_norm_reshape" in exe.kernel_names
    fused = exe.lowered_mod["fused_batch_norm_reshape"]
    out_buf = fused.buffer_map[fused.params[-1]]
    assert isinstance(out_buf.shape[0], tir.Var)
