"""IndexMap, transform_layout and transform_block_layout: IR (golden text), numerics against
numpy, trace round trips, and refused requests."""
import numpy as np
import pytest
from cache_layout_workloads import (
    assert_refused, assert_script, check_numerics, check_schedule, elementwise_chain, matmul,
    rand, ref_elementwise_chain, ref_matmul,
)

from workbench.ir.structural import structural_equal
from workbench.tir.expr import Var
from workbench.tir.schedule import Schedule
from workbench.tir.schedule.index_map import IndexMap
from workbench.tir.schedule.testing import verify_trace_roundtrip

LAYOUT_INTERMEDIATE = '''\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    B = T.alloc_buffer((2, 8, 4))
    for i, j in T.grid(8, 8):
        with T.block("B"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(A[v_i, v_j])
            T.writes(B[v_i // 4, v_j, v_i % 4])
            B[v_i // 4, v_j, v_i % 4] = A[v_i, v_j] * T.float32(2)
    for i_1, j_1 in T.grid(8, 8):
        with T.block("C"):
            v_i_1, v_j_1 = T.axis.remap("SS", [i_1, j_1])
            T.reads(B[v_i_1 // 4, v_j_1, v_i_1 % 4])
            T.writes(C[v_i_1, v_j_1])
            C[v_i_1, v_j_1] = B[v_i_1 // 4, v_j_1, v_i_1 % 4] + T.float32(1)
'''

LAYOUT_PARAM = '''\
@T.prim_func
def main(A: T.Buffer((2, 8, 4), "float32"), C: T.Buffer((8, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    B = T.alloc_buffer((8, 8))
    for i, j in T.grid(8, 8):
        with T.block("B"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(A[v_i // 4, v_j, v_i % 4])
            T.writes(B[v_i, v_j])
            B[v_i, v_j] = A[v_i // 4, v_j, v_i % 4] * T.float32(2)
    for i_1, j_1 in T.grid(8, 8):
        with T.block("C"):
            v_i_1, v_j_1 = T.axis.remap("SS", [i_1, j_1])
            T.reads(B[v_i_1, v_j_1])
            T.writes(C[v_i_1, v_j_1])
            C[v_i_1, v_j_1] = B[v_i_1, v_j_1] + T.float32(1)
'''

BLOCK_FUSED = '''\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    B = T.alloc_buffer((8, 8))
    for ax0 in range(64):
        with T.block("B"):
            v0 = T.axis.remap("S", [ax0])
            T.reads(A[v0 // 8, v0 % 8])
            T.writes(B[v0 // 8, v0 % 8])
            B[v0 // 8, v0 % 8] = A[v0 // 8, v0 % 8] * T.float32(2)
    for i, j in T.grid(8, 8):
        with T.block("C"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(B[v_i, v_j])
            T.writes(C[v_i, v_j])
            C[v_i, v_j] = B[v_i, v_j] + T.float32(1)
'''

BLOCK_MATMUL = '''\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"), D: T.Buffer((8, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    C = T.alloc_buffer((8, 8))
    for ax0, ax1, ax2, ax3 in T.grid(8, 4, 8, 2):
        with T.block("C"):
            v0, v1, v2, v3 = T.axis.remap("SSRS", [ax0, ax1, ax2, ax3])
            T.reads(A[v1 * 2 + v3, v2], B[v2, v0])
            T.writes(C[v1 * 2 + v3, v0])
            with T.init():
                C[v1 * 2 + v3, v0] = T.float32(0)
            C[v1 * 2 + v3, v0] = C[v1 * 2 + v3, v0] + A[v1 * 2 + v3, v2] * B[v2, v0]
    for i, j in T.grid(8, 8):
        with T.block("D"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(C[v_i, v_j])
            T.writes(D[v_i, v_j])
            D[v_i, v_j] = C[v_i, v_j] + T.float32(1)
'''


# ---- IndexMap -------------------------------------------------------------------------------

def test_index_map_from_func_and_mapping():
    m = IndexMap.from_func(lambda i, j: (i // 4, j, i % 4))
    assert m.ndim == 2 and [v.name for v in m.initial_indices] == ["i", "j"]
    assert [int(x.value) for x in m.map_indices([5, 3])] == [1, 3, 1]
    assert [int(x.value) for x in m.map_shape([16, 8])] == [4, 8, 4]
    assert m.as_python() == "lambda i, j: (i // 4, j, i % 4)"


def test_index_map_json_and_python_round_trip():
    m = IndexMap.from_func(lambda i, j: (2 * (i + j), (i - j) // 3, i % 5))
    text = m.to_json()
    assert text.startswith("{")
    assert structural_equal(IndexMap.from_json(text), m)
    assert structural_equal(IndexMap.from_func(eval(m.as_python())), m)  # noqa: S307
    assert m.as_python() == "lambda i, j: (2 * (i + j), (i - j) // 3, i % 5)"


def test_index_map_structural_equality_ignores_names():
    a = IndexMap.from_func(lambda i, j: (j, i))
    b = IndexMap.from_func(lambda x, y: (y, x))
    c = IndexMap.from_func(lambda x, y: (x, y))
    assert structural_equal(a, b) and not structural_equal(a, c)


def test_index_map_variadic_and_arity_errors():
    m = IndexMap.from_func(lambda *idx: idx[::-1], ndim=3)
    assert m.ndim == 3 and m.as_python() == "lambda i0, i1, i2: (i2, i1, i0)"
    with pytest.raises(ValueError, match="needs ndim"):
        IndexMap.from_func(lambda *idx: idx)
    with pytest.raises(ValueError, match="takes 2 index"):
        IndexMap.from_func(lambda i, j: (i,), ndim=3)
    i, j = Var("i"), Var("j")
    with pytest.raises(ValueError, match="takes 2 index"):
        IndexMap((i, j), (j, i)).map_indices([1])


def test_index_map_inverse():
    m = IndexMap.from_func(lambda i, j: (j, i // 2, i % 2))
    inv = m.inverse([6, 5])
    for i in range(6):
        for j in range(5):
            fwd = [int(x.value) for x in m.map_indices([i, j])]
            assert [int(x.value) for x in inv.map_indices(fwd)] == [i, j]
    with pytest.raises(ValueError):
        IndexMap.from_func(lambda i: (i // 2,)).inverse([8])   # loses i % 2


# ---- transform_layout -----------------------------------------------------------------------

def test_transform_layout_intermediate_buffer():
    f = elementwise_chain()
    sch = Schedule(f)
    sch.transform_layout(sch.get_block("B"), ("write", 0), lambda i, j: (i // 4, j, i % 4))
    assert_script(sch, LAYOUT_INTERMEDIATE)
    check_schedule(sch, f, ref_elementwise_chain, rand(8, 8))
    trace = sch.trace.as_json()[0]
    assert trace[1][0] == "TransformLayout" and trace[1][1][1].startswith("{")
    assert trace[1][2] == [0, 1, "None", 0]   # buffer_index, type (write), pad, injective


def test_transform_layout_parameter_changes_the_signature():
    f = elementwise_chain()
    sch = Schedule(f)
    sch.transform_layout(sch.get_block("B"), "A", lambda i, j: (i // 4, j, i % 4))
    assert_script(sch, LAYOUT_PARAM)
    verify_trace_roundtrip(sch, f)
    a = rand(8, 8)
    a_new = np.ascontiguousarray(a.reshape(2, 4, 8).transpose(0, 2, 1))  # [i//4, j, i%4]
    check_numerics(sch.mod["main"], lambda _: ref_elementwise_chain(a), a_new)


def test_transform_layout_with_index_map_object_and_read_index():
    f = matmul()
    sch = Schedule(f)
    d = sch.get_block("D")
    sch.transform_layout(d, ("read", 0), IndexMap.from_func(lambda i, j: (j, i)))
    text = sch.mod["main"].script()
    assert "C[v_j, v_i]" in text
    check_schedule(sch, f, ref_matmul, rand(8, 8), rand(8, 8))


def test_transform_layout_then_cache_and_split_compute_right():
    f = matmul()
    sch = Schedule(f)
    c = sch.get_block("C")
    sch.transform_layout(c, ("write", 0), lambda i, j: (j // 4, i, j % 4))
    sch.cache_write(c, 0, "local")
    sch.split(sch.get_loops(c)[1], [2, 4])
    check_schedule(sch, f, ref_matmul, rand(8, 8), rand(8, 8))


@pytest.mark.parametrize("buffer, index_map, match", [
    (("write", 0), lambda i, j: (i // 2, j), "not injective"),
    (("write", 0), lambda i, j: (i // 3, j, i % 3), "pads the shape"),
    (("write", 0), lambda i: (i,), "takes 1 index"),
    (("write", 2), lambda i, j: (j, i), "out of range"),
    (("bogus", 0), lambda i, j: (j, i), "must be"),
    ("Z", lambda i, j: (j, i), "neither reads nor writes"),
    (("write", 0), lambda i, j: (i - 1, j), "does not start at 0"),
])
def test_transform_layout_refused(buffer, index_map, match):
    sch = Schedule(elementwise_chain())
    b = sch.get_block("B")
    assert_refused(sch, lambda: sch.transform_layout(b, buffer, index_map), match)


def test_transform_layout_padding_with_pad_value_is_not_supported_yet():
    sch = Schedule(elementwise_chain())
    b = sch.get_block("B")
    assert_refused(sch, lambda: sch.transform_layout(b, ("write", 0),
                                                     lambda i, j: (i // 3, j, i % 3),
                                                     pad_value=0.0), "pad_value yet")


# ---- transform_block_layout -----------------------------------------------------------------

def test_transform_block_layout_fuses_the_iteration_space():
    f = elementwise_chain()
    sch = Schedule(f)
    sch.transform_block_layout(sch.get_block("B"), lambda i, j: (i * 8 + j,))
    assert_script(sch, BLOCK_FUSED)
    check_schedule(sch, f, ref_elementwise_chain, rand(8, 8))
    assert sch.trace.as_json()[0][1][2][0].startswith("{")   # the map is an attribute


def test_transform_block_layout_reduction_keeps_iter_types():
    f = matmul()
    sch = Schedule(f)
    sch.transform_block_layout(sch.get_block("C"), lambda i, j, k: (j, i // 2, k, i % 2))
    assert_script(sch, BLOCK_MATMUL)
    check_schedule(sch, f, ref_matmul, rand(8, 8), rand(8, 8))


def test_transform_block_layout_keeps_int64_iteration_variables():
    """A relax kernel indexes in int64: the split dimensions' new iteration variables must be
    int64 too (they were int32, and the build refused ``v2 * T.int64(15) + v5``; found by the
    random-CNN fuzzer on a Winograd kernel)."""
    import workbench as wb
    from workbench import te
    from workbench.tir.expr import IntImm
    a = te.placeholder(tuple(IntImm("int64", d) for d in (30, 8)), name="A")
    b = te.compute(a.shape, lambda i, j: a[i, j] * 2.0, name="B")
    f = te.create_prim_func([a, b])
    sch = Schedule(f)
    sch.transform_block_layout(sch.get_block("B"), lambda i, j: (i // 15, j, i % 15))
    blk = sch.get(sch.get_block("B"))
    assert {iv.var.dtype for iv in blk.iter_vars} == {"int64"}
    x = rand(30, 8)
    out = wb.nd.empty((30, 8), "float32")
    wb.build(sch.mod)["main"](wb.nd.array(x), out)
    np.testing.assert_allclose(out.numpy(), x * 2)


@pytest.mark.parametrize("index_map, match", [
    (lambda i, j, k: (i, j * 8 + k), "mixes spatial and reduction"),
    (lambda i, j, k: (i // 2, j, k), "cover"),
    (lambda i, j: (i, j), "takes 2 index"),
    (lambda i, j, k: (i + j, k), "mixed-radix|cover"),
])
def test_transform_block_layout_refused(index_map, match):
    sch = Schedule(matmul())
    c = sch.get_block("C")
    assert_refused(sch, lambda: sch.transform_block_layout(c, index_map), match)


def test_transform_block_layout_needs_trivial_bindings():
    sch = Schedule(elementwise_chain())
    b = sch.get_block("B")
    sch.split(sch.get_loops(b)[0], [2, 4])
    assert_refused(sch, lambda: sch.transform_block_layout(b, lambda i, j: (j, i)),
                   "binding is not trivial")


def test_reverse_compute_at_after_permuting_a_buffer_with_a_unit_dimension():
    """The consumer's region of a unit dimension is [0, 0] built from two IntImm objects after
    transform_layout; it is still one point (it used to be refused as inexpressible)."""
    import workbench as wb
    from workbench import te, topi
    x = te.placeholder((1, 8, 6), name="x")
    k = te.reduce_axis((0, 6), name="k")
    s = te.compute((1, 8, 4), lambda n, f, j: te.sum(x[n, f, k] * (j + 1.0), axis=k), name="s")
    func = te.create_prim_func([x, topi.nn.relu(s)])
    sch = Schedule(func)
    blk = sch.get_block("s")
    sch.transform_layout(blk, ("write", 0), lambda n, f, j: (n, j, f))
    n, f, j, kk = sch.get_loops(blk)
    f0, f1 = sch.split(f, [None, 4])
    sch.reorder(n, f0, kk, f1, j)
    sch.reverse_compute_at(sch.get_consumers(blk)[0], f0)
    verify_trace_roundtrip(sch, func)
    a = np.random.rand(1, 8, 6).astype("float32")
    out = wb.nd.empty((1, 8, 4), "float32")
    wb.build(sch.mod)["main"](wb.nd.array(a), out)
    want = np.maximum(a.sum(-1)[..., None] * np.arange(1, 5, dtype="float32"), 0)
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-5)
