"""cache_read / cache_write: IR (golden text), numerics against numpy, trace round trips,
consumer_blocks, the classic C_local tile, and refused requests."""
import pytest
from cache_layout_workloads import (
    assert_refused, assert_script, check_schedule, conv2d, elementwise_chain, matmul, rand,
    ref_conv2d, ref_elementwise_chain, ref_matmul, ref_two_consumers, two_consumers,
)

from workbench.tir.schedule import Schedule

READ_INPUT = '''\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    B = T.alloc_buffer((8, 8))
    A_local = T.alloc_buffer((8, 8), scope="local")
    for ax0, ax1 in T.grid(8, 8):
        with T.block("A_local"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            T.reads(A[v0, v1])
            T.writes(A_local[v0, v1])
            A_local[v0, v1] = A[v0, v1]
    for i, j in T.grid(8, 8):
        with T.block("B"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(A_local[v_i, v_j])
            T.writes(B[v_i, v_j])
            B[v_i, v_j] = A_local[v_i, v_j] * T.float32(2)
    for i_1, j_1 in T.grid(8, 8):
        with T.block("C"):
            v_i_1, v_j_1 = T.axis.remap("SS", [i_1, j_1])
            T.reads(B[v_i_1, v_j_1])
            T.writes(C[v_i_1, v_j_1])
            C[v_i_1, v_j_1] = B[v_i_1, v_j_1] + T.float32(1)
'''

READ_INTERMEDIATE = '''\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    B = T.alloc_buffer((8, 8))
    B_global = T.alloc_buffer((8, 8))
    for i, j in T.grid(8, 8):
        with T.block("B"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(A[v_i, v_j])
            T.writes(B[v_i, v_j])
            B[v_i, v_j] = A[v_i, v_j] * T.float32(2)
    for ax0, ax1 in T.grid(8, 8):
        with T.block("B_global"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            T.reads(B[v0, v1])
            T.writes(B_global[v0, v1])
            B_global[v0, v1] = B[v0, v1]
    for i_1, j_1 in T.grid(8, 8):
        with T.block("C"):
            v_i_1, v_j_1 = T.axis.remap("SS", [i_1, j_1])
            T.reads(B_global[v_i_1, v_j_1])
            T.writes(C[v_i_1, v_j_1])
            C[v_i_1, v_j_1] = B_global[v_i_1, v_j_1] + T.float32(1)
'''

WRITE_ELEMENTWISE = '''\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    B = T.alloc_buffer((8, 8))
    B_local = T.alloc_buffer((8, 8), scope="local")
    for i, j in T.grid(8, 8):
        with T.block("B"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(A[v_i, v_j])
            T.writes(B_local[v_i, v_j])
            B_local[v_i, v_j] = A[v_i, v_j] * T.float32(2)
    for ax0, ax1 in T.grid(8, 8):
        with T.block("B_local"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            T.reads(B_local[v0, v1])
            T.writes(B[v0, v1])
            B[v0, v1] = B_local[v0, v1]
    for i_1, j_1 in T.grid(8, 8):
        with T.block("C"):
            v_i_1, v_j_1 = T.axis.remap("SS", [i_1, j_1])
            T.reads(B[v_i_1, v_j_1])
            T.writes(C[v_i_1, v_j_1])
            C[v_i_1, v_j_1] = B[v_i_1, v_j_1] + T.float32(1)
'''

WRITE_OUTPUT = '''\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), C: T.Buffer((8, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    B = T.alloc_buffer((8, 8))
    C_local = T.alloc_buffer((8, 8), scope="local")
    for i, j in T.grid(8, 8):
        with T.block("B"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(A[v_i, v_j])
            T.writes(B[v_i, v_j])
            B[v_i, v_j] = A[v_i, v_j] * T.float32(2)
    for i_1, j_1 in T.grid(8, 8):
        with T.block("C"):
            v_i_1, v_j_1 = T.axis.remap("SS", [i_1, j_1])
            T.reads(B[v_i_1, v_j_1])
            T.writes(C_local[v_i_1, v_j_1])
            C_local[v_i_1, v_j_1] = B[v_i_1, v_j_1] + T.float32(1)
    for ax0, ax1 in T.grid(8, 8):
        with T.block("C_local"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            T.reads(C_local[v0, v1])
            T.writes(C[v0, v1])
            C[v0, v1] = C_local[v0, v1]
'''

READ_WITH_CONSUMERS = '''\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), D: T.Buffer((8, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    B = T.alloc_buffer((8, 8))
    C = T.alloc_buffer((8, 8))
    A_local = T.alloc_buffer((8, 8), scope="local")
    B_local = T.alloc_buffer((8, 8), scope="local")
    for ax0, ax1 in T.grid(8, 8):
        with T.block("A_local"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            T.reads(A[v0, v1])
            T.writes(A_local[v0, v1])
            A_local[v0, v1] = A[v0, v1]
    for i, j in T.grid(8, 8):
        with T.block("B"):
            v_i, v_j = T.axis.remap("SS", [i, j])
            T.reads(A_local[v_i, v_j])
            T.writes(B[v_i, v_j])
            B[v_i, v_j] = A_local[v_i, v_j] * T.float32(2)
    for i_1, j_1 in T.grid(8, 8):
        with T.block("C"):
            v_i_1, v_j_1 = T.axis.remap("SS", [i_1, j_1])
            T.reads(B[v_i_1, v_j_1])
            T.writes(C[v_i_1, v_j_1])
            C[v_i_1, v_j_1] = B[v_i_1, v_j_1] + T.float32(1)
    for ax0_1, ax1_1 in T.grid(8, 8):
        with T.block("B_local"):
            v0_1, v1_1 = T.axis.remap("SS", [ax0_1, ax1_1])
            T.reads(B[v0_1, v1_1])
            T.writes(B_local[v0_1, v1_1])
            B_local[v0_1, v1_1] = B[v0_1, v1_1]
    for i_2, j_2 in T.grid(8, 8):
        with T.block("D"):
            v_i_2, v_j_2 = T.axis.remap("SS", [i_2, j_2])
            T.reads(B_local[v_i_2, v_j_2], C[v_i_2, v_j_2])
            T.writes(D[v_i_2, v_j_2])
            D[v_i_2, v_j_2] = B_local[v_i_2, v_j_2] * T.float32(3) + C[v_i_2, v_j_2]
'''

WRITE_WITH_CONSUMERS = '''\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), D: T.Buffer((8, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    B = T.alloc_buffer((8, 8))
    C = T.alloc_buffer((8, 8))
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
    for ax0, ax1 in T.grid(8, 8):
        with T.block("B_local"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            T.reads(B_local[v0, v1])
            T.writes(B[v0, v1])
            B[v0, v1] = B_local[v0, v1]
    for i_2, j_2 in T.grid(8, 8):
        with T.block("D"):
            v_i_2, v_j_2 = T.axis.remap("SS", [i_2, j_2])
            T.reads(B[v_i_2, v_j_2], C[v_i_2, v_j_2])
            T.writes(D[v_i_2, v_j_2])
            D[v_i_2, v_j_2] = B[v_i_2, v_j_2] * T.float32(3) + C[v_i_2, v_j_2]
'''

WRITE_MATMUL = '''\
@T.prim_func
def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"), D: T.Buffer((8, 8), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    C = T.alloc_buffer((8, 8))
    C_local = T.alloc_buffer((8, 8), scope="local")
    for i, j, k in T.grid(8, 8, 8):
        with T.block("C"):
            v_i, v_j, v_k = T.axis.remap("SSR", [i, j, k])
            T.reads(A[v_i, v_k], B[v_k, v_j])
            T.writes(C_local[v_i, v_j])
            with T.init():
                C_local[v_i, v_j] = T.float32(0)
            C_local[v_i, v_j] = C_local[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
    for ax0, ax1 in T.grid(8, 8):
        with T.block("C_local"):
            v0, v1 = T.axis.remap("SS", [ax0, ax1])
            T.reads(C_local[v0, v1])
            T.writes(C[v0, v1])
            C[v0, v1] = C_local[v0, v1]
    for i_1, j_1 in T.grid(8, 8):
        with T.block("D"):
            v_i_1, v_j_1 = T.axis.remap("SS", [i_1, j_1])
            T.reads(C[v_i_1, v_j_1])
            T.writes(D[v_i_1, v_j_1])
            D[v_i_1, v_j_1] = C[v_i_1, v_j_1] + T.float32(1)
'''

MATMUL_C_LOCAL_TILE = '''\
@T.prim_func
def main(A: T.Buffer((16, 16), "float32"), B: T.Buffer((16, 16), "float32"), D: T.Buffer((16, 16), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    C = T.alloc_buffer((16, 16))
    C_local = T.alloc_buffer((16, 16), scope="local")
    for i_0, j_0 in T.grid(4, 4):
        for k, i_1, j_1 in T.grid(16, 4, 4):
            with T.block("C"):
                v_i = T.axis.spatial(16, i_0 * 4 + i_1)
                v_j = T.axis.spatial(16, j_0 * 4 + j_1)
                v_k = T.axis.reduce(16, k)
                T.reads(A[v_i, v_k], B[v_k, v_j])
                T.writes(C_local[v_i, v_j])
                with T.init():
                    C_local[v_i, v_j] = T.float32(0)
                C_local[v_i, v_j] = C_local[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
        for ax0, ax1 in T.grid(4, 4):
            with T.block("C_local"):
                v0 = T.axis.spatial(16, i_0 * 4 + ax0)
                v1 = T.axis.spatial(16, j_0 * 4 + ax1)
                T.reads(C_local[v0, v1])
                T.writes(C[v0, v1])
                C[v0, v1] = C_local[v0, v1]
    for i, j in T.grid(16, 16):
        with T.block("D"):
            v_i_1, v_j_1 = T.axis.remap("SS", [i, j])
            T.reads(C[v_i_1, v_j_1])
            T.writes(D[v_i_1, v_j_1])
            D[v_i_1, v_j_1] = C[v_i_1, v_j_1] + T.float32(1)
'''

CONV2D_CACHED = '''\
@T.prim_func
def main(data: T.Buffer((1, 2, 6, 6), "float32"), weight: T.Buffer((2, 2, 3, 3), "float32"), conv: T.Buffer((1, 2, 4, 4), "float32")):
    T.func_attr({"tir.noalias": True})
    # with T.block("root"):
    data_global = T.alloc_buffer((1, 2, 6, 6))
    weight_local = T.alloc_buffer((2, 2, 3, 3), scope="local")
    conv_local = T.alloc_buffer((1, 2, 4, 4), scope="local")
    for ax0, ax1, ax2, ax3 in T.grid(2, 2, 3, 3):
        with T.block("weight_local"):
            v0, v1, v2, v3 = T.axis.remap("SSSS", [ax0, ax1, ax2, ax3])
            T.reads(weight[v0, v1, v2, v3])
            T.writes(weight_local[v0, v1, v2, v3])
            weight_local[v0, v1, v2, v3] = weight[v0, v1, v2, v3]
    for ax0_1, ax1_1, ax2_1, ax3_1 in T.grid(1, 2, 6, 6):
        with T.block("data_global"):
            v0_1, v1_1, v2_1, v3_1 = T.axis.remap("SSSS", [ax0_1, ax1_1, ax2_1, ax3_1])
            T.reads(data[v0_1, v1_1, v2_1, v3_1])
            T.writes(data_global[v0_1, v1_1, v2_1, v3_1])
            data_global[v0_1, v1_1, v2_1, v3_1] = data[v0_1, v1_1, v2_1, v3_1]
    for b, k, y, x, rc, ry, rx in T.grid(1, 2, 4, 4, 2, 3, 3):
        with T.block("conv"):
            v_b, v_k, v_y, v_x, v_rc, v_ry, v_rx = T.axis.remap("SSSSRRR", [b, k, y, x, rc, ry, rx])
            T.reads(data_global[v_b, v_rc, v_y + v_ry, v_x + v_rx], weight_local[v_k, v_rc, v_ry, v_rx])
            T.writes(conv_local[v_b, v_k, v_y, v_x])
            with T.init():
                conv_local[v_b, v_k, v_y, v_x] = T.float32(0)
            conv_local[v_b, v_k, v_y, v_x] = conv_local[v_b, v_k, v_y, v_x] + data_global[v_b, v_rc, v_y + v_ry, v_x + v_rx] * weight_local[v_k, v_rc, v_ry, v_rx]
    for ax0_2, ax1_2, ax2_2, ax3_2 in T.grid(1, 2, 4, 4):
        with T.block("conv_local"):
            v0_2, v1_2, v2_2, v3_2 = T.axis.remap("SSSS", [ax0_2, ax1_2, ax2_2, ax3_2])
            T.reads(conv_local[v0_2, v1_2, v2_2, v3_2])
            T.writes(conv[v0_2, v1_2, v2_2, v3_2])
            conv[v0_2, v1_2, v2_2, v3_2] = conv_local[v0_2, v1_2, v2_2, v3_2]
'''


def test_cache_read_input_goes_first_in_the_scope():
    f = elementwise_chain()
    sch = Schedule(f)
    cached = sch.cache_read(sch.get_block("B"), 0, "local")
    assert sch.get(cached).name_hint == "A_local"
    assert_script(sch, READ_INPUT)
    check_schedule(sch, f, ref_elementwise_chain, rand(8, 8))


def test_cache_read_intermediate_goes_between_producer_and_consumer():
    f = elementwise_chain()
    sch = Schedule(f)
    sch.cache_read(sch.get_block("C"), 0, "global")
    assert_script(sch, READ_INTERMEDIATE)
    check_schedule(sch, f, ref_elementwise_chain, rand(8, 8))


def test_cache_write_elementwise():
    f = elementwise_chain()
    sch = Schedule(f)
    sch.cache_write(sch.get_block("B"), 0, "local")
    assert_script(sch, WRITE_ELEMENTWISE)
    check_schedule(sch, f, ref_elementwise_chain, rand(8, 8))


def test_cache_write_of_an_output_goes_last():
    f = elementwise_chain()
    sch = Schedule(f)
    sch.cache_write(sch.get_block("C"), 0, "local")
    assert_script(sch, WRITE_OUTPUT)
    check_schedule(sch, f, ref_elementwise_chain, rand(8, 8))


def test_cache_write_reduction_redirects_init_and_update():
    f = matmul()
    sch = Schedule(f)
    sch.cache_write(sch.get_block("C"), 0, "local")
    assert_script(sch, WRITE_MATMUL)
    check_schedule(sch, f, ref_matmul, rand(8, 8), rand(8, 8))


def test_cache_read_only_for_given_consumers():
    f = two_consumers()
    sch = Schedule(f)
    sch.cache_read(sch.get_block("B"), 0, "local", consumer_blocks=[sch.get_block("B")])
    # A name works too (it is looked up with get_sblock, recorded in the trace).
    sch.cache_read(sch.get_block("D"), 0, "local", consumer_blocks=["D"])
    assert_script(sch, READ_WITH_CONSUMERS)
    check_schedule(sch, f, ref_two_consumers, rand(8, 8))
    # consumer_blocks is one input holding a list of handles, as TVM writes it.
    assert ["CacheRead", ["b3", ["b4"]], [0, '"local"'], ["b5"]] in sch.trace.as_json()[0]


def test_cache_write_consumer_reads_the_cache_and_write_back_precedes_the_others():
    f = two_consumers()
    sch = Schedule(f)
    sch.cache_write(sch.get_block("B"), 0, "local", consumer_blocks=[sch.get_block("C")])
    assert_script(sch, WRITE_WITH_CONSUMERS)
    check_schedule(sch, f, ref_two_consumers, rand(8, 8))


def test_cache_read_and_write_conv2d():
    f = conv2d()
    sch = Schedule(f)
    conv = sch.get_block("conv")
    sch.cache_read(conv, 0, "global")
    sch.cache_read(conv, 1, "local")
    sch.cache_write(conv, 0, "local")
    assert_script(sch, CONV2D_CACHED)
    check_schedule(sch, f, ref_conv2d, rand(1, 2, 6, 6), rand(2, 2, 3, 3))


def test_cache_under_compute_at_copies_only_the_produced_slice():
    f = elementwise_chain()
    sch = Schedule(f)
    b, c = sch.get_block("B"), sch.get_block("C")
    if not hasattr(sch, "compute_at"):
        pytest.skip("compute_at is not available")
    sch.compute_at(b, sch.get_loops(c)[0])
    sch.cache_read(c, 0, "local")
    sch.cache_write(b, 0, "local")
    text = sch.mod["main"].script()
    # Both copies sit under loop i and cover one row: a (1, 8) grid bound at i.
    assert text.count("T.grid(1, 8)") == 2
    assert "T.axis.spatial(8, ax0_1 + i)" in text
    check_schedule(sch, f, ref_elementwise_chain, rand(8, 8))


def test_cache_write_local_tile_with_reverse_compute_at():
    """The classic tile pattern: C accumulates in C_local per (i_0, j_0) tile, written back
    under the tile loop."""
    f = matmul(16)
    sch = Schedule(f)
    if not hasattr(sch, "reverse_compute_at"):
        pytest.skip("reverse_compute_at (compute-location family) has not landed")
    c = sch.get_block("C")
    i, j, k = sch.get_loops(c)
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 4])
    sch.reorder(io, jo, k, ii, ji)
    write_back = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(write_back, jo)
    assert_script(sch, MATMUL_C_LOCAL_TILE)
    check_schedule(sch, f, ref_matmul, rand(16, 16), rand(16, 16))


def test_cache_names_stay_unique():
    f = two_consumers()
    sch = Schedule(f)
    first = sch.cache_read(sch.get_block("C"), 0, "local", consumer_blocks=["C"])
    second = sch.cache_read(sch.get_block("D"), 0, "local", consumer_blocks=["D"])
    assert sch.get(first).name_hint == "B_local"
    assert sch.get(second).name_hint == "B_local_1"
    check_schedule(sch, f, ref_two_consumers, rand(8, 8))


def test_cache_copy_blocks_can_be_scheduled_further():
    f = elementwise_chain()
    sch = Schedule(f)
    copy = sch.cache_read(sch.get_block("B"), 0, "local")
    ax0, ax1 = sch.get_loops(copy)
    sch.split(ax1, [2, 4])
    check_schedule(sch, f, ref_elementwise_chain, rand(8, 8))


@pytest.mark.parametrize("call, match", [
    (lambda s, b: s.cache_read(b, 1, "local"), "read buffer index 1 is out of range"),
    (lambda s, b: s.cache_write(b, 3, "local"), "write buffer index 3"),
    (lambda s, b: s.cache_read(b, 0, "shared"), "storage scope 'shared'"),
    (lambda s, b: s.cache_write(b, 0, "texture"), "not supported on CPU"),
])
def test_refused_requests_leave_the_schedule_unchanged(call, match):
    sch = Schedule(elementwise_chain())
    block = sch.get_block("B")
    assert_refused(sch, lambda: call(sch, block), match)


def test_cache_needs_a_single_writer():
    """After decompose_reduction, C is written by C_init and C: neither cache_write of C nor
    cache_read of C may pick one writer."""
    f = matmul()
    sch = Schedule(f)
    c = sch.get_block("C")
    if not hasattr(sch, "decompose_reduction"):
        pytest.skip("decompose_reduction (reduction family) is not available")
    sch.decompose_reduction(c, sch.get_loops(c)[0])
    d = sch.get_block("D")
    assert_refused(sch, lambda: sch.cache_write(c, 0, "local"), "also written by")
    assert_refused(sch, lambda: sch.cache_read(d, 0, "local"), "written by 2 blocks")


def test_consumer_outside_the_scope_is_refused():
    """A consumer must be in the cached block's scope: the root block itself is not."""
    f = elementwise_chain()
    sch = Schedule(f)
    b = sch.get_block("B")
    root = sch.get_block("root")
    assert_refused(sch, lambda: sch.cache_read(b, 0, "local", consumer_blocks=[root]),
                   "not inside the scope")


@pytest.mark.parametrize("cache", ["write", "read"])
def test_cache_after_a_non_dividing_split_stays_inside_the_buffer(cache):
    """Relaxing the loops of a predicated block (8 rows split 3 x 3) covers 9 rows; the copy
    must clamp to the buffer's 8 (it used to copy a 9th row out of bounds: found by the
    schedule property test on conv2d / depthwise padding stages)."""
    f = elementwise_chain()
    sch = Schedule(f)
    b = sch.get_block("B")
    sch.split(sch.get_loops(b)[0], [3, None])
    if cache == "write":
        sch.cache_write(b, 0, "local")
    else:
        sch.cache_read(sch.get_block("C"), 0, "local")
    text = sch.mod["main"].script()
    assert "T.grid(9" not in text
    check_schedule(sch, f, ref_elementwise_chain, rand(8, 8))
