"""AMX tile micro-kernels (amx_int8_mk_* / amx_bf16_mk_*): exact against numpy where the host
has AMX, the OS permission requested when a module is loaded, and refused without the feature.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import workbench as wb
from workbench import te, tir
from workbench.codegen.renderer import RenderError
from workbench.runtime import cpu_state
from workbench.target import Target
from workbench.tir.schedule.testing import verify_trace_roundtrip

HOST = Target("llvm")
needs_amx = pytest.mark.skipif(
    not all(HOST.has_feature(f) for f in ("amx-tile", "amx-int8", "amx-bf16")),
    reason="host lacks AMX")


def _packed_func(kind: str, m: int, n: int, k: int):
    """C[m, n] = sum_k X[m, k] * W[n, k] with W packed [n/16, k/P, 16, P]."""
    a_t, b_t, acc, p = (("uint8", "int8", "int32", 4) if kind == "int8"
                        else ("bfloat16", "bfloat16", "float32", 2))
    X = te.placeholder((m, k), a_t, name="X")
    W = te.placeholder((n // 16, k // p, 16, p), b_t, name="W")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(
        X[i, r].astype(acc) * W[j // 16, r // p, j % 16, r % p].astype(acc), axis=r), name="C")
    return te.create_prim_func([X, W, C]), p


def _pack(w: np.ndarray, p: int) -> np.ndarray:
    n, k = w.shape
    return w.reshape(n // 16, 16, k // p, p).transpose(0, 2, 1, 3).copy()


def _amx_schedule(kind: str, shape: str, m: int, n: int, k: int):
    """The (m, n, k) product tiled by the kernel's (MR, NR, KC): A and C are strided
    sub-blocks, the kernel accumulates over k // KC calls."""
    mr, nr, kc = (int(v) for v in shape.split("x"))
    func, p = _packed_func(kind, m, n, k)
    sch = tir.Schedule(func)
    i, j, r = sch.get_loops(sch.get_sblock("C"))
    io, ii = sch.split(i, [None, mr])
    jo, ji = sch.split(j, [None, nr])
    ro, ri = sch.split(r, [None, kc])
    sch.reorder(io, jo, ro, ii, ji, ri)
    sch.tensorize(ii, f"amx_{kind}_mk_{shape}")
    verify_trace_roundtrip(sch, func)
    return sch, p


@needs_amx
@pytest.mark.parametrize("shape,mnk", [("32x32x64", (64, 64, 128)), ("16x16x128", (32, 48, 256)),
                                       ("16x32x64", (48, 64, 64)), ("28x32x64", (56, 64, 128)),
                                       ("7x16x64", (14, 16, 64))])
def test_amx_int8_kernel_is_exact_on_full_range_int8(shape, mnk):
    m, n, k = mnk
    sch, p = _amx_schedule("int8", shape, m, n, k)
    mod = wb.build(sch.mod, target="llvm")
    assert mod.get_source("asm").count("tdpbusd") >= 1
    rng = np.random.default_rng(11)
    x = rng.integers(0, 256, (m, k)).astype("uint8")
    w = rng.integers(-128, 128, (n, k)).astype("int8")
    x[0], w[0] = 255, -128                      # the extreme products
    out = wb.nd.empty((m, n), "int32")
    mod(wb.nd.array(x), wb.nd.array(_pack(w, p)), out)
    np.testing.assert_array_equal(out.numpy(), x.astype(np.int64) @ w.astype(np.int64).T)


@needs_amx
@pytest.mark.parametrize("shape,mnk", [("32x32x32", (64, 64, 64)), ("16x16x64", (32, 32, 128)),
                                       ("28x16x32", (56, 32, 64))])
def test_amx_bf16_kernel_matches_numpy(shape, mnk):
    import ml_dtypes
    m, n, k = mnk
    sch, p = _amx_schedule("bf16", shape, m, n, k)
    mod = wb.build(sch.mod, target="llvm")
    assert mod.get_source("asm").count("tdpbf16ps") >= 1
    rng = np.random.default_rng(12)
    out = wb.nd.empty((m, n), "float32")
    # Small integers: every product and partial sum is exact in float32, whatever the order.
    x = rng.integers(-8, 9, (m, k)).astype(ml_dtypes.bfloat16)
    w = rng.integers(-8, 9, (n, k)).astype(ml_dtypes.bfloat16)
    mod(wb.nd.array(x), wb.nd.array(_pack(w, p)), out)
    np.testing.assert_array_equal(out.numpy(), x.astype(np.float32) @ w.astype(np.float32).T)
    x = rng.uniform(-1, 1, (m, k)).astype(ml_dtypes.bfloat16)
    w = rng.uniform(-1, 1, (n, k)).astype(ml_dtypes.bfloat16)
    mod(wb.nd.array(x), wb.nd.array(_pack(w, p)), out)
    np.testing.assert_allclose(out.numpy(), x.astype(np.float32) @ w.astype(np.float32).T,
                               rtol=1e-5, atol=1e-5)


@needs_amx
def test_amx_kernel_runs_in_parallel_threads():
    # Each call configures and releases its own tiles: the OpenMP threads do not interfere.
    m, n, k = 128, 64, 128
    sch, p = _amx_schedule("int8", "16x32x64", m, n, k)
    sch.parallel(sch.get_loops(sch.get_sblock("C_o"))[0])
    mod = wb.build(sch.mod, target="llvm -num-cores=2")
    rng = np.random.default_rng(13)
    x = rng.integers(0, 256, (m, k)).astype("uint8")
    w = rng.integers(-128, 128, (n, k)).astype("int8")
    out = wb.nd.empty((m, n), "int32")
    for _ in range(3):
        mod(wb.nd.array(x), wb.nd.array(_pack(w, p)), out)
        np.testing.assert_array_equal(out.numpy(), x.astype(np.int64) @ w.astype(np.int64).T)


def _amx_with_write_cache():
    """The 16 x 32 kernel on a 64 x 128 output through a write cache per (i, j) tile, which
    compaction shrinks from 64 x 128 to the 16 x 32 tile."""
    sch, p = _amx_schedule("int8", "16x32x64", 64, 128, 128)
    block = sch.get_sblock("C_o")
    _, jo, _ = sch.get_loops(block)
    sch.reverse_compute_at(sch.cache_write(block, 0, "global"), jo)
    return sch, p


def test_tile_stores_into_a_compacted_cache_use_its_row_stride():
    # Found by tuning bench_peak's int8 matmul: its candidates crashed the runner's workers
    # (heap corruption). The kernel's C is a view with a symbolic row stride that its tile
    # loads / stores pass to the instruction; the view was bound to the cache's 64 x 128
    # layout (512-byte rows) before compaction shrank the cache to the 16 x 32 tile, so the
    # kernel wrote 16 rows 512 bytes apart into a 2 KB allocation.
    from workbench.tir.expr import Call
    from workbench.tir.functor import post_order_visit
    from workbench.tir.stmt import Allocate
    sch, _ = _amx_with_write_cache()
    lowered = wb.lower(sch.mod)["main"]
    allocs, strides = {}, []

    def visit(n):
        if isinstance(n, Allocate):
            allocs[n.buffer_var.name] = [int(e.value) for e in n.extents]
        elif isinstance(n, Call) and n.op == "call_llvm_intrin" and \
                n.args[0].value in ("llvm.x86.tileloadd64", "llvm.x86.tilestored64") and \
                "C" in str(n.args[2]):
            strides.append(n.args[3])
    post_order_visit(lowered.body, visit)
    assert allocs["C_global"] == [16 * 32]
    assert len(strides) == 4 and all(int(s.value) == 32 * 4 for s in strides), strides


@needs_amx
def test_kernel_into_a_compacted_cache_is_exact(tmp_path):
    # In a fresh process: the kernel that wrote past the cache crashed or computed garbage.
    sch, p = _amx_with_write_cache()
    wb.build(sch.mod, target="llvm").export_library(tmp_path / "k.so")
    rng = np.random.default_rng(15)
    x = rng.integers(0, 256, (64, 128)).astype("uint8")
    w = rng.integers(-128, 128, (128, 128)).astype("int8")
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "w.npy", _pack(w, p))
    script = textwrap.dedent(f"""
        import numpy as np
        import workbench as wb
        mod = wb.runtime.load_module({str(tmp_path / "k.so")!r})
        out = wb.nd.empty((64, 128), "int32")
        for _ in range(3):
            mod(wb.nd.array(np.load({str(tmp_path / "x.npy")!r})),
                wb.nd.array(np.load({str(tmp_path / "w.npy")!r})), out)
        np.save({str(tmp_path / "out.npy")!r}, out.numpy())
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, f"exit {res.returncode}: {res.stderr[-2000:]}"
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"),
                                  x.astype(np.int64) @ w.astype(np.int64).T)


def test_amx_kernel_shapes_are_checked():
    with pytest.raises(ValueError, match="exceed the 8 AMX tile registers"):
        tir.TensorIntrin.get("amx_int8_mk_48x32x64")
    with pytest.raises(ValueError, match="KC a multiple of 32"):
        tir.TensorIntrin.get("amx_bf16_mk_16x16x48")
    with pytest.raises(ValueError, match="NR a multiple of 16"):
        tir.TensorIntrin.get("amx_int8_mk_8x24x64")


def test_amx_without_the_feature_is_a_clear_error():
    sch, _ = _amx_schedule("int8", "16x16x64", 16, 16, 64)
    with pytest.raises(RenderError, match="needs CPU feature.*amx"):
        wb.build(sch.mod, target="llvm -mcpu=cascadelake")


def test_unknown_cpu_state_is_refused():
    with pytest.raises(ValueError, match="CPU state 'warp-drive'"):
        cpu_state.require("warp-drive")


@needs_amx
def test_loading_an_amx_module_requests_the_permission_in_a_fresh_process(tmp_path):
    # A fresh interpreter has no AMX permission; loading the module asks Linux for it before
    # any tile instruction can run (without it the first one kills the process with SIGILL).
    sch, p = _amx_schedule("int8", "16x16x64", 16, 32, 64)
    wb.build(sch.mod, target="llvm").export_library(tmp_path / "amx.so")
    rng = np.random.default_rng(1)
    np.save(tmp_path / "x.npy", rng.integers(0, 256, (16, 64)).astype("uint8"))
    w = rng.integers(-128, 128, (32, 64)).astype("int8")
    np.save(tmp_path / "w.npy", _pack(w, p))
    script = textwrap.dedent(f"""
        import numpy as np
        import workbench as wb
        from workbench.runtime import cpu_state
        assert not cpu_state.granted("amx")
        mod = wb.runtime.load_module({str(tmp_path / "amx.so")!r})
        assert cpu_state.granted("amx")
        out = wb.nd.empty((16, 32), "int32")
        mod(wb.nd.array(np.load({str(tmp_path / "x.npy")!r})),
            wb.nd.array(np.load({str(tmp_path / "w.npy")!r})), out)
        np.save({str(tmp_path / "out.npy")!r}, out.numpy())
    """)
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    x = np.load(tmp_path / "x.npy")
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"),
                                  x.astype(np.int64) @ w.astype(np.int64).T)


@needs_amx
def test_amx_kernel_reconfigures_tiles_another_user_left_configured():
    # Another AMX user in this thread leaves a different configuration (8-row tiles) loaded:
    # the kernel sees that it differs and loads its own.
    import ctypes

    import llvmlite.binding as llvm
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    tm = llvm.Target.from_triple(llvm.get_process_triple()).create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten())
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(
        "declare void @llvm.x86.ldtilecfg(i8*)\n"
        "define void @other(i8* %cfg) {\n  call void @llvm.x86.ldtilecfg(i8* %cfg)\n"
        "  ret void\n}"), tm)
    engine.finalize_object()
    other = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(engine.get_function_address("other"))
    cfg = (ctypes.c_uint8 * 64)()
    cfg[0] = 1
    for t in range(8):
        cfg[16 + 2 * t], cfg[48 + t] = 32, 8
    m, n, k = 32, 32, 128
    sch, p = _amx_schedule("int8", "32x32x64", m, n, k)
    mod = wb.build(sch.mod, target="llvm")           # one thread: the ctypes call's thread
    rng = np.random.default_rng(14)
    x = rng.integers(0, 256, (m, k)).astype("uint8")
    w = rng.integers(-128, 128, (n, k)).astype("int8")
    out = wb.nd.empty((m, n), "int32")
    for _ in range(2):
        other(ctypes.addressof(cfg))
        mod(wb.nd.array(x), wb.nd.array(_pack(w, p)), out)
        np.testing.assert_array_equal(out.numpy(), x.astype(np.int64) @ w.astype(np.int64).T)
