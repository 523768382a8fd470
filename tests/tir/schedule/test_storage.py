"""set_scope and storage_align: IR (golden text), lowering with padded strides, numerics
(interpreter and compiled), trace round trips, and refused requests."""
import numpy as np
import pytest
from cache_layout_workloads import (
    assert_refused, assert_script, check_numerics, check_schedule, elementwise_chain, matmul,
    rand, ref_elementwise_chain, ref_matmul,
)

import workbench
from workbench.tir import op
from workbench.tir.schedule import Schedule
from workbench.tir.transform.lower_blocks import aligned_strides

SET_SCOPE = '''\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    B_local = T.alloc_buffer((8, 8), scope="local")
    for i, j in T.grid(8, 8):
        with T.block("B"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(A[v_i, v_j])
            T.writes(B_local[v_i, v_j])
            B_local[v_i, v_j] = A[v_i, v_j] * T.float32(2)
    for i_1, j_1 in T.grid(8, 8):
        with T.block("C"):
            v_i_1, v_j_1 = T.axis.remap("SS", [i_1, j_1])
            T.reads(B_local[v_i_1, v_j_1])
            T.writes(C[v_i_1, v_j_1])
            C[v_i_1, v_j_1] = B_local[v_i_1, v_j_1] + T.float32(1)
'''

STORAGE_ALIGN = '''\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    B = T.alloc_buffer((8, 8))
    for i, j in T.grid(8, 8):
        with T.block("B"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(A[v_i, v_j])
            T.writes(B[v_i, v_j])
            T.block_attr({"buffer_dim_align": ((0, 0, 8, 1),)})
            B[v_i, v_j] = A[v_i, v_j] * T.float32(2)
    for i_1, j_1 in T.grid(8, 8):
        with T.block("C"):
            v_i_1, v_j_1 = T.axis.remap("SS", [i_1, j_1])
            T.reads(B[v_i_1, v_j_1])
            T.writes(C[v_i_1, v_j_1])
            C[v_i_1, v_j_1] = B[v_i_1, v_j_1] + T.float32(1)
'''

STORAGE_ALIGN_LOWERED = '''\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    A_1 = T.Buffer((64,), "float32", data=A.data)
    C_1 = T.Buffer((64,), "float32", data=C.data)
    B = T.allocate([72], "float32")
    B_1 = T.decl_buffer((71,), "float32", data=B)
    for i, j in T.grid(8, 8):
        B_1[i * 9 + j] = A_1[i * 8 + j] * T.float32(2)
    for i_1, j_1 in T.grid(8, 8):
        C_1[i_1 * 8 + j_1] = B_1[i_1 * 9 + j_1] + T.float32(1)
'''


def test_set_scope_renames_and_moves_the_buffer():
    f = elementwise_chain()
    sch = Schedule(f)
    sch.set_scope(sch.get_block("B"), 0, "local")
    assert_script(sch, SET_SCOPE)
    check_schedule(sch, f, ref_elementwise_chain, rand(8, 8))


def test_set_scope_to_the_same_scope_is_a_no_op():
    f = elementwise_chain()
    sch = Schedule(f)
    before = sch.mod["main"]
    sch.set_scope(sch.get_block("B"), 0, "global")
    assert sch.mod["main"] is before
    check_schedule(sch, f, ref_elementwise_chain, rand(8, 8))


def test_set_scope_of_a_cache_and_compile():
    f = matmul()
    sch = Schedule(f)
    c = sch.get_block("C")
    sch.cache_write(c, 0, "global")
    sch.set_scope(c, 0, "local")
    assert 'C_global_local = T.alloc_buffer((8, 8), scope="local")' in sch.mod["main"].script()
    check_schedule(sch, f, ref_matmul, rand(8, 8), rand(8, 8))


def test_storage_align_annotates_the_writer():
    f = elementwise_chain()
    sch = Schedule(f)
    sch.storage_align(sch.get_block("B"), 0, 0, 8, 1)
    assert_script(sch, STORAGE_ALIGN)
    check_schedule(sch, f, ref_elementwise_chain, rand(8, 8))


def test_storage_align_replaces_the_entry_for_the_same_axis():
    sch = Schedule(elementwise_chain())
    b = sch.get_block("B")
    sch.storage_align(b, 0, 0, 8, 1)
    sch.storage_align(b, 0, -1, 4, 0)    # axis -1 is axis 1
    sch.storage_align(b, 0, 0, 16, 3)
    assert sch.get(b).annotations["buffer_dim_align"] == ((0, 0, 16, 3), (0, 1, 4, 0))


def test_storage_align_lowers_to_padded_strides():
    f = elementwise_chain()
    sch = Schedule(f)
    sch.storage_align(sch.get_block("B"), 0, 0, 8, 1)
    lowered = workbench.lower(sch.mod)["main"]
    assert lowered.script().strip() == STORAGE_ALIGN_LOWERED.strip()
    a = rand(8, 8)
    check_numerics(lowered, ref_elementwise_chain, a)
    rt = workbench.build(sch.mod)
    out = workbench.nd.array(np.zeros((8, 8), np.float32))
    rt["main"](workbench.nd.array(a), out)
    np.testing.assert_allclose(out.numpy(), ref_elementwise_chain(a), rtol=1e-6)


def test_storage_align_on_a_3d_cache_compiles():
    f = matmul()
    sch = Schedule(f)
    c = sch.get_block("C")
    sch.transform_layout(c, ("write", 0), lambda i, j: (i // 4, j, i % 4))
    sch.storage_align(c, 0, 1, 8, 1)
    sch.storage_align(c, 0, 0, 16, 0)
    a, b = rand(8, 8), rand(8, 8)
    check_schedule(sch, f, ref_matmul, a, b)
    rt = workbench.build(sch.mod)
    out = workbench.nd.array(np.zeros((8, 8), np.float32))
    rt["main"](workbench.nd.array(a), workbench.nd.array(b), out)
    np.testing.assert_allclose(out.numpy(), ref_matmul(a, b), rtol=1e-5)


def test_aligned_strides_rule():
    shape = (op.const(3), op.const(5), op.const(4))
    vals = [s.value for s in aligned_strides(shape, {1: (8, 1), 0: (16, 0)})]
    # innermost 1; axis 1: 4 -> 9 (9 % 8 == 1); axis 0: 9 * 5 = 45 -> 48 (48 % 16 == 0)
    assert vals == [48, 9, 1]
    assert [s.value for s in aligned_strides(shape, {})] == [20, 4, 1]


@pytest.mark.parametrize("call, match", [
    (lambda s, b: s.set_scope(b, 0, "shared"), "storage scope 'shared'"),
    (lambda s, b: s.set_scope(b, 1, "local"), "write buffer index 1"),
    (lambda s, b: s.storage_align(b, 0, 2, 8, 1), "axis 2 is out of range"),
    (lambda s, b: s.storage_align(b, 0, 0, 0, 0), "factor must be >= 1"),
    (lambda s, b: s.storage_align(b, 1, 0, 8, 0), "write buffer index 1"),
])
def test_refused_on_intermediate(call, match):
    sch = Schedule(elementwise_chain())
    b = sch.get_block("B")
    assert_refused(sch, lambda: call(sch, b), match)


@pytest.mark.parametrize("call", [
    lambda s, c: s.set_scope(c, 0, "local"),
    lambda s, c: s.storage_align(c, 0, 0, 8, 1),
])
def test_parameters_cannot_change_storage(call):
    sch = Schedule(elementwise_chain())
    c = sch.get_block("C")
    assert_refused(sch, lambda: call(sch, c), "not allocated by a block")
