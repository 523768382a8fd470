"""decompose_reduction: IR (golden text), numerics against numpy, trace replay, errors."""
import numpy as np
from reduction_workloads import (
    assert_schedule_error, check_numerics, elementwise, matmul, ref_matmul, ref_softmax_like,
    softmax_like, sum_2axis,
)
from sched_workloads import run_and_compare

from workbench import te
from workbench.tir.schedule import Schedule

MATMUL_DECOMPOSED_AT_I = '''\
@T.prim_func
def main(A: T.Buffer((8, 16), "float32"), B: T.Buffer((16, 4), "float32"), C: T.Buffer((8, 4), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    for i_init, j_init in T.grid(8, 4):
        with T.block("C_init"):
            v_i, v_j = T.axis.remap("SS", [i_init, j_init])
            T.reads()
            T.writes(C[v_i, v_j])
            C[v_i, v_j] = T.float32(0)
    for i, j, k in T.grid(8, 4, 16):
        with T.block("C_update"):
            v_i_1, v_j_1, v_k = T.axis.remap("SSR", [i, j, k])
            T.reads(C[v_i_1, v_j_1], A[v_i_1, v_k], B[v_k, v_j_1])
            T.writes(C[v_i_1, v_j_1])
            C[v_i_1, v_j_1] = C[v_i_1, v_j_1] + A[v_i_1, v_k] * B[v_k, v_j_1]'''


def test_decompose_matmul_at_outermost_loop():
    f = matmul()
    sch = Schedule(f)
    c = sch.get_block("C")
    i, _, _ = sch.get_loops(c)
    init = sch.decompose_reduction(c, i)
    assert sch.mod["main"].script() == MATMUL_DECOMPOSED_AT_I
    assert sch.get(init).name_hint == "C_init"
    # The handle follows the renamed block, as TVM's sref does.
    assert sch.get(c).name_hint == "C_update"
    assert sch.get(c) is sch.get(sch.get_block("C_update"))
    check_numerics(sch, f, ref_matmul)


MATMUL_DECOMPOSED_UNDER_SPLIT = '''\
@T.prim_func
def main(A: T.Buffer((10, 16), "float32"), B: T.Buffer((16, 4), "float32"), C: T.Buffer((10, 4), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    for i_0 in range(3):
        for i_1_init, j_init in T.grid(4, 4):
            with T.block("C_init"):
                v_i = T.axis.spatial(10, i_0 * 4 + i_1_init)
                v_j = T.axis.spatial(4, j_init)
                T.where(i_0 * 4 + i_1_init < 10)
                T.reads()
                T.writes(C[v_i, v_j])
                C[v_i, v_j] = T.float32(0)
        for i_1, j, k_0, k_1 in T.grid(4, 4, 4, 4):
            with T.block("C_update"):
                v_i_1 = T.axis.spatial(10, i_0 * 4 + i_1)
                v_j_1 = T.axis.spatial(4, j)
                v_k = T.axis.reduce(16, k_0 * 4 + k_1)
                T.where(i_0 * 4 + i_1 < 10)
                T.reads(C[v_i_1, v_j_1], A[v_i_1, v_k], B[v_k, v_j_1])
                T.writes(C[v_i_1, v_j_1])
                C[v_i_1, v_j_1] = C[v_i_1, v_j_1] + A[v_i_1, v_k] * B[v_k, v_j_1]'''


def test_decompose_under_split_keeps_the_predicate_of_recreated_loops():
    f = matmul(m=10)
    sch = Schedule(f)
    c = sch.get_block("C")
    i, _, k = sch.get_loops(c)
    _, i1 = sch.split(i, [None, 4])
    sch.split(k, [4, 4])
    sch.decompose_reduction(c, i1)
    assert sch.mod["main"].script() == MATMUL_DECOMPOSED_UNDER_SPLIT
    check_numerics(sch, f, ref_matmul)


SOFTMAX_MAX_DECOMPOSED = '''\
@T.prim_func
def main(A: T.Buffer((4, 16), "float32"), E: T.Buffer((4, 16), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    M = T.alloc_buffer((4,))
    for i in range(4):
        with T.block("M_init"):
            v_i = T.axis.remap("S", [i])
            T.reads()
            T.writes(M[v_i])
            M[v_i] = T.float32(-3.4028234663852886e+38)
        for k in range(16):
            with T.block("M_update"):
                v_i_1, v_k = T.axis.remap("SR", [i, k])
                T.reads(M[v_i_1], A[v_i_1, v_k])
                T.writes(M[v_i_1])
                M[v_i_1] = T.max(M[v_i_1], A[v_i_1, v_k])
    for i_1, j in T.grid(4, 16):
        with T.block("E"):
            v_i_2, v_j = T.axis.remap("SS", [i_1, j])
            T.reads(A[v_i_2, v_j], M[v_i_2])
            T.writes(E[v_i_2, v_j])
            E[v_i_2, v_j] = T.exp(A[v_i_2, v_j] - M[v_i_2])'''


def test_decompose_row_max_at_reduction_loop():
    f = softmax_like()
    sch = Schedule(f)
    m = sch.get_block("M")
    _, k = sch.get_loops(m)
    sch.decompose_reduction(m, k)
    assert sch.mod["main"].script() == SOFTMAX_MAX_DECOMPOSED
    check_numerics(sch, f, ref_softmax_like)


SUM_2AXIS_DECOMPOSED = '''\
@T.prim_func
def main(A: T.Buffer((4, 6, 8), "float32"), B: T.Buffer((4,), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    for i_init in range(4):
        with T.block("B_init"):
            v_i = T.axis.remap("S", [i_init])
            T.reads()
            T.writes(B[v_i])
            B[v_i] = T.float32(0)
    for j, i, k in T.grid(6, 4, 8):
        with T.block("B_update"):
            v_i_1, v_j, v_k = T.axis.remap("SRR", [i, j, k])
            T.reads(B[v_i_1], A[v_i_1, v_j, v_k])
            T.writes(B[v_i_1])
            B[v_i_1] = B[v_i_1] + A[v_i_1, v_j, v_k]'''


def test_decompose_two_axis_reduction_with_reduction_loop_outermost():
    f = sum_2axis()
    sch = Schedule(f)
    b = sch.get_block("B")
    i, j, k = sch.get_loops(b)
    sch.reorder(j, i, k)
    # i is inside the reduction loop j: the init would run once per j.
    assert_schedule_error(sch, lambda: sch.decompose_reduction(b, i), "depends on a loop above")
    sch.decompose_reduction(b, j)
    assert sch.mod["main"].script() == SUM_2AXIS_DECOMPOSED
    check_numerics(sch, f, lambda a: a.sum(axis=(1, 2)))


def test_decompose_accepts_a_block_name_and_compiles():
    f = matmul()
    sch = Schedule(f)
    _, j, _ = sch.get_loops(sch.get_block("C"))
    sch.decompose_reduction("C", j)
    assert [b.name_hint for b in map(sch.get, sch.get_child_blocks(
        sch.get_block("root")))] == ["C_init", "C_update"]
    check_numerics(sch, f, ref_matmul)
    a, b = np.random.rand(8, 16).astype("float32"), np.random.rand(16, 4).astype("float32")
    run_and_compare(sch.mod, ref_matmul, a, b, np.zeros((8, 4), "float32"))


def test_decompose_errors_leave_the_schedule_unchanged():
    f = matmul()
    sch = Schedule(f)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.reorder(i, k, j)
    # j is inside the reduction loop k (TVM's "loop height" error).
    assert_schedule_error(sch, lambda: sch.decompose_reduction(c, j), "depends on a loop above")
    sch.decompose_reduction(c, k)
    # The update block has no init any more.
    assert_schedule_error(sch, lambda: sch.decompose_reduction(c, i), "has no init")
    assert_schedule_error(sch, lambda: sch.decompose_reduction("nope", j), "no block")

    g = elementwise()
    sch = Schedule(g)
    b = sch.get_block("B")
    outer = sch.get_loops(b)[0]
    assert_schedule_error(sch, lambda: sch.decompose_reduction(b, outer), "not a reduction block")


def test_decompose_needs_an_ancestor_loop():
    f = softmax_like()
    sch = Schedule(f)
    m, e = sch.get_block("M"), sch.get_block("E")
    e_outer = sch.get_loops(e)[0]
    assert_schedule_error(sch, lambda: sch.decompose_reduction(m, e_outer), "not an ancestor")


def test_decompose_refuses_a_taken_name():
    A = te.placeholder((4, 8), name="A")
    r = te.reduce_axis((0, 8), name="k")
    B = te.compute((4,), lambda i: te.sum(A[i, r], axis=r), name="B")
    s = te.reduce_axis((0, 4), name="s")
    U = te.compute((1,), lambda i: te.sum(B[s], axis=s), name="B_update")
    f = te.create_prim_func([A, U])
    sch = Schedule(f)
    b = sch.get_block("B")
    outer = sch.get_loops(b)[0]
    assert_schedule_error(sch, lambda: sch.decompose_reduction(b, outer),
                          "'B_update' already exists")
