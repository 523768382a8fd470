"""rfactor: IR (golden text), reducers, numerics against numpy, trace replay, errors."""
import numpy as np
import pytest
from reduction_workloads import (
    assert_schedule_error, check_numerics, elementwise, inputs_for, matmul, ref_matmul,
    ref_softmax_like, row_reduce, softmax_like, sum_2axis,
)
from sched_workloads import run_and_compare

import workbench as wb
from workbench import te, tir
from workbench.tir.schedule import Schedule
from workbench.tir.schedule.primitive import reducer as reducer_mod
from workbench.tir.schedule.primitive.reducer import register_reducer
from workbench.tir.schedule.testing import verify_trace_roundtrip

MATMUL_RF_INNER = '''\
@T.prim_func
def main(A: T.Buffer((8, 16), "float32"), B: T.Buffer((16, 4), "float32"), C: T.Buffer((8, 4), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    C_rf = T.alloc_buffer((4, 8, 4))
    for i, j, k_0, k_1 in T.grid(8, 4, 4, 4):
        with T.block("C_rf"):
            vk_1, v_i, v_j, vk_0 = T.axis.remap("SSSR", [k_1, i, j, k_0])
            T.reads(A[v_i, vk_0 * 4 + vk_1], B[vk_0 * 4 + vk_1, v_j])
            T.writes(C_rf[vk_1, v_i, v_j])
            with T.init():
                C_rf[vk_1, v_i, v_j] = T.float32(0)
            C_rf[vk_1, v_i, v_j] = C_rf[vk_1, v_i, v_j] + A[v_i, vk_0 * 4 + vk_1] * B[vk_0 * 4 + vk_1, v_j]
    for i_1, j_1, k_1_1 in T.grid(8, 4, 4):
        with T.block("C"):
            vk_1_1, v_i_1, v_j_1 = T.axis.remap("RSS", [k_1_1, i_1, j_1])
            T.reads(C_rf[vk_1_1, v_i_1, v_j_1])
            T.writes(C[v_i_1, v_j_1])
            with T.init():
                C[v_i_1, v_j_1] = T.float32(0)
            C[v_i_1, v_j_1] = C[v_i_1, v_j_1] + C_rf[vk_1_1, v_i_1, v_j_1]'''


def test_rfactor_matmul_inner_split_loop():
    f = matmul()
    sch = Schedule(f)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    _, k1 = sch.split(k, [4, 4])
    rf = sch.rfactor(k1, 0)
    assert sch.mod["main"].script() == MATMUL_RF_INNER
    assert sch.get(rf).name_hint == "C_rf"
    # The spatial loops and the rfactor loop stay with the write-back block.
    assert [sch.get(lp).loop_var for lp in (i, j, k1)] == \
        [lp.loop_var for lp in map(sch.get, sch.get_loops(c))]
    check_numerics(sch, f, ref_matmul)


ROW_SUM_RF_OUTER_LAST_AXIS = '''\
@T.prim_func
def main(A: T.Buffer((8, 16), "float32"), B: T.Buffer((8,), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    B_rf = T.alloc_buffer((8, 4))
    for i, k_0, k_1 in T.grid(8, 4, 4):
        with T.block("B_rf"):
            vk_0, v_i, vk_1 = T.axis.remap("SSR", [k_0, i, k_1])
            T.reads(A[v_i, vk_0 * 4 + vk_1])
            T.writes(B_rf[v_i, vk_0])
            with T.init():
                B_rf[v_i, vk_0] = T.float32(0)
            B_rf[v_i, vk_0] = B_rf[v_i, vk_0] + A[v_i, vk_0 * 4 + vk_1]
    for i_1, k_0_1 in T.grid(8, 4):
        with T.block("B"):
            vk_0_1, v_i_1 = T.axis.remap("RS", [k_0_1, i_1])
            T.reads(B_rf[v_i_1, vk_0_1])
            T.writes(B[v_i_1])
            with T.init():
                B[v_i_1] = T.float32(0)
            B[v_i_1] = B[v_i_1] + B_rf[v_i_1, vk_0_1]'''


def test_rfactor_row_sum_outer_loop_negative_factor_axis():
    f = row_reduce()
    sch = Schedule(f)
    b = sch.get_block("B")
    _, k = sch.get_loops(b)
    k0, _ = sch.split(k, [None, 4])
    sch.rfactor(k0, -1)
    assert sch.mod["main"].script() == ROW_SUM_RF_OUTER_LAST_AXIS
    check_numerics(sch, f, lambda a: a.sum(axis=1))


SUM_2AXIS_RF = '''\
@T.prim_func
def main(A: T.Buffer((4, 6, 8), "float32"), B: T.Buffer((4,), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    B_rf = T.alloc_buffer((4, 8))
    for i, j, k in T.grid(4, 6, 8):
        with T.block("B_rf"):
            vk, v_i, v_j = T.axis.remap("SSR", [k, i, j])
            T.reads(A[v_i, v_j, vk])
            T.writes(B_rf[v_i, vk])
            with T.init():
                B_rf[v_i, vk] = T.float32(0)
            B_rf[v_i, vk] = B_rf[v_i, vk] + A[v_i, v_j, vk]
    for i_1, k_1 in T.grid(4, 8):
        with T.block("B"):
            vk_1, v_i_1 = T.axis.remap("RS", [k_1, i_1])
            T.reads(B_rf[v_i_1, vk_1])
            T.writes(B[v_i_1])
            with T.init():
                B[v_i_1] = T.float32(0)
            B[v_i_1] = B[v_i_1] + B_rf[v_i_1, vk_1]'''


def test_rfactor_one_loop_of_a_two_axis_reduction():
    f = sum_2axis()
    sch = Schedule(f)
    _, _, k = sch.get_loops(sch.get_block("B"))
    sch.rfactor(k, 1)
    assert sch.mod["main"].script() == SUM_2AXIS_RF
    check_numerics(sch, f, lambda a: a.sum(axis=(1, 2)))


SOFTMAX_MAX_RF = '''\
@T.prim_func
def main(A: T.Buffer((4, 16), "float32"), E: T.Buffer((4, 16), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    M = T.alloc_buffer((4,))
    M_rf = T.alloc_buffer((4, 4))
    for i, k_0, k_1 in T.grid(4, 4, 4):
        with T.block("M_rf"):
            vk_1, v_i, vk_0 = T.axis.remap("SSR", [k_1, i, k_0])
            T.reads(A[v_i, vk_0 * 4 + vk_1])
            T.writes(M_rf[vk_1, v_i])
            with T.init():
                M_rf[vk_1, v_i] = T.float32(-3.4028234663852886e+38)
            M_rf[vk_1, v_i] = T.max(M_rf[vk_1, v_i], A[v_i, vk_0 * 4 + vk_1])
    for i_1, k_1_1 in T.grid(4, 4):
        with T.block("M"):
            vk_1_1, v_i_1 = T.axis.remap("RS", [k_1_1, i_1])
            T.reads(M_rf[vk_1_1, v_i_1])
            T.writes(M[v_i_1])
            with T.init():
                M[v_i_1] = T.float32(-3.4028234663852886e+38)
            M[v_i_1] = T.max(M[v_i_1], M_rf[vk_1_1, v_i_1])
    for i_2, j in T.grid(4, 16):
        with T.block("E"):
            v_i_2, v_j = T.axis.remap("SS", [i_2, j])
            T.reads(A[v_i_2, v_j], M[v_i_2])
            T.writes(E[v_i_2, v_j])
            E[v_i_2, v_j] = T.exp(A[v_i_2, v_j] - M[v_i_2])'''


def test_rfactor_softmax_row_max_then_compile():
    f = softmax_like()
    sch = Schedule(f)
    _, k = sch.get_loops(sch.get_block("M"))
    _, k1 = sch.split(k, [4, None])
    sch.rfactor(k1, 0)
    assert sch.mod["main"].script() == SOFTMAX_MAX_RF
    check_numerics(sch, f, ref_softmax_like)
    a = np.random.rand(4, 16).astype("float32")
    run_and_compare(sch.mod, ref_softmax_like, a, np.zeros((4, 16), "float32"))


@pytest.mark.parametrize("reducer,reference", [
    (te.sum, lambda a: a.sum(axis=1)),
    (te.min, lambda a: a.min(axis=1)),
    (te.max, lambda a: a.max(axis=1)),
    (te.comm_reducer(lambda x, y: x * y, lambda t: tir.const(1, t), name="prod"),
     lambda a: a.prod(axis=1)),
    (te.comm_reducer(lambda x, y: x + y, lambda t: tir.const(0, t), name="mysum"),
     lambda a: a.sum(axis=1)),
])
def test_rfactor_recognises_the_basic_reducers(reducer, reference):
    f = row_reduce(reducer)
    sch = Schedule(f)
    b = sch.get_block("B")
    _, k = sch.get_loops(b)
    k0, k1 = sch.split(k, [None, 4])
    rf = sch.rfactor(k0, 0)
    # Compose with decompose_reduction, as the tuner's RewriteReductionBlock does.
    sch.decompose_reduction(rf, sch.get_loops(rf)[0])
    check_numerics(sch, f, reference, rtol=1e-4)


def test_rfactor_with_where_condition():
    f = row_reduce(where=True)
    sch = Schedule(f)
    _, k = sch.get_loops(sch.get_block("B"))
    _, k1 = sch.split(k, [None, 4])
    sch.rfactor(k1, 1)
    check_numerics(sch, f, lambda a: a[:, :13].sum(axis=1))


def test_register_reducer_makes_a_custom_combiner_recognisable(monkeypatch):
    monkeypatch.setattr(reducer_mod, "_REDUCERS", list(reducer_mod._REDUCERS))

    def absmax(x, y):
        return tir.max(tir.abs(x), tir.abs(y))

    f = row_reduce(te.comm_reducer(absmax, lambda t: tir.const(0, t), name="absmax"))
    sch = Schedule(f)
    _, k = sch.get_loops(sch.get_block("B"))
    assert_schedule_error(sch, lambda: sch.rfactor(k, 0), "known commutative reducer")
    register_reducer(absmax, lambda t: tir.const(0, t))
    sch.rfactor(k, 0)
    check_numerics(sch, f, lambda a: np.abs(a).max(axis=1))


def test_rfactor_errors_leave_the_schedule_unchanged():
    f = matmul()
    sch = Schedule(f)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    assert_schedule_error(sch, lambda: sch.rfactor(i, 0), "spatial iter var")
    assert_schedule_error(sch, lambda: sch.rfactor(k, 3), r"factor_axis must be in \[-3, 2\]")
    assert_schedule_error(sch, lambda: sch.rfactor(k, -4), "factor_axis")
    sch.unroll(k)
    assert_schedule_error(sch, lambda: sch.rfactor(k, 0), "must be serial")

    sch = Schedule(f)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.decompose_reduction(c, j)
    assert_schedule_error(sch, lambda: sch.rfactor(i, 0), "exactly one block")
    assert_schedule_error(sch, lambda: sch.rfactor(k, 0), "has no init")

    sch = Schedule(elementwise())
    inner = sch.get_loops(sch.get_block("B"))[1]
    assert_schedule_error(sch, lambda: sch.rfactor(inner, 0), "not a reduction block")


def test_rfactor_refuses_argmax_and_unknown_reducers():
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")

    def fcombine(x, y):
        keep = x[1] >= y[1]
        return tir.select(keep, x[0], y[0]), tir.select(keep, x[1], y[1])

    argmax = te.comm_reducer(fcombine, lambda t0, t1: (tir.const(-1, t0), tir.min_value(t1)),
                             name="argmax")
    idx, val = te.compute((4,), lambda i: argmax((k.var, A[i, k]), axis=k), name="T")
    sch = Schedule(te.create_prim_func([A, idx, val]))
    _, kk = sch.get_loops(sch.get_block("T"))
    assert_schedule_error(sch, lambda: sch.rfactor(kk, 0), "multi-value")

    weird = te.comm_reducer(lambda x, y: x * 2.0 + y, lambda t: tir.const(0, t), name="weird")
    sch = Schedule(row_reduce(weird))
    _, kk = sch.get_loops(sch.get_block("B"))
    assert_schedule_error(sch, lambda: sch.rfactor(kk, 0), "known commutative reducer")


def test_rfactor_reduction_loop_outside_a_spatial_loop():
    f = matmul()
    sch = Schedule(f)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.reorder(i, k, j)
    # A spatial loop under the rfactor loop is fine: a spatial iter var uses it.
    sch.rfactor(k, 0)
    check_numerics(sch, f, ref_matmul)


def test_rfactor_a_separable_two_value_reduction():
    """Layer norm's reducer (sum and sum of squares in one block, values in let bindings):
    each value gets its own rfactor buffer, in one rf block and one write-back block."""
    A = te.placeholder((4, 32), name="A")
    k = te.reduce_axis((0, 32), name="k")
    pair = te.comm_reducer(lambda x, y: (x[0] + y[0], x[1] + y[1]),
                           lambda t0, t1: (tir.const(0, t0), tir.const(0, t1)), name="pair")
    s, ss = te.compute((4,), lambda i: pair((A[i, k], A[i, k] * A[i, k]), axis=k), name="T")
    func = te.create_prim_func([A, s, ss])
    sch = Schedule(func)
    i, kk = sch.get_loops(sch.get_block("T"))
    k0, k1 = sch.split(kk, [None, 8])
    rf = sch.rfactor(k1, 1)
    rf_block = sch.get(rf)
    assert [w.buffer.name for w in rf_block.writes] == ["T_v0_rf", "T_v1_rf"]
    assert [[int(d.value) for d in w.buffer.shape] for w in rf_block.writes] == [[4, 8], [4, 8]]
    verify_trace_roundtrip(sch, func)
    a = np.random.rand(4, 32).astype("float32")
    outs = [np.zeros(4, "float32"), np.zeros(4, "float32")]
    nds = [wb.nd.array(x) for x in (a, *outs)]
    wb.build(sch.mod)["main"](*nds)
    np.testing.assert_allclose(nds[1].numpy(), a.sum(1), rtol=1e-5)
    np.testing.assert_allclose(nds[2].numpy(), (a * a).sum(1), rtol=1e-5)


def test_rfactor_twice_names_the_second_stage_apart_and_stays_right():
    """rfactor of the write-back block again (the fuzzer's property run found it refused as a
    name clash): the second stage and its buffer are ``C_rf_1``; interpreted, lowered and compiled
    results match numpy and the trace replays."""
    f = matmul()
    sch = Schedule(f)
    i, j, k = sch.get_loops(sch.get_block("C"))
    _, k1 = sch.split(k, [None, 4])
    assert sch.get(sch.rfactor(k1, 0)).name_hint == "C_rf"
    last = sch.get_loops(sch.get_block("C"))[-1]
    rf2 = sch.rfactor(last, 0)
    assert sch.get(rf2).name_hint == "C_rf_1"
    names = {b.name for b in sch.mod["main"].body.block.alloc_buffers}
    assert names == {"C_rf", "C_rf_1"}
    check_numerics(sch, f, ref_matmul)  # interpreter, lowered, trace round trip
    run_and_compare(sch.mod, ref_matmul, *inputs_for(f))  # compiled
