"""The full per-store feature extractor (TVM's PerStoreFeature, 164 / 172 columns).

Expected values are derived by hand from TVM's definitions (reference section 8.4) for small
known loop nests, not from the extractor's own earlier output.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import workbench as wb
from workbench import te, tir, topi
from workbench.tir import stmt as S
from workbench.ir.structural import structural_equal
from workbench.meta_schedule.feature_extractor import FeatureExtractor
from workbench.meta_schedule.feature_extractor.per_store import (
    FEATURE_NAMES, FEATURE_NAMES_WITH_WORKLOAD, FEATURE_PASSES, PerStoreFeature,
    describe_rows, extract_features,
)
from workbench.meta_schedule.feature_extractor.per_store import extractor as X
from workbench.meta_schedule.feature_extractor.per_store import preprocess as P
from workbench.meta_schedule.feature_extractor.per_store.compact import compact_for_features
from workbench.meta_schedule.search_strategy.search_strategy import MeasureCandidate
from workbench.meta_schedule.tune_context import TuneContext
from workbench.tir.schedule import Schedule
from workbench.tir.transform.pipeline import Pass, lower
from workbench.tir.transform.plan_buffers import compact_buffer_allocation

COL = {name: i for i, name in enumerate(FEATURE_NAMES)}


def slog(x: float) -> float:
    return math.log2(abs(x) + 1)


def matmul(n: int = 128, name: str = "C") -> wb.IRModule:
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name=name)
    return wb.IRModule({"main": te.create_prim_func([A, B, C])})


def conv2d() -> wb.IRModule:
    data = te.placeholder((1, 16, 14, 14), "float32", name="data")
    kernel = te.placeholder((16, 16, 3, 3), "float32", name="kernel")
    out = topi.nn.conv2d_nchw(data, kernel, 1, 1, 1)
    return wb.IRModule({"main": te.create_prim_func([data, kernel, out])})


def softmax() -> wb.IRModule:
    x = te.placeholder((32, 64), "float32", name="x")
    return wb.IRModule({"main": te.create_prim_func([x, topi.nn.softmax(x)])})


def tiled_matmul(n: int = 128, inner: str = "j", cache: bool = True) -> Schedule:
    """A tiled matmul: C_local tile (4 x 16) at loop j_1, k split by 4, j_2 innermost."""
    sch = Schedule(matmul(n))
    b = sch.get_block("C")
    cl = sch.cache_write(b, 0, "local") if cache else None
    i, j, k = sch.get_loops(b)
    i0, i1, i2 = sch.split(i, [None, 8, 4])
    j0, j1, j2 = sch.split(j, [None, 4, 16])
    k0, k1 = sch.split(k, [None, 4])
    if inner == "j":
        sch.reorder(i0, j0, i1, j1, k0, i2, k1, j2)
    else:
        sch.reorder(i0, j0, i1, j1, k0, i2, j2, k1)
    if cl is not None:
        sch.reverse_compute_at(cl, j1)
    return sch


def col(row: np.ndarray, name: str) -> float:
    return float(row[COL[name]])


def buffer_col(mod, row_index: int, buffer: str, name: str) -> float:
    """Feature ``name`` of ``buffer`` among the sorted buffer columns of one row."""
    info = describe_rows(mod)[row_index]
    k = info.accessed.index(buffer)
    return float(extract_features(mod)[row_index, COL[f"B{k}.{name}"]])


# ---- layout and basic contracts --------------------------------------------------------------

def test_names_and_lengths():
    assert len(FEATURE_NAMES) == 164 and len(set(FEATURE_NAMES)) == 164
    assert len(FEATURE_NAMES_WITH_WORKLOAD) == 172
    assert FEATURE_NAMES[:2] == ("float_mad", "float_add_sub")
    assert FEATURE_NAMES[57] == "B0.acc_type.kRead" and FEATURE_NAMES[-3:] == (
        "outer_prod", "num_loops", "auto_unroll_max_step")
    assert PerStoreFeature().feature_vector_length == 164
    assert PerStoreFeature(extract_workload=True).feature_vector_length == 172
    assert isinstance(PerStoreFeature(), FeatureExtractor)
    with pytest.raises(ValueError, match="buffers_per_store"):
        PerStoreFeature(buffers_per_store=0)


@pytest.mark.parametrize("make", [matmul, conv2d, softmax,
                                  lambda: tiled_matmul().mod], ids=["matmul", "conv2d",
                                                                    "softmax", "tiled"])
def test_deterministic_finite_and_shaped(make):
    mod = make()
    first = extract_features(mod)
    X._FEATURES.data.clear()
    P._LOWERED.data.clear()
    again = extract_features(make())  # rebuilt from scratch, caches cold
    assert first.dtype == np.float32 and first.shape[1] == 164 and first.shape[0] >= 1
    assert np.isfinite(first).all()
    np.testing.assert_array_equal(first, again)
    wl = extract_features(mod, extract_workload=True)
    assert wl.shape == (first.shape[0], 172)
    np.testing.assert_array_equal(wl[:, :164], first)


def test_extract_from_interface_and_workload_columns():
    mod = softmax()
    ctx = TuneContext(mod, target="llvm")
    cands = [MeasureCandidate(Schedule(mod), []), MeasureCandidate(tiled_matmul(64), [])]
    feats = PerStoreFeature().extract_from(ctx, cands)
    assert [f.shape[1] for f in feats] == [164, 164]
    assert all(f.dtype == np.float32 for f in feats)
    wl = PerStoreFeature(extract_workload=True).extract_from(ctx, cands)
    names = list(FEATURE_NAMES_WITH_WORKLOAD)
    # Workload columns come from the task (softmax blocks), for every candidate.
    for f in wl:
        assert f.shape[1] == 172
        assert (f[:, names.index("workload.softmax")] == 1).all()
        assert (f[:, names.index("workload.matmul")] == 0).all()


# ---- exact values on a naive matmul (hand-derived from TVM's definitions) --------------------

def test_naive_matmul_values():
    n = 128
    mod = matmul(n)
    f = extract_features(mod)
    assert f.shape == (1, 164)  # the init store (constant) gives no row
    row = f[0]
    total = n ** 3
    # C[i,j] = C[i,j] + A[i,k] * B[k,j]: one float add and one mul per iteration, no mad.
    assert col(row, "float_mad") == 0
    assert col(row, "float_add_sub") == pytest.approx(slog(total))
    assert col(row, "float_mul") == pytest.approx(slog(total))
    assert col(row, "int_add_sub") == 0 and col(row, "int_mul") == 0  # bare-var indices
    for kind in ("vec", "unroll", "parallel"):
        assert col(row, f"{kind}_type.kPosNone") == 1 and col(row, f"{kind}_num") == 0
    assert col(row, "is_gpu") == 0 and col(row, "blockIdx_x_len") == pytest.approx(1.0)
    assert describe_rows(mod)[0].stored == "C"
    # Sorted by lines: B (column walk, stride n), A (row walk), C (invariant in k).
    assert describe_rows(mod)[0].accessed == ("B", "A", "C")
    B = {k: buffer_col(mod, 0, "B", k) for k in ("acc_type.kRead", "stride", "lines",
                                                  "unique_bytes", "reuse_ct",
                                                  "reuse_dis_iter", "reuse_dis_bytes")}
    assert B["acc_type.kRead"] == 1
    assert B["stride"] == pytest.approx(slog(n))                  # k moves B by a row
    assert B["lines"] == pytest.approx(slog(total))               # every access a new line
    assert B["unique_bytes"] == pytest.approx(slog(n * n * 4))
    assert B["reuse_ct"] == pytest.approx(slog(n))                # i is B-invariant
    assert B["reuse_dis_iter"] == pytest.approx(slog(n * n))      # k and j inside i
    # Bytes touched under loop j by all buffers: A 128 + B 128*128 + C 128 floats.
    assert B["reuse_dis_bytes"] == pytest.approx(slog((n + n * n + n) * 4))
    assert buffer_col(mod, 0, "A", "stride") == pytest.approx(slog(1))
    assert buffer_col(mod, 0, "A", "lines") == pytest.approx(slog(total * 4 / 64))
    assert buffer_col(mod, 0, "C", "acc_type.kReadWrite") == 1
    assert buffer_col(mod, 0, "C", "stride") == 0                 # k does not move C
    # C is invariant in the innermost loop: reuse distance is TVM's "top loop" bytes quirk.
    assert buffer_col(mod, 0, "C", "reuse_dis_bytes") == pytest.approx(slog(3 * 4))
    # Group 4: C is a parameter (allocated outside all loops); group 5: the loop nest.
    assert col(row, "alloc_size") == pytest.approx(slog(n * n * 4))
    assert col(row, "alloc_prod") == pytest.approx(slog(n * n))
    assert col(row, "alloc_outer_prod") == pytest.approx(1.0)
    assert col(row, "alloc_inner_prod") == pytest.approx(slog(total))
    assert col(row, "outer_prod") == pytest.approx(slog(total))
    assert col(row, "num_loops") == pytest.approx(slog(3))
    assert col(row, "auto_unroll_max_step") == 0
    # Intensity: levels k / (j, k) / all do 2n, 2n^2, 2n^3 flops over (2n + 1), (2n + n^2),
    # 3n^2 floats. The first sample (10% of all flops) lies between levels 1 and 2.
    ratio1, ratio2 = 2 * n ** 2 / ((2 * n + n * n) * 4), 2 * n ** 3 / (3 * n * n * 4)
    target = 0.1 * 2 * n ** 3
    expect = ratio1 + (ratio2 - ratio1) / (2 * n ** 3 - 2 * n ** 2) * (target - 2 * n ** 2)
    assert col(row, "arith_intensity_curve_0") == pytest.approx(slog(expect), rel=1e-5)
    assert col(row, "arith_intensity_curve_9") == pytest.approx(slog(ratio2), rel=1e-5)
    curve = row[COL["arith_intensity_curve_0"]:COL["arith_intensity_curve_9"] + 1]
    assert (np.diff(curve) >= -1e-6).all() and curve[-1] > curve[0]


def test_copy_has_no_arith_intensity():
    A = te.placeholder((64, 64), "float32", name="A")
    B = te.compute((64, 64), lambda i, j: A[j, i], name="B")
    f = extract_features(wb.IRModule({"main": te.create_prim_func([A, B])}))[0]
    curve = f[COL["arith_intensity_curve_0"]:COL["arith_intensity_curve_9"] + 1]
    assert (curve == 0).all() and col(f, "float_add_sub") == 0


# ---- features respond to schedule changes ----------------------------------------------------

def test_vectorize_sets_vector_features():
    sch = tiled_matmul(cache=False)
    before = extract_features(sch.mod)[0]
    assert col(before, "vec_type.kPosNone") == 1 and col(before, "vec_num") == 0
    j2 = sch.get_loops(sch.get_block("C"))[-1]
    sch.vectorize(j2)
    after = extract_features(sch.mod)[0]
    assert col(after, "vec_num") == pytest.approx(1.0)
    assert col(after, "vec_prod") == pytest.approx(slog(16))
    assert col(after, "vec_len") == pytest.approx(slog(16))
    assert col(after, "vec_type.kPosMixed") == 1 and col(after, "vec_type.kPosNone") == 0
    assert col(after, "parallel_type.kPosNone") == 1


def test_parallel_and_auto_unroll_set_features():
    sch = tiled_matmul(cache=False)
    loops = sch.get_loops(sch.get_block("C"))
    sch.parallel(loops[0])
    sch.annotate(loops[0], "pragma_auto_unroll_max_step", 64)
    row = extract_features(sch.mod)[0]
    assert col(row, "parallel_num") == pytest.approx(1.0)
    assert col(row, "parallel_len") == pytest.approx(slog(128 // 32))
    assert col(row, "parallel_type.kPosMixed") == 1
    assert col(row, "auto_unroll_max_step") == pytest.approx(slog(64))
    sch.unroll(loops[-1])
    row = extract_features(sch.mod)[0]
    assert col(row, "unroll_num") == pytest.approx(1.0)
    assert col(row, "unroll_len") == pytest.approx(slog(16))


def test_cache_write_tile_changes_allocation_features():
    plain = extract_features(tiled_matmul(cache=False).mod)
    sch = tiled_matmul(cache=True)
    f = extract_features(sch.mod)
    info = describe_rows(sch.mod)
    assert [r.stored for r in info] == ["C_local", "C"] and plain.shape[0] == 1
    tile = f[0]
    # C_local shrank to its 4 x 16 tile, allocated inside i_0, j_0, i_1, j_1 (4*2*8*4).
    outer = 4 * 2 * 8 * 4
    assert col(tile, "alloc_size") == pytest.approx(slog(4 * 16 * 4))
    assert col(tile, "alloc_outer_prod") == pytest.approx(slog(outer))
    assert col(tile, "alloc_prod") == pytest.approx(slog(4 * 16 * outer))
    assert col(tile, "alloc_inner_prod") == pytest.approx(slog(128 ** 3 / outer))
    assert col(plain[0], "alloc_size") == pytest.approx(slog(128 * 128 * 4))
    # The write-back reads the re-based tile C_local[ax0, ax1]: j_1 (extent 4) is the first
    # loop its indices do not use.
    assert buffer_col(sch.mod, 1, "C_local", "reuse_type.kLoopMultipleRead") == 1
    assert buffer_col(sch.mod, 1, "C_local", "reuse_ct") == pytest.approx(slog(4))
    assert buffer_col(sch.mod, 1, "C_local", "reuse_dis_iter") == pytest.approx(slog(4 * 16))
    assert col(f[1], "float_add_sub") == 0 and col(f[1], "outer_prod") == pytest.approx(
        slog(128 * 128))


def test_serial_reuse_between_statements():
    # for i: (for j: B[i, j] = A[i, j] + 1), (for j: C[i, j] = B[i, j] * 2), B a parameter.
    n = 16
    A, B, C = (tir.decl_buffer((n, n), "float32", name) for name in "ABC")
    i, j1, j2 = tir.Var("i"), tir.Var("j1"), tir.Var("j2")
    zero, ext = tir.const(0), tir.const(n)
    body = S.For(i, zero, ext, "serial", S.SeqStmt((
        S.For(j1, zero, ext, "serial", S.BufferStore(B, A[i, j1] + 1.0, (i, j1))),
        S.For(j2, zero, ext, "serial", S.BufferStore(C, B[i, j2] * 2.0, (i, j2))))))
    mod = wb.IRModule({"main": tir.prim_func([A, B, C], body)})
    assert [r.stored for r in describe_rows(mod)] == ["B", "C"]
    # Under loop i, B was touched by both statements: serial reuse, count 1, distance
    # min(numel) / extent iterations and all bytes under i (A, B twice, C: 4 rows) / extent.
    assert buffer_col(mod, 1, "B", "reuse_type.kSerialMultipleReadWrite") == 1
    assert buffer_col(mod, 1, "B", "reuse_ct") == pytest.approx(slog(1))
    assert buffer_col(mod, 1, "B", "reuse_dis_iter") == pytest.approx(slog(n * n / n))
    assert buffer_col(mod, 1, "B", "reuse_dis_bytes") == pytest.approx(slog(4 * n * n * 4 / n))
    assert buffer_col(mod, 0, "B", "reuse_type.kNoReuse") == 1


def test_innermost_stride_of_B_follows_loop_order():
    j_inner = tiled_matmul(cache=False, inner="j").mod
    k_inner = tiled_matmul(cache=False, inner="k").mod
    # j_2 innermost: B[k, j] moves by one element; k_1 innermost: by a row of 128.
    assert buffer_col(j_inner, 0, "B", "stride") == pytest.approx(slog(1))
    assert buffer_col(k_inner, 0, "B", "stride") == pytest.approx(slog(128))
    assert buffer_col(k_inner, 0, "A", "stride") == pytest.approx(slog(1))
    assert buffer_col(j_inner, 0, "A", "stride") == 0  # j_2 does not move A


def test_tiled_matmul_index_arithmetic_counts():
    # After lowering, A[i_0*32 + i_1*4 + i_2, k_0*4 + k_1] * B[k_0*4 + k_1, j_0*64 +
    # j_1*16 + j_2] + C[..] (C_local's rebased indices are bare loop vars): int adds 2+1+1+2 =
    # 6 and int muls 2+1+1+2 = 6 per iteration.
    sch = tiled_matmul(cache=True)
    row = extract_features(sch.mod)[0]
    assert col(row, "int_add_sub") == pytest.approx(slog(6 * 128 ** 3))
    assert col(row, "int_mul") == pytest.approx(slog(6 * 128 ** 3))
    assert col(row, "float_add_sub") == pytest.approx(slog(128 ** 3))


def test_softmax_counts_math_calls():
    f = extract_features(softmax())
    info = describe_rows(softmax())
    assert len(info) == 4
    by_buffer = {r.stored: f[k] for k, r in enumerate(info)}
    exp_row = next(v for name, v in by_buffer.items() if name.endswith("exp"))
    assert col(exp_row, "float_math_func") == pytest.approx(slog(32 * 64))
    max_row = next(v for name, v in by_buffer.items() if name.endswith("maxelem"))
    assert col(max_row, "float_cmp") == pytest.approx(slog(32 * 64))


# ---- lowering for features ---------------------------------------------------------------------

def test_fast_compaction_matches_the_pipeline_pass():
    official = tuple(Pass(p.name, compact_buffer_allocation) if p.fn is compact_for_features
                     else p for p in FEATURE_PASSES)
    sch = tiled_matmul(cache=True)
    sch2 = Schedule(conv2d())
    blk = sch2.get_block("conv2d_nchw")
    loops = sch2.get_loops(blk)
    sch2.compute_at(sch2.get_block("pad_temp"), loops[1])
    sch2.cache_write(blk, 0, "global")
    for mod in (sch.mod, sch2.mod):
        assert structural_equal(lower(mod, passes=FEATURE_PASSES), lower(mod, passes=official))


def test_unit_loops_are_dropped_before_extraction():
    sch = Schedule(matmul(32))
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, [1, None])  # a unit outer loop: TVM removes it before extraction
    row = extract_features(sch.mod)[0]
    assert col(row, "num_loops") == pytest.approx(slog(3))
