"""split / fuse / reorder / add_unit_loop / loop kinds / annotations: IR, replay, errors."""
import numpy as np
import pytest
from sched_workloads import matmul, matmul_relu, run_and_compare

from workbench.ir import structural_equal
from workbench.tir.schedule import Schedule, ScheduleError
from workbench.tir.schedule.testing import verify_trace_roundtrip


def _ab(m=16, n=24, k=8):
    return (np.random.rand(m, k).astype("float32"), np.random.rand(k, n).astype("float32"),
            np.zeros((m, n), "float32"))


def test_split_reorder_fuse_ir():
    f = matmul()
    sch = Schedule(f)
    b = sch.get_block("C")
    i, j, k = sch.get_loops(b)
    i0, i1 = sch.split(i, factors=[None, 4])
    j0, j1 = sch.split(j, factors=[3, 8])
    sch.reorder(i0, j0, k, i1, j1)
    fused = sch.fuse(i0, j0)
    sch.parallel(fused)
    sch.vectorize(j1)
    assert sch.mod["main"].script() == '''\
@T.prim_func
def main(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8, 24), "float32"), C: T.Buffer((16, 24), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    for i_0_j_0_fused in T.parallel(12):
        for k, i_1 in T.grid(8, 4):
            for j_1 in T.vectorized(8):
                with T.block("C"):
                    v_i = T.axis.spatial(16, i_0_j_0_fused // 3 * 4 + i_1)
                    v_j = T.axis.spatial(24, i_0_j_0_fused % 3 * 8 + j_1)
                    v_k = T.axis.reduce(8, k)
                    T.reads(A[v_i, v_k], B[v_k, v_j])
                    T.writes(C[v_i, v_j])
                    with T.init():
                        C[v_i, v_j] = T.float32(0)
                    C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]'''
    verify_trace_roundtrip(sch, f)
    run_and_compare(sch.mod, lambda a, b: a @ b, *_ab())


def test_split_with_predicate_when_factors_do_not_divide():
    f = matmul(m=10)
    sch = Schedule(f)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.split(i, factors=[None, 4])
    text = sch.mod["main"].script()
    assert "for i_0, i_1 in T.grid(3, 4)" in text.replace("\n", " ") or "T.grid(3, 4" in text
    assert "T.where(i_0 * 4 + i_1 < 10)" in text
    verify_trace_roundtrip(sch, f)
    run_and_compare(sch.mod, lambda a, b: a @ b, *_ab(m=10))


def test_sampled_split_replays_and_resamples():
    f = matmul(m=64)
    sch = Schedule(f, seed=7)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    factors = sch.sample_perfect_tile(i, n=3, max_innermost_factor=8)
    sch.split(i, factors=factors)
    values = [sch.get(v) for v in factors]
    assert np.prod(values) == 64 and values[-1] <= 8
    replayed = verify_trace_roundtrip(sch, f)
    assert structural_equal(replayed.mod, sch.mod)
    # Dropping the decisions and replaying samples anew, still a perfect tile.
    seen = set()
    for seed in range(8):
        fresh = Schedule(f, seed=seed)
        sch.trace.apply_to_schedule(fresh, remove_postproc=False,
                                    decision_provider=lambda inst, i, a, d: None)
        dec = [d for d in fresh.trace.decisions.values()][0]
        assert np.prod(dec) == 64 and dec[-1] <= 8
        seen.add(tuple(dec))
    assert len(seen) > 1


def test_with_decision_changes_only_that_choice():
    f = matmul(m=64)
    sch = Schedule(f, seed=1)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    tile = sch.sample_perfect_tile(i, n=2, max_innermost_factor=64)
    sch.split(i, factors=tile)
    inst = [x for x in sch.trace.insts if x.kind.name == "SamplePerfectTile"][0]
    new_trace = sch.trace.with_decision(inst, [4, 16], remove_postproc=True)
    fresh = Schedule(f)
    new_trace.apply_to_schedule(fresh, remove_postproc=False)
    assert "T.grid(4, 16" in fresh.mod["main"].script()


def test_add_unit_loop_and_annotations():
    f = matmul_relu()
    sch = Schedule(f)
    d = sch.get_block("D")
    u = sch.add_unit_loop(d)
    sch.annotate(u, "pragma_auto_unroll_max_step", 16)
    sch.annotate(d, "meta_schedule.tiling_structure", "SSRSRS")
    v = sch.sample_categorical([0, 16, 64], [0.2, 0.3, 0.5], decision=2)
    sch.annotate(sch.get_block("C"), "meta_schedule.unroll_explicit", v)
    text = sch.mod["main"].script()
    assert 'annotations={"pragma_auto_unroll_max_step": 16}' in text
    assert '"meta_schedule.unroll_explicit": 64' in text
    sch.unannotate(d, "meta_schedule.tiling_structure")
    assert "tiling_structure" not in sch.mod["main"].script()
    verify_trace_roundtrip(sch, f)
    run_and_compare(sch.mod, lambda a, b: np.maximum(a @ b, 0), *_ab())


@pytest.mark.parametrize("case", ["parallel_reduction", "vectorize_reduction", "fuse_not_nested",
                                  "reorder_other_chain", "split_too_small", "two_nones",
                                  "stale_loop", "unannotate_missing", "bad_block"])
def test_illegal_requests_raise_and_change_nothing(case):
    f = matmul_relu()
    sch = Schedule(f)
    b = sch.get_block("C")
    i, j, k = sch.get_loops(b)
    before = sch.mod
    n_insts = len(sch.trace)
    with pytest.raises(ScheduleError) as info:
        if case == "parallel_reduction":
            sch.parallel(k)
        elif case == "vectorize_reduction":
            sch.vectorize(k)
        elif case == "fuse_not_nested":
            sch.fuse(i, k)
        elif case == "reorder_other_chain":
            di, _ = sch.get_loops(sch.get_block("D"))
            n_insts = len(sch.trace)
            sch.reorder(i, di)
        elif case == "split_too_small":
            sch.split(i, factors=[2, 3])
        elif case == "two_nones":
            sch.split(i, factors=[None, None])
        elif case == "stale_loop":
            sch.split(i, factors=[None, 4])
            before, n_insts = sch.mod, len(sch.trace)
            sch.split(i, factors=[2, 8])
        elif case == "unannotate_missing":
            sch.unannotate(b, "nope")
        elif case == "bad_block":
            sch.get_block("nope")
    assert info.value.primitive
    assert structural_equal(sch.mod, before)
    assert len(sch.trace) == n_insts


def test_lookups():
    sch = Schedule(matmul_relu())
    c, d = sch.get_block("C"), sch.get_block("D")
    assert [sch.get(x).name_hint for x in sch.get_consumers(c)] == ["D"]
    assert [sch.get(x).name_hint for x in sch.get_producers(d)] == ["C"]
    root = sch.get_block("root")
    assert [sch.get(x).name_hint for x in sch.get_child_blocks(root)] == ["C", "D"]
    i, _, _ = sch.get_loops(c)
    assert [sch.get(x).name_hint for x in sch.get_child_blocks(i)] == ["C"]
    assert sch.get(i).extent.value == 16
    assert sch.get_sref(c).stmt is sch.get(c)


def test_copy_is_independent():
    f = matmul()
    sch = Schedule(f, seed=3)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    other = sch.copy()
    other.split(i, factors=[None, 2])
    assert len(sch.trace) == 2 and len(other.trace) == 3
    assert not structural_equal(sch.mod, other.mod)
    assert "Schedule" in repr(sch) and "<b>Trace</b>" in sch._repr_html_()


def test_fuse_mixed_index_dtypes_uses_the_widest():
    """An int32 loop around an int64 one (legalized reshapes mix them): the fused loop is
    int64 and the int32 variable is a cast of its part, so the IR verifies and runs."""
    import workbench as wb
    from workbench import tir
    from workbench.tir import stmt as S
    A = tir.decl_buffer((6, 8), "float32", "A")
    B = tir.decl_buffer((6, 8), "float32", "B")
    i, j = tir.Var("i", "int32"), tir.Var("j", "int64")
    vi, vj = tir.Var("vi", "int32"), tir.Var("vj", "int64")
    block = S.Block((S.IterVar(tir.Range(tir.const(0), tir.const(6)), vi, 0),
                     S.IterVar(tir.Range(tir.const(0, "int64"), tir.const(8, "int64")), vj, 0)),
                    (tir.BufferRegion(A, (tir.Range(vi, tir.const(1)),
                                          tir.Range(vj, tir.const(1, "int64")))),),
                    (tir.BufferRegion(B, (tir.Range(vi, tir.const(1)),
                                          tir.Range(vj, tir.const(1, "int64")))),),
                    "B", S.BufferStore(B, A[vi, vj] * 2.0, (vi, vj)))
    body = S.For(i, tir.const(0), tir.const(6), "serial",
                 S.For(j, tir.const(0, "int64"), tir.const(8, "int64"), "serial",
                       S.BlockRealize((i, j), tir.const(True), block)))
    root = S.BlockRealize((), tir.const(True), S.Block((), (), (), "root", body))
    func = tir.prim_func([A, B], root)
    sch = Schedule(func)
    fused = sch.fuse(*sch.get_loops(sch.get_block("B")))
    assert sch.get(fused).loop_var.dtype == "int64"
    verify_trace_roundtrip(sch, func)
    a = np.random.rand(6, 8).astype("float32")
    b = wb.nd.empty((6, 8), "float32")
    wb.build(sch.mod)["main"](wb.nd.array(a), b)
    np.testing.assert_allclose(b.numpy(), a * 2, rtol=1e-6)
