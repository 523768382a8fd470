"""tensorize / TensorIntrin: registration, structural matching, traces, and the lowered code.

Results of tensorized kernels are compared with numpy; every schedule's trace round-trips
through JSON and Python (``verify_trace_roundtrip``).
"""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import te, tir
from workbench.ir import structural_equal
from workbench.tir import TensorIntrin, op
from workbench.tir.buffer import BufferRegion, Range, decl_buffer
from workbench.tir.expr import BufferLoad, Ramp, Var
from workbench.tir.schedule import ScheduleError
from workbench.tir.schedule.testing import verify_trace_roundtrip
from workbench.tir.stmt import (
    Block, BlockRealize, BufferStore, For, ForKind, IterType, IterVar,
)
from workbench.tir.tensor_intrin import list_intrins


# ---- a small user intrinsic: C[4] += A[4] * B[4] (float32), implemented as one vector FMA ---

def _vec_fma_pair(strided: bool):
    def bufs(prefix):
        kw = {"strides": [1]} if strided else {}
        return [decl_buffer((4,), "float32", f"{prefix}{n}", **kw) for n in "ABC"]

    A, B, C = bufs("")
    i = Var("i", "int32")
    vi = IterVar(Range(op.const(0), op.const(4)), Var("vi", "int32"), IterType.DATA_PAR)
    body = BufferStore(C, op.add(C[vi.var], op.mul(A[vi.var], B[vi.var])), (vi.var,))
    inner = Block((vi,), (BufferRegion(A, (Range(vi.var, op.const(1)),)),
                          BufferRegion(B, (Range(vi.var, op.const(1)),))),
                  (BufferRegion(C, (Range(vi.var, op.const(1)),)),), "update", body)
    loop = For(i, op.const(0), op.const(4), ForKind.SERIAL,
               BlockRealize((i,), op.const(True), inner))

    def root(body, A, B, C):
        return BlockRealize((), op.const(True), Block(
            (), tuple(BufferRegion.full(b) for b in (C, A, B)), (BufferRegion.full(C),),
            "root", body))

    desc = tir.prim_func([A, B, C], root(loop, A, B, C))
    A2, B2, C2 = bufs("")
    ramp = (Ramp(op.const(0), op.const(1), 4, "int32x4"),)
    vec = BufferStore(C2, op.add(BufferLoad(C2, ramp, "float32x4"),
                                 op.mul(BufferLoad(A2, ramp, "float32x4"),
                                        BufferLoad(B2, ramp, "float32x4"))), ramp)
    impl = tir.prim_func([A2, B2, C2], root(vec, A2, B2, C2))
    return desc, impl


def _register_vec_fma():
    desc, impl = _vec_fma_pair(strided=False)
    TensorIntrin.register("test_vec_fma_4", desc, impl, override=True)


def _ew_fma(n=16, m=8):
    A = te.placeholder((m, n), "float32", name="A")
    B = te.placeholder((m, n), "float32", name="B")
    C = te.placeholder((m, n), "float32", name="C")
    D = te.compute((m, n), lambda i, j: C[i, j] + A[i, j] * B[i, j], name="D")
    return te.create_prim_func([A, B, C, D])


def _inplace_fma(n=16, m=8):
    """D[i, j] = D[i, j] + A[i, j] * B[i, j] as a reduction-free in-place update of D."""
    A = decl_buffer((m, n), "float32", "A")
    B = decl_buffer((m, n), "float32", "B")
    D = decl_buffer((m, n), "float32", "D")
    i, j = Var("i", "int32"), Var("j", "int32")
    vi = IterVar(Range(op.const(0), op.const(m)), Var("vi", "int32"), IterType.DATA_PAR)
    vj = IterVar(Range(op.const(0), op.const(n)), Var("vj", "int32"), IterType.DATA_PAR)
    idx = (vi.var, vj.var)
    point = lambda b: BufferRegion(b, tuple(Range(x, op.const(1)) for x in idx))  # noqa: E731
    blk = Block((vi, vj), (point(A), point(B), point(D)), (point(D),), "D",
                BufferStore(D, op.add(D[idx], op.mul(A[idx], B[idx])), idx))
    body = For(i, op.const(0), op.const(m), ForKind.SERIAL,
               For(j, op.const(0), op.const(n), ForKind.SERIAL,
                   BlockRealize((i, j), op.const(True), blk)))
    root = BlockRealize((), op.const(True), Block((), (), (), "root", body))
    return tir.prim_func([A, B, D], root)


def test_register_and_get():
    _register_vec_fma()
    got = TensorIntrin.get("test_vec_fma_4")
    assert isinstance(got, TensorIntrin)
    with pytest.raises(ValueError, match="already registered"):
        TensorIntrin.register("test_vec_fma_4", got.desc, got.impl)
    with pytest.raises(ValueError, match="no tensor intrinsic named 'nope'"):
        TensorIntrin.get("nope")
    assert TensorIntrin.get("nope", allow_missing=True) is None
    assert {"dot_16x4_vnni", "dot_16x4_avx512", "dot_16x2_bf16"} <= set(list_intrins())


def test_register_checks_the_pair():
    desc, impl = _vec_fma_pair(False)
    bad = tir.prim_func(impl.buffers[:2], impl.body)
    with pytest.raises(ValueError, match="desc takes 3 buffers but impl takes 2"):
        TensorIntrin(desc, bad)
    with pytest.raises(TypeError, match="desc must be a PrimFunc"):
        TensorIntrin("x", impl)


def test_tensorize_user_intrinsic_on_a_loop_and_run():
    _register_vec_fma()
    func = _inplace_fma()
    sch = tir.Schedule(func)
    blk = sch.get_sblock("D")
    i, j = sch.get_loops(blk)
    jo, ji = sch.split(j, [None, 4])
    sch.tensorize(ji, "test_vec_fma_4")
    text = sch.mod["main"].script()
    assert 'C = T.match_buffer(D[vi_o, vj_o * 4:vj_o * 4 + 4], (4,), "float32")' in text
    assert "C[0:4] = C[0:4] + A_1[0:4] * B_1[0:4]" in text
    assert 'sch.tensorize(block_or_loop=l' in "\n".join(sch.trace.as_python())
    verify_trace_roundtrip(sch, func)
    rng = np.random.default_rng(1)
    a, b, d = (rng.standard_normal((8, 16)).astype("float32") for _ in range(3))
    mod = wb.build(sch.mod, target="llvm")
    out = wb.nd.array(d)
    mod(wb.nd.array(a), wb.nd.array(b), out)
    np.testing.assert_allclose(out.numpy(), d + a * b, rtol=1e-6)
    # Lowered, the 4-lane vector of the impl reads D itself: the match buffer is gone.
    lowered = wb.tir.transform.lower(sch.mod)["main"].script()
    assert "D_1[i * 16 + j_0 * 4:i * 16 + j_0 * 4 + 4]" in lowered and "C[" not in lowered


def test_tensorize_a_block_and_the_block_handle_stays_valid():
    _register_vec_fma()
    func = _inplace_fma()
    sch = tir.Schedule(func)
    blk = sch.get_sblock("D")
    _, j = sch.get_loops(blk)
    _, ji = sch.split(j, [None, 4])
    outer = sch.blockize(ji)
    sch.tensorize(outer, "test_vec_fma_4")
    assert sch.get(outer).name_hint == "D_o" and sch.get(outer).match_buffers
    verify_trace_roundtrip(sch, func)


def test_mismatch_is_a_schedule_error_and_leaves_the_schedule_unchanged():
    _register_vec_fma()
    func = _inplace_fma()
    sch = tir.Schedule(func)
    blk = sch.get_sblock("D")
    _, j = sch.get_loops(blk)
    _, ji = sch.split(j, [None, 8])                    # 8 lanes, the intrinsic covers 4
    before = sch.mod
    with pytest.raises(ScheduleError, match="does not match tensor intrinsic 'test_vec_fma_4'"):
        sch.tensorize(ji, "test_vec_fma_4")
    assert structural_equal(sch.mod, before) and len(sch.trace) == 3
    with pytest.raises(ScheduleError, match="no tensor intrinsic named"):
        sch.tensorize(ji, "missing_intrin")
    with pytest.raises(TypeError, match="tensor_intrin must be the name"):
        sch.tensorize(ji, 3)


def test_mismatched_computation_is_refused():
    _register_vec_fma()
    func = _ew_fma()                                   # D = C + A * B: other buffers, other order
    sch = tir.Schedule(func)
    _, j = sch.get_loops(sch.get_sblock("D"))
    _, ji = sch.split(j, [None, 4])
    with pytest.raises(ScheduleError, match="does not match"):
        sch.tensorize(ji, "test_vec_fma_4")


def test_compact_impl_needs_a_contiguous_region():
    _register_vec_fma()
    func = _inplace_fma()
    sch = tir.Schedule(func)
    blk = sch.get_sblock("D")
    i, j = sch.get_loops(blk)
    # Tile the i axis by 4 instead: the 4 elements of a column are 16 apart in memory.
    sch.reorder(j, i)
    _, ii = sch.split(i, [None, 4])
    with pytest.raises(ScheduleError):
        sch.tensorize(ii, "test_vec_fma_4")
