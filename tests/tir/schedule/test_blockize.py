"""blockize: IR (golden text), numerics against numpy, trace replay, errors."""
import numpy as np
import pytest
from reduction_workloads import (
    assert_schedule_error, check_numerics, elementwise, matmul, ref_matmul, two_stages,
)
from sched_workloads import run_and_compare

from workbench import te
from workbench.tir.schedule import Schedule

ELEMENTWISE_BLOCKIZE_SPLIT = '''\
@T.prim_func
def main(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    for i_0 in range(4):
        with T.block("B_o"):
            v_i_o = T.axis.spatial(4, i_0)
            v_j_o = T.axis.spatial(1, 0)
            T.reads(A[v_i_o * 4:v_i_o * 4 + 4, 0:8])
            T.writes(B[v_i_o * 4:v_i_o * 4 + 4, 0:8])
            for i_1, j in T.grid(4, 8):
                with T.block("B"):
                    v_i_i, v_j_i = T.axis.remap("SS", [i_1, j])
                    T.reads(A[v_i_o * 4 + v_i_i, v_j_i])
                    T.writes(B[v_i_o * 4 + v_i_i, v_j_i])
                    B[v_i_o * 4 + v_i_i, v_j_i] = A[v_i_o * 4 + v_i_i, v_j_i] * T.float32(2)'''


def test_blockize_inner_loop_of_a_split():
    f = elementwise()
    sch = Schedule(f)
    b = sch.get_block("B")
    i, _ = sch.get_loops(b)
    _, i1 = sch.split(i, [4, 4])
    o = sch.blockize(i1)
    assert sch.mod["main"].script() == ELEMENTWISE_BLOCKIZE_SPLIT
    assert sch.get(o).name_hint == "B_o"
    # The inner block's handle and the loops inside stay valid.
    assert [sch.get(lp).loop_var.name for lp in sch.get_loops(b)] == ["i_1", "j"]
    assert sch.get(i1).loop_var.name == "i_1"
    check_numerics(sch, f, lambda a: a * 2)


ELEMENTWISE_BLOCKIZE_INNERMOST = '''\
@T.prim_func
def main(A: T.Buffer((16, 8), "float32"), B: T.Buffer((16, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    for i in range(16):
        with T.block("B_o"):
            v_i_o = T.axis.spatial(16, i)
            v_j_o = T.axis.spatial(1, 0)
            T.reads(A[v_i_o, 0:8])
            T.writes(B[v_i_o, 0:8])
            for j in range(8):
                with T.block("B"):
                    v_j_i = T.axis.remap("S", [j])
                    T.reads(A[v_i_o, v_j_i])
                    T.writes(B[v_i_o, v_j_i])
                    B[v_i_o, v_j_i] = A[v_i_o, v_j_i] * T.float32(2)'''


def test_blockize_innermost_loop():
    f = elementwise()
    sch = Schedule(f)
    _, j = sch.get_loops(sch.get_block("B"))
    sch.blockize(j)
    assert sch.mod["main"].script() == ELEMENTWISE_BLOCKIZE_INNERMOST
    check_numerics(sch, f, lambda a: a * 2)


def _unit_row():
    A = te.placeholder((1, 8), name="A")
    B = te.compute((1, 8), lambda i, j: A[i, j] * 2.0, name="B")
    return te.create_prim_func([A, B])


@pytest.mark.parametrize("preserve", [True, False])
def test_blockize_preserve_unit_iters(preserve):
    f = _unit_row()
    sch = Schedule(f)
    _, j = sch.get_loops(sch.get_block("B"))
    sch.blockize(j, preserve_unit_iters=preserve)
    text = sch.mod["main"].script()
    if preserve:
        assert "v_i_o = T.axis.spatial(1, i)" in text
        assert "B[v_i_o, v_j_i] = A[v_i_o, v_j_i] * T.float32(2)" in text
    else:
        assert "v_i_o = T.axis.spatial(1, 0)" in text
        assert "B[0, v_j_i] = A[0, v_j_i] * T.float32(2)" in text
    check_numerics(sch, f, lambda a: a * 2)


MATMUL_BLOCKIZE_REDUCTION = '''\
@T.prim_func
def main(A: T.Buffer((8, 16), "float32"), B: T.Buffer((16, 4), "float32"), C: T.Buffer((8, 4), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    for i_0, j, k_0 in T.grid(2, 4, 4):
        with T.block("C_o"):
            v_i_o, v_j_o, v_k_o = T.axis.remap("SSR", [i_0, j, k_0])
            T.reads(A[v_i_o * 4:v_i_o * 4 + 4, v_k_o * 4:v_k_o * 4 + 4], B[v_k_o * 4:v_k_o * 4 + 4, v_j_o])
            T.writes(C[v_i_o * 4:v_i_o * 4 + 4, v_j_o])
            with T.init():
                for i_1 in range(4):
                    with T.block("C_init"):
                        v_i_i_init = T.axis.remap("S", [i_1])
                        T.reads()
                        T.writes(C[v_i_o * 4 + v_i_i_init, v_j_o])
                        C[v_i_o * 4 + v_i_i_init, v_j_o] = T.float32(0)
            for i_1_1, k_1 in T.grid(4, 4):
                with T.block("C"):
                    v_i_i, v_k_i = T.axis.remap("SR", [i_1_1, k_1])
                    T.reads(C[v_i_o * 4 + v_i_i, v_j_o], A[v_i_o * 4 + v_i_i, v_k_o * 4 + v_k_i], B[v_k_o * 4 + v_k_i, v_j_o])
                    T.writes(C[v_i_o * 4 + v_i_i, v_j_o])
                    C[v_i_o * 4 + v_i_i, v_j_o] = C[v_i_o * 4 + v_i_i, v_j_o] + A[v_i_o * 4 + v_i_i, v_k_o * 4 + v_k_i] * B[v_k_o * 4 + v_k_i, v_j_o]'''

MATMUL_BLOCKIZED_DECOMPOSED = '''\
@T.prim_func
def main(A: T.Buffer((8, 16), "float32"), B: T.Buffer((16, 4), "float32"), C: T.Buffer((8, 4), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    for i_0_init, j_init in T.grid(2, 4):
        with T.block("C_o_init"):
            v_i_o, v_j_o = T.axis.remap("SS", [i_0_init, j_init])
            T.reads()
            T.writes(C[v_i_o * 4:v_i_o * 4 + 4, v_j_o])
            for i_1 in range(4):
                with T.block("C_init"):
                    v_i_i_init = T.axis.remap("S", [i_1])
                    T.reads()
                    T.writes(C[v_i_o * 4 + v_i_i_init, v_j_o])
                    C[v_i_o * 4 + v_i_i_init, v_j_o] = T.float32(0)
    for i_0, j, k_0 in T.grid(2, 4, 4):
        with T.block("C_o_update"):
            v_i_o_1, v_j_o_1, v_k_o = T.axis.remap("SSR", [i_0, j, k_0])
            T.reads(C[v_i_o_1 * 4:v_i_o_1 * 4 + 4, v_j_o_1], A[v_i_o_1 * 4:v_i_o_1 * 4 + 4, v_k_o * 4:v_k_o * 4 + 4], B[v_k_o * 4:v_k_o * 4 + 4, v_j_o_1])
            T.writes(C[v_i_o_1 * 4:v_i_o_1 * 4 + 4, v_j_o_1])
            for i_1_1, k_1 in T.grid(4, 4):
                with T.block("C"):
                    v_i_i, v_k_i = T.axis.remap("SR", [i_1_1, k_1])
                    T.reads(C[v_i_o_1 * 4 + v_i_i, v_j_o_1], A[v_i_o_1 * 4 + v_i_i, v_k_o * 4 + v_k_i], B[v_k_o * 4 + v_k_i, v_j_o_1])
                    T.writes(C[v_i_o_1 * 4 + v_i_i, v_j_o_1])
                    C[v_i_o_1 * 4 + v_i_i, v_j_o_1] = C[v_i_o_1 * 4 + v_i_i, v_j_o_1] + A[v_i_o_1 * 4 + v_i_i, v_k_o * 4 + v_k_i] * B[v_k_o * 4 + v_k_i, v_j_o_1]'''


def test_blockize_a_reduction_tile_moves_the_init_to_the_outer_block():
    f = matmul()
    sch = Schedule(f)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    i0, i1 = sch.split(i, [2, 4])
    k0, k1 = sch.split(k, [4, 4])
    sch.reorder(i0, j, k0, i1, k1)
    o = sch.blockize(i1)
    assert sch.mod["main"].script() == MATMUL_BLOCKIZE_REDUCTION
    check_numerics(sch, f, ref_matmul)
    # decompose_reduction on the outer block, as TVM's test_reduction_decompose1 does.
    sch.decompose_reduction(o, sch.get_loops(o)[0])
    assert sch.mod["main"].script() == MATMUL_BLOCKIZED_DECOMPOSED
    check_numerics(sch, f, ref_matmul)
    a, b = np.random.rand(8, 16).astype("float32"), np.random.rand(16, 4).astype("float32")
    run_and_compare(sch.mod, ref_matmul, a, b, np.zeros((8, 4), "float32"))


def test_blockize_whole_nest_gives_unit_outer_iters():
    f = matmul()
    sch = Schedule(f)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    sch.blockize(i)
    text = sch.mod["main"].script()
    assert '''    with T.block("C_o"):
        v_i_o = T.axis.spatial(1, 0)
        v_j_o = T.axis.spatial(1, 0)
        v_k_o = T.axis.reduce(1, 0)
        T.reads(A[0:8, 0:16], B[0:16, 0:4])
        T.writes(C[0:8, 0:4])''' in text
    check_numerics(sch, f, ref_matmul)


BLOCKS_UNDER_COMMON_LOOP = '''\
@T.prim_func
def main(A: T.Buffer((8, 4), "float32"), C: T.Buffer((8, 4), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    B = T.alloc_buffer((8, 4))
    for i in range(8):
        with T.block("outer_B_C_"):
            v_i_o = T.axis.spatial(8, i)
            v_j_o = T.axis.spatial(1, 0)
            T.reads(A[v_i_o, 0:4], B[v_i_o, 0:4])
            T.writes(B[v_i_o, 0:4], C[v_i_o, 0:4])
            for ax0 in range(4):
                with T.block("B"):
                    v_j_i = T.axis.remap("S", [ax0])
                    T.reads(A[v_i_o, v_j_i])
                    T.writes(B[v_i_o, v_j_i])
                    B[v_i_o, v_j_i] = A[v_i_o, v_j_i] + T.float32(1)
            for j in range(4):
                with T.block("C"):
                    v_j_i_1 = T.axis.remap("S", [j])
                    T.reads(B[v_i_o, v_j_i_1])
                    T.writes(C[v_i_o, v_j_i_1])
                    C[v_i_o, v_j_i_1] = B[v_i_o, v_j_i_1] * T.float32(3)'''


def test_blockize_a_list_of_blocks_under_a_common_loop():
    f = two_stages()
    sch = Schedule(f)
    b, c = sch.get_block("B"), sch.get_block("C")
    i, _ = sch.get_loops(c)
    sch.compute_at(b, i)
    o = sch.blockize([b, c])
    assert sch.mod["main"].script() == BLOCKS_UNDER_COMMON_LOOP
    assert sch.get(o).name_hint == "outer_B_C_"
    check_numerics(sch, f, lambda a: (a + 1) * 3)


def test_blockize_a_list_of_root_blocks():
    f = two_stages()
    sch = Schedule(f)
    sch.blockize([sch.get_block("B"), sch.get_block("C")], preserve_unit_iters=False)
    text = sch.mod["main"].script()
    assert 'with T.block("outer_B_C_"):' in text
    assert "T.writes(B[0:8, 0:4], C[0:8, 0:4])" in text
    check_numerics(sch, f, lambda a: (a + 1) * 3)


def test_blockize_errors_leave_the_schedule_unchanged():
    f = matmul(m=10)
    sch = Schedule(f)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    _, i1 = sch.split(i, [None, 4])
    # The split's predicate i_0 * 4 + i_1 < 10 mixes the loops outside and inside.
    assert_schedule_error(sch, lambda: sch.blockize(i1), "mixes loops")

    sch = Schedule(f)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    fused = sch.fuse(i, j)
    _, inner = sch.split(fused, [5, 8])
    # v_i = (f0 * 8 + f1) // 4 is not of the form outer * c + inner.
    assert_schedule_error(sch, lambda: sch.blockize(inner), "cannot be divided")

    sch = Schedule(f)
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    sch.decompose_reduction(c, j)
    assert_schedule_error(sch, lambda: sch.blockize(i), "exactly one block")

    sch = Schedule(elementwise())
    b = sch.get_block("B")
    _, j = sch.get_loops(b)
    sch.blockize(j)
    assert_schedule_error(sch, lambda: sch.blockize(j), "'B_o' already exists")


def test_blockize_blocks_errors():
    f = two_stages()
    sch = Schedule(f)
    b, c = sch.get_block("B"), sch.get_block("C")
    assert_schedule_error(sch, lambda: sch.blockize([b, b]), "listed twice")
    A = te.placeholder((8,), name="A")
    X = te.compute((8,), lambda i: A[i] + 1.0, name="X")
    Y = te.compute((8,), lambda i: X[i] * 2.0, name="Y")
    Z = te.compute((8,), lambda i: Y[i] - 3.0, name="Z")
    three = Schedule(te.create_prim_func([A, Z]))
    x, z = three.get_block("X"), three.get_block("Z")
    assert_schedule_error(three, lambda: three.blockize([x, z]), "must be consecutive")
    i, _ = sch.get_loops(c)
    sch.compute_at(b, i)
    # Blockizing B alone inside loop i works on its own subtree.
    sch.blockize([b])
    check_numerics(sch, f, lambda a: (a + 1) * 3)
