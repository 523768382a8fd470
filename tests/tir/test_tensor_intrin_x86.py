"""The built-in x86 tensor intrinsics: exact against numpy, and refused without the CPU feature.

Hardware intrinsics are tested where the host has the feature (AVX-512 VNNI, AVX512-BF16,
AVX-512F); their generic forms everywhere.
"""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import te, tir
from workbench.codegen.renderer import RenderError
from workbench.target import Target
from workbench.tir.schedule.testing import verify_trace_roundtrip

HOST = Target("llvm")
needs = {f: pytest.mark.skipif(not HOST.has_feature(f), reason=f"host lacks {f}")
         for f in ("avx512vnni", "avx512bf16", "avx512f", "avx512bw")}


def _dot_func(dtype_a, dtype_b, acc, k_inner, m=16, n=64, k=32):
    """C[m, n] = sum_k acc(X[m, k]) * acc(W[n, k]), W packed [n/16, k/ki, 16, ki]."""
    X = te.placeholder((m, k), dtype_a, name="X")
    W = te.placeholder((n // 16, k // k_inner, 16, k_inner), dtype_b, name="W")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(
        X[i, r].astype(acc) * W[j // 16, r // k_inner, j % 16, r % k_inner].astype(acc),
        axis=r), name="C")
    return te.create_prim_func([X, W, C])


def _tensorized(func, intrin, k_inner):
    sch = tir.Schedule(func)
    i, j, r = sch.get_loops(sch.get_sblock("C"))
    jo, ji = sch.split(j, [None, 16])
    ro, ri = sch.split(r, [None, k_inner])
    sch.reorder(i, jo, ro, ji, ri)
    sch.tensorize(ji, intrin)
    verify_trace_roundtrip(sch, func)
    return sch


def _pack(w, k_inner):
    n, k = w.shape
    return w.reshape(n // 16, 16, k // k_inner, k_inner).transpose(0, 2, 1, 3).copy()


def _run_int8(intrin, x, w, target="llvm"):
    func = _dot_func("uint8", "int8", "int32", 4, m=x.shape[0], n=w.shape[0], k=x.shape[1])
    mod = wb.build(_tensorized(func, intrin, 4).mod, target=target)
    out = wb.nd.empty((x.shape[0], w.shape[0]), "int32")
    mod(wb.nd.array(x), wb.nd.array(_pack(w, 4)), out)
    return out.numpy()


def _int8_data(seed=0, m=16, n=64, k=32):
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, (m, k)).astype("uint8"),
            rng.integers(-128, 128, (n, k)).astype("int8"))


@needs["avx512vnni"]
def test_vnni_dot_is_exact_on_full_range_int8():
    x, w = _int8_data()
    got = _run_int8("dot_16x4_vnni", x, w)
    np.testing.assert_array_equal(got, x.astype(np.int32) @ w.astype(np.int32).T)
    asm = wb.build(_tensorized(_dot_func("uint8", "int8", "int32", 4), "dot_16x4_vnni", 4).mod,
                   target="llvm").get_source("asm")
    assert "vpdpbusd" in asm


def test_generic_int8_dot_is_exact_on_full_range_int8():
    x, w = _int8_data(1)
    got = _run_int8("dot_16x4_u8i8i32_generic", x, w)
    np.testing.assert_array_equal(got, x.astype(np.int32) @ w.astype(np.int32).T)


@needs["avx512bw"]
def test_avx512_pmaddubs_dot_saturates_like_tvms():
    # Exact while every pair sum fits int16 (values up to 127 * 127 * 2 = 32258).
    rng = np.random.default_rng(2)
    x = rng.integers(0, 128, (16, 32)).astype("uint8")
    w = rng.integers(-127, 128, (64, 32)).astype("int8")
    np.testing.assert_array_equal(_run_int8("dot_16x4_avx512", x, w),
                                  x.astype(np.int32) @ w.astype(np.int32).T)
    # Saturates beyond: 255 * 127 * 2 > 32767.
    x = np.full((16, 32), 255, "uint8")
    w = np.full((64, 32), 127, "int8")
    got = _run_int8("dot_16x4_avx512", x, w)
    assert (got < x.astype(np.int32) @ w.astype(np.int32).T).all()


def test_vnni_without_the_feature_is_a_clear_error():
    func = _dot_func("uint8", "int8", "int32", 4)
    sch = _tensorized(func, "dot_16x4_vnni", 4)
    with pytest.raises(RenderError, match="needs CPU feature.*avx512vnni"):
        wb.build(sch.mod, target="llvm -mcpu=haswell -mattr=+avx2,+fma")


def test_unpacked_weight_does_not_match_the_compact_16x4_layout():
    X = te.placeholder((16, 32), "uint8", name="X")
    W = te.placeholder((64, 32), "int8", name="W")
    r = te.reduce_axis((0, 32), name="k")
    C = te.compute((16, 64), lambda i, j: te.sum(
        X[i, r].astype("int32") * W[j, r].astype("int32"), axis=r), name="C")
    func = te.create_prim_func([X, W, C])
    sch = tir.Schedule(func)
    i, j, r = sch.get_loops(sch.get_sblock("C"))
    jo, ji = sch.split(j, [None, 16])
    ro, ri = sch.split(r, [None, 4])
    sch.reorder(i, jo, ro, ji, ri)
    with pytest.raises(tir.ScheduleError, match="not contiguous"):
        sch.tensorize(ji, "dot_16x4_vnni")


def _run_bf16(intrin, x, w):
    import ml_dtypes  # noqa: F401 - bfloat16 numpy arrays
    func = _dot_func("bfloat16", "bfloat16", "float32", 2, m=x.shape[0], n=w.shape[0],
                     k=x.shape[1])
    mod = wb.build(_tensorized(func, intrin, 2).mod, target="llvm")
    out = wb.nd.empty((x.shape[0], w.shape[0]), "float32")
    mod(wb.nd.array(x), wb.nd.array(_pack(w, 2)), out)
    return out.numpy()


@pytest.mark.parametrize("intrin", [
    pytest.param("dot_16x2_bf16", marks=needs["avx512bf16"]), "dot_16x2_bf16_generic"])
def test_bf16_dot(intrin):
    import ml_dtypes
    rng = np.random.default_rng(3)
    bf = ml_dtypes.bfloat16
    # Small integers: every product and partial sum is exact in float32, whatever the order.
    x = rng.integers(-8, 9, (16, 32)).astype(bf)
    w = rng.integers(-8, 9, (64, 32)).astype(bf)
    ref = x.astype(np.float32) @ w.astype(np.float32).T
    np.testing.assert_array_equal(_run_bf16(intrin, x, w), ref)
    x = rng.uniform(-1, 1, (16, 32)).astype(bf)
    w = rng.uniform(-1, 1, (64, 32)).astype(bf)
    ref = x.astype(np.float32) @ w.astype(np.float32).T
    np.testing.assert_allclose(_run_bf16(intrin, x, w), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("isa,shape", [("avx512", "4x64x32"), ("avx512", "8x32x16"),
                                       ("avx2", "4x16x16")])
def test_fp32_microkernel(isa, shape):
    mr, nr, kc = (int(v) for v in shape.split("x"))
    m, n, k = 32, 128, 64
    A = te.placeholder((m, k), "float32", name="A")
    B = te.placeholder((k, n), "float32", name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    func = te.create_prim_func([A, B, C])
    sch = tir.Schedule(func)
    i, j, rr = sch.get_loops(sch.get_sblock("C"))
    io, ii = sch.split(i, [None, mr])
    jo, ji = sch.split(j, [None, nr])
    ro, ri = sch.split(rr, [None, kc])
    sch.reorder(jo, ro, io, ii, ri, ji)  # the micro-kernel nests i, k, j
    sch.tensorize(ii, f"{isa}_fp32_mk_{shape}")
    sch.parallel(jo)
    verify_trace_roundtrip(sch, func)
    mod = wb.build(sch.mod, target="llvm")
    rng = np.random.default_rng(4)
    # Integer-valued inputs: the float32 sums are exact, so any summation order agrees.
    a = rng.integers(-4, 5, (m, k)).astype("float32")
    b = rng.integers(-4, 5, (k, n)).astype("float32")
    out = wb.nd.empty((m, n), "float32")
    mod(wb.nd.array(a), wb.nd.array(b), out)
    np.testing.assert_array_equal(out.numpy(), a @ b)
    if HOST.has_feature("avx512f"):
        assert "vfmadd231ps\t%zmm" in mod.get_source("asm") or "vfmadd" in mod.get_source("asm")


def test_fp32_microkernel_shapes_are_checked():
    with pytest.raises(ValueError, match="exceed the 28 vector registers"):
        tir.TensorIntrin.get("avx512_fp32_mk_16x64x8")
    with pytest.raises(ValueError, match="NR a multiple of 16"):
        tir.TensorIntrin.get("avx512_fp32_mk_4x24x8")


@needs["avx512vnni"]
@pytest.mark.parametrize("shape", ["4x64x32", "7x32x16"])
def test_vnni_microkernel_is_exact(shape):
    mr, nr, kc = (int(v) for v in shape.split("x"))
    m, n, k = 28 if mr == 7 else 32, 64, 64
    func = _dot_func("uint8", "int8", "int32", 4, m=m, n=n, k=k)
    sch = tir.Schedule(func)
    i, j, r = sch.get_loops(sch.get_sblock("C"))
    io, ii = sch.split(i, [None, mr])
    jo, ji = sch.split(j, [None, nr])
    ro, ri = sch.split(r, [None, kc])
    sch.reorder(jo, ro, io, ii, ji, ri)
    sch.tensorize(ii, f"avx512_vnni_mk_{shape}")
    verify_trace_roundtrip(sch, func)
    rng = np.random.default_rng(6)
    x = rng.integers(0, 256, (m, k)).astype("uint8")
    w = rng.integers(-128, 128, (n, k)).astype("int8")
    mod = wb.build(sch.mod, target="llvm")
    out = wb.nd.empty((m, n), "int32")
    mod(wb.nd.array(x), wb.nd.array(_pack(w, 4)), out)
    np.testing.assert_array_equal(out.numpy(), x.astype(np.int32) @ w.astype(np.int32).T)
    assert mod.get_source("asm").count("vpdpbusd") >= mr * (nr // 16)


@needs["avx512bf16"]
@pytest.mark.parametrize("shape", ["4x64x32", "6x32x16"])
def test_bf16_microkernel_matches_numpy(shape):
    import ml_dtypes
    mr, nr, kc = (int(v) for v in shape.split("x"))
    m, n, k = 24, 64, 64
    func = _dot_func("bfloat16", "bfloat16", "float32", 2, m=m, n=n, k=k)
    sch = tir.Schedule(func)
    i, j, r = sch.get_loops(sch.get_sblock("C"))
    io, ii = sch.split(i, [None, mr])
    jo, ji = sch.split(j, [None, nr])
    ro, ri = sch.split(r, [None, kc])
    sch.reorder(jo, ro, io, ii, ji, ri)
    sch.tensorize(ii, f"avx512_bf16_mk_{shape}")
    verify_trace_roundtrip(sch, func)
    rng = np.random.default_rng(8)
    # Small integers: every product and partial sum is exact in float32, whatever the order.
    x = rng.integers(-8, 9, (m, k)).astype(ml_dtypes.bfloat16)
    w = rng.integers(-8, 9, (n, k)).astype(ml_dtypes.bfloat16)
    mod = wb.build(sch.mod, target="llvm")
    out = wb.nd.empty((m, n), "float32")
    mod(wb.nd.array(x), wb.nd.array(_pack(w, 2)), out)
    np.testing.assert_array_equal(out.numpy(), x.astype(np.float32) @ w.astype(np.float32).T)
    assert mod.get_source("asm").count("vdpbf16ps") >= mr * (nr // 16)
    # Real-valued data: within float32 rounding of numpy's sum.
    x = rng.uniform(-1, 1, (m, k)).astype(ml_dtypes.bfloat16)
    w = rng.uniform(-1, 1, (n, k)).astype(ml_dtypes.bfloat16)
    mod(wb.nd.array(x), wb.nd.array(_pack(w, 2)), out)
    np.testing.assert_allclose(out.numpy(), x.astype(np.float32) @ w.astype(np.float32).T,
                               rtol=1e-5, atol=1e-5)


def test_packed_microkernel_shapes_are_checked():
    with pytest.raises(ValueError, match="KC a multiple of 2"):
        tir.TensorIntrin.get("avx512_bf16_mk_4x32x3")
    with pytest.raises(ValueError, match="exceed the 28 vector registers"):
        tir.TensorIntrin.get("avx512_vnni_mk_8x64x4")
