"""compute_at, reverse_compute_at and sample_compute_location on te workloads.

Each schedule is checked three ways: the printed IR against text written here (read and
checked by hand against TVM's behaviour), the interpreter's result against numpy, and the
trace's JSON / Python round trip. Refused requests must raise ScheduleError and change nothing.
"""
from __future__ import annotations

import pytest
from compute_location_workloads import (
    assert_script, broadcast, broadcast_ref, chain, chain_1d, chain_ref, check_numeric,
    check_refused, conv_pad, conv_pad_ref, four_stage, four_stage_ref, matmul_relu,
    matmul_relu_ref, rand, two_consumers,
)

from workbench.tir.schedule import LoopRV, Schedule
from workbench.tir.schedule.testing import verify_trace_roundtrip


# ---- compute_at ------------------------------------------------------------------------------

def _tiled_chain():
    mod = chain()
    sch = Schedule(mod)
    i, j = sch.get_loops(sch.get_block("C"))
    io, ii = sch.split(i, [None, 4])
    jo, ji = sch.split(j, [None, 4])
    sch.reorder(io, jo, ii, ji)
    sch.compute_at(sch.get_block("B"), jo)
    return sch, mod


def test_compute_at_tiled_elementwise_chain():
    sch, mod = _tiled_chain()
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        B = T.alloc_buffer((16, 16))
        for i_0, j_0 in T.grid(4, 4):
            for ax0, ax1 in T.grid(4, 4):
                with T.block("B"):
                    v_i = T.axis.spatial(16, i_0 * 4 + ax0)
                    v_j = T.axis.spatial(16, j_0 * 4 + ax1)
                    T.reads(A[v_i, v_j])
                    T.writes(B[v_i, v_j])
                    B[v_i, v_j] = A[v_i, v_j] * T.float32(2)
            for i_1, j_1 in T.grid(4, 4):
                with T.block("C"):
                    v_i_1 = T.axis.spatial(16, i_0 * 4 + i_1)
                    v_j_1 = T.axis.spatial(16, j_0 * 4 + j_1)
                    T.reads(B[v_i_1, v_j_1])
                    T.writes(C[v_i_1, v_j_1])
                    C[v_i_1, v_j_1] = B[v_i_1, v_j_1] + T.float32(1)
    """)
    check_numeric(sch, chain_ref, rand(16, 16))
    verify_trace_roundtrip(sch, mod)


def test_compute_at_partial_tile_gets_predicate():
    mod = chain_1d(10)
    sch = Schedule(mod)
    (i,) = sch.get_loops(sch.get_block("C"))
    io, _ = sch.split(i, [None, 4])
    sch.compute_at(sch.get_block("B"), io)
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((10,), "float32"), C: T.Buffer((10,), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        B = T.alloc_buffer((10,))
        for i_0 in range(3):
            for ax0 in range(4):
                with T.block("B"):
                    v_i = T.axis.spatial(10, i_0 * 4 + ax0)
                    T.where(i_0 * 4 + ax0 < 10)
                    T.reads(A[v_i])
                    T.writes(B[v_i])
                    B[v_i] = A[v_i] * T.float32(2)
            for i_1 in range(4):
                with T.block("C"):
                    v_i_1 = T.axis.spatial(10, i_0 * 4 + i_1)
                    T.where(i_0 * 4 + i_1 < 10)
                    T.reads(B[v_i_1])
                    T.writes(C[v_i_1])
                    C[v_i_1] = B[v_i_1] + T.float32(1)
    """)
    check_numeric(sch, chain_ref, rand(10))
    verify_trace_roundtrip(sch, mod)


def test_compute_at_reduction_block_under_epilogue_loop():
    mod = matmul_relu()
    sch = Schedule(mod)
    i, _ = sch.get_loops(sch.get_block("D"))
    sch.compute_at(sch.get_block("C"), i)
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"), D: T.Buffer((8, 8), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        C = T.alloc_buffer((8, 8))
        for i in range(8):
            for ax0, ax1 in T.grid(8, 8):
                with T.block("C"):
                    v_i, v_j, v_k = T.axis.remap("SSR", [i, ax0, ax1])
                    T.reads(A[v_i, v_k], B[v_k, v_j])
                    T.writes(C[v_i, v_j])
                    with T.init():
                        C[v_i, v_j] = T.float32(0)
                    C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
            for j in range(8):
                with T.block("D"):
                    v_i_1, v_j_1 = T.axis.remap("SS", [i, j])
                    T.reads(C[v_i_1, v_j_1])
                    T.writes(D[v_i_1, v_j_1])
                    D[v_i_1, v_j_1] = T.max(C[v_i_1, v_j_1], T.float32(0))
    """)
    check_numeric(sch, matmul_relu_ref, rand(8, 8), rand(8, 8, seed=1))
    verify_trace_roundtrip(sch, mod)


def test_compute_at_padding_under_tiled_convolution():
    mod = conv_pad()
    sch = Schedule(mod)
    i, _, _, _ = sch.get_loops(sch.get_block("conv"))
    io, _ = sch.split(i, [None, 2])
    sch.compute_at(sch.get_block("pad"), io)
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((6, 6), "float32"), W: T.Buffer((3, 3), "float32"), conv: T.Buffer((6, 6), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        pad = T.alloc_buffer((8, 8))
        for i_0 in range(3):
            for ax0, ax1 in T.grid(4, 8):
                with T.block("pad"):
                    v_i = T.axis.spatial(8, i_0 * 2 + ax0)
                    v_j = T.axis.spatial(8, ax1)
                    T.reads(A[v_i - 1, v_j - 1])
                    T.writes(pad[v_i, v_j])
                    pad[v_i, v_j] = T.if_then_else(v_i >= 1 and v_i < 7 and v_j >= 1 and v_j < 7, A[v_i - 1, v_j - 1], T.float32(0))
            for i_1, j, ry, rx in T.grid(2, 6, 3, 3):
                with T.block("conv"):
                    v_i_1 = T.axis.spatial(6, i_0 * 2 + i_1)
                    v_j_1 = T.axis.spatial(6, j)
                    v_ry = T.axis.reduce(3, ry)
                    v_rx = T.axis.reduce(3, rx)
                    T.reads(pad[v_i_1 + v_ry, v_j_1 + v_rx], W[v_ry, v_rx])
                    T.writes(conv[v_i_1, v_j_1])
                    with T.init():
                        conv[v_i_1, v_j_1] = T.float32(0)
                    conv[v_i_1, v_j_1] = conv[v_i_1, v_j_1] + pad[v_i_1 + v_ry, v_j_1 + v_rx] * W[v_ry, v_rx]
    """)
    check_numeric(sch, conv_pad_ref, rand(6, 6), rand(3, 3, seed=1))
    verify_trace_roundtrip(sch, mod)


def test_compute_at_padding_at_inner_spatial_loop():
    mod = conv_pad()
    sch = Schedule(mod)
    _, j, _, _ = sch.get_loops(sch.get_block("conv"))
    sch.compute_at(sch.get_block("pad"), j)
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((6, 6), "float32"), W: T.Buffer((3, 3), "float32"), conv: T.Buffer((6, 6), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        pad = T.alloc_buffer((8, 8))
        for i, j in T.grid(6, 6):
            for ax0, ax1 in T.grid(3, 3):
                with T.block("pad"):
                    v_i = T.axis.spatial(8, i + ax0)
                    v_j = T.axis.spatial(8, j + ax1)
                    T.reads(A[v_i - 1, v_j - 1])
                    T.writes(pad[v_i, v_j])
                    pad[v_i, v_j] = T.if_then_else(v_i >= 1 and v_i < 7 and v_j >= 1 and v_j < 7, A[v_i - 1, v_j - 1], T.float32(0))
            for ry, rx in T.grid(3, 3):
                with T.block("conv"):
                    v_i_1, v_j_1, v_ry, v_rx = T.axis.remap("SSRR", [i, j, ry, rx])
                    T.reads(pad[v_i_1 + v_ry, v_j_1 + v_rx], W[v_ry, v_rx])
                    T.writes(conv[v_i_1, v_j_1])
                    with T.init():
                        conv[v_i_1, v_j_1] = T.float32(0)
                    conv[v_i_1, v_j_1] = conv[v_i_1, v_j_1] + pad[v_i_1 + v_ry, v_j_1 + v_rx] * W[v_ry, v_rx]
    """)
    check_numeric(sch, conv_pad_ref, rand(6, 6), rand(3, 3, seed=1))
    verify_trace_roundtrip(sch, mod)


def test_compute_at_broadcast_consumer_drops_unit_loop():
    mod = broadcast()
    sch = Schedule(mod)
    _, j = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), j)
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8, 4), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        B = T.alloc_buffer((8,))
        for i, j in T.grid(8, 4):
            with T.block("B"):
                v_i = T.axis.remap("S", [i])
                T.reads(A[v_i])
                T.writes(B[v_i])
                B[v_i] = A[v_i] * T.float32(2)
            with T.block("C"):
                v_i_1, v_j = T.axis.remap("SS", [i, j])
                T.reads(B[v_i_1])
                T.writes(C[v_i_1, v_j])
                C[v_i_1, v_j] = B[v_i_1] + T.float32(1)
    """)
    check_numeric(sch, broadcast_ref, rand(8))
    verify_trace_roundtrip(sch, mod)


def test_compute_at_broadcast_consumer_preserves_unit_loop():
    mod = broadcast()
    sch = Schedule(mod)
    _, j = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("B"), j, preserve_unit_loops=True)
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8, 4), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        B = T.alloc_buffer((8,))
        for i, j in T.grid(8, 4):
            for ax0 in range(1):
                with T.block("B"):
                    v_i = T.axis.spatial(8, i + ax0)
                    T.reads(A[v_i])
                    T.writes(B[v_i])
                    B[v_i] = A[v_i] * T.float32(2)
            with T.block("C"):
                v_i_1, v_j = T.axis.remap("SS", [i, j])
                T.reads(B[v_i_1])
                T.writes(C[v_i_1, v_j])
                C[v_i_1, v_j] = B[v_i_1] + T.float32(1)
    """)
    check_numeric(sch, broadcast_ref, rand(8))
    verify_trace_roundtrip(sch, mod)


def _four_stage_at(index):
    mod = four_stage()
    sch = Schedule(mod)
    (i,) = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("U"), i)
    sch.compute_at(sch.get_block("B"), i)
    sch.compute_at(sch.get_block("E"), i, index=index)
    return sch, mod


@pytest.mark.parametrize("index, order", [(-1, "UEBC"), (-2, "EUBC"), (0, "EUBC"),
                                          (1, "UEBC")])
def test_compute_at_index_picks_position(index, order):
    sch, mod = _four_stage_at(index)
    (i,) = sch.get_loops(sch.get_block("C"))
    names = [sch.get(b).name_hint for b in sch.get_child_blocks(i)]
    assert "".join(names) == order
    check_numeric(sch, four_stage_ref, rand(8))
    verify_trace_roundtrip(sch, mod)


# ---- reverse_compute_at ---------------------------------------------------------------------

def test_reverse_compute_at_relu_epilogue_under_tiled_matmul():
    mod = matmul_relu()
    sch = Schedule(mod)
    i, _, _ = sch.get_loops(sch.get_block("C"))
    io, _ = sch.split(i, [None, 4])
    sch.reverse_compute_at(sch.get_block("D"), io)
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((8, 8), "float32"), B: T.Buffer((8, 8), "float32"), D: T.Buffer((8, 8), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        C = T.alloc_buffer((8, 8))
        for i_0 in range(2):
            for i_1, j, k in T.grid(4, 8, 8):
                with T.block("C"):
                    v_i = T.axis.spatial(8, i_0 * 4 + i_1)
                    v_j = T.axis.spatial(8, j)
                    v_k = T.axis.reduce(8, k)
                    T.reads(A[v_i, v_k], B[v_k, v_j])
                    T.writes(C[v_i, v_j])
                    with T.init():
                        C[v_i, v_j] = T.float32(0)
                    C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]
            for ax0, ax1 in T.grid(4, 8):
                with T.block("D"):
                    v_i_1 = T.axis.spatial(8, i_0 * 4 + ax0)
                    v_j_1 = T.axis.spatial(8, ax1)
                    T.reads(C[v_i_1, v_j_1])
                    T.writes(D[v_i_1, v_j_1])
                    D[v_i_1, v_j_1] = T.max(C[v_i_1, v_j_1], T.float32(0))
    """)
    check_numeric(sch, matmul_relu_ref, rand(8, 8), rand(8, 8, seed=1))
    verify_trace_roundtrip(sch, mod)


def test_reverse_compute_at_elementwise_tile():
    mod = chain()
    sch = Schedule(mod)
    i, j = sch.get_loops(sch.get_block("B"))
    io, ii = sch.split(i, [None, 8])
    sch.reverse_compute_at(sch.get_block("C"), io, preserve_unit_loops=True)
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        B = T.alloc_buffer((16, 16))
        for i_0 in range(2):
            for i_1, j in T.grid(8, 16):
                with T.block("B"):
                    v_i = T.axis.spatial(16, i_0 * 8 + i_1)
                    v_j = T.axis.spatial(16, j)
                    T.reads(A[v_i, v_j])
                    T.writes(B[v_i, v_j])
                    B[v_i, v_j] = A[v_i, v_j] * T.float32(2)
            for ax0, ax1 in T.grid(8, 16):
                with T.block("C"):
                    v_i_1 = T.axis.spatial(16, i_0 * 8 + ax0)
                    v_j_1 = T.axis.spatial(16, ax1)
                    T.reads(B[v_i_1, v_j_1])
                    T.writes(C[v_i_1, v_j_1])
                    C[v_i_1, v_j_1] = B[v_i_1, v_j_1] + T.float32(1)
    """)
    check_numeric(sch, chain_ref, rand(16, 16))
    verify_trace_roundtrip(sch, mod)


# ---- refusals ------------------------------------------------------------------------------

def test_compute_at_refuses_output_block():
    sch = Schedule(matmul_relu())
    i, _, _ = sch.get_loops(sch.get_block("C"))
    d = sch.get_block("D")
    check_refused(sch, lambda: sch.compute_at(d, i), "compute_at",
                  "'D'", "output block")


def test_compute_at_refuses_loop_above_the_block():
    sch = Schedule(chain())
    b = sch.get_block("B")
    i, _ = sch.get_loops(b)
    check_refused(sch, lambda: sch.compute_at(b, i), "compute_at",
                  "'B'", "ancestor")


def test_compute_at_refuses_consumers_outside_the_loop():
    sch = Schedule(two_consumers())
    (i,) = sch.get_loops(sch.get_block("C"))
    b = sch.get_block("B")
    check_refused(sch, lambda: sch.compute_at(b, i), "compute_at",
                  "not all consumers", "'D'")


def test_compute_at_refuses_bad_index():
    sch = Schedule(four_stage())
    (i,) = sch.get_loops(sch.get_block("C"))
    sch.compute_at(sch.get_block("U"), i)
    sch.compute_at(sch.get_block("B"), i)
    e = sch.get_block("E")
    check_refused(sch, lambda: sch.compute_at(e, i, index=2), "compute_at",
                  "index 2", "[0, 1]")


def test_reverse_compute_at_refuses_producers_outside_the_loop():
    sch = Schedule(four_stage())
    (i,) = sch.get_loops(sch.get_block("B"))
    c = sch.get_block("C")
    check_refused(sch, lambda: sch.reverse_compute_at(c, i),
                  "reverse_compute_at", "not all producers", "'U'")


def test_compute_at_refuses_removed_loop():
    sch = Schedule(chain())
    i, j = sch.get_loops(sch.get_block("C"))
    sch.fuse(i, j)
    b = sch.get_block("B")
    check_refused(sch, lambda: sch.compute_at(b, i), "compute_at",
                  "no longer exists")


# ---- sample_compute_location -----------------------------------------------------------------

@pytest.mark.parametrize("mod_fn, block, candidates", [
    (broadcast, "B", [-2, -1, 0, 1]),
    (matmul_relu, "C", [-1, 0, 1]),
    (conv_pad, "pad", [-2, -1, 0, 1]),
    (chain, "C", [-1]),
])
def test_sample_compute_location_candidates(mod_fn, block, candidates):
    mod = mod_fn()
    seen = set()
    for seed in range(24):
        sch = Schedule(mod, seed=seed)
        b = sch.get_block(block)
        loc = sch.sample_compute_location(b)
        decision = sch.trace.get_decision(sch.trace.insts[-1])
        assert decision in candidates
        seen.add(decision)
        if block != "C" or mod_fn is not chain:
            sch.compute_at(b, loc)
        verify_trace_roundtrip(sch, mod)
    assert seen == set(candidates)


def test_sample_compute_location_decisions_and_replay_fallback():
    mod = broadcast()
    sch = Schedule(mod)
    b = sch.get_block("B")
    loc = sch.sample_compute_location(b, decision=1)
    assert sch.get(loc) is sch.get(sch.get_loops(sch.get_block("C"))[1])
    for stale, used in ((7, 1), (-1, -1), (-2, -2)):
        s = Schedule(mod)
        s.sample_compute_location(s.get_block("B"), decision=stale)
        assert s.trace.get_decision(s.trace.insts[-1]) == used
    # decision -2 (inline) makes compute_at inline the block; -1 (root) leaves it alone
    s = Schedule(mod)
    s.compute_at(s.get_block("B"), s.sample_compute_location(s.get_block("B"), decision=-2))
    assert "B" not in [s.get(x).name_hint for x in s.get_child_blocks(s.get_block("root"))]
    check_numeric(s, broadcast_ref, rand(8))
    verify_trace_roundtrip(s, mod)
    s = Schedule(mod)
    s.compute_at(s.get_block("B"), s.sample_compute_location(s.get_block("B"), decision=-1))
    assert s.mod["main"].script() == Schedule(mod).mod["main"].script()
    verify_trace_roundtrip(s, mod)


def test_compute_at_special_marks_by_handle():
    mod = broadcast()
    s = Schedule(mod)
    s.compute_at(s.get_block("B"), LoopRV.root())
    assert s.mod["main"].script() == Schedule(mod).mod["main"].script()
    s.reverse_compute_at(s.get_block("C"), LoopRV.root())
    s.compute_at(s.get_block("B"), LoopRV.inline())
    check_numeric(s, broadcast_ref, rand(8))
    assert len(s.trace) == 6
    # The marks print as ``LoopRV.root()`` / ``LoopRV.inline()`` and replay from Python too.
    lines = s.trace.as_python()
    assert any("LoopRV.root()" in ln for ln in lines)
    assert any("LoopRV.inline()" in ln for ln in lines)
    verify_trace_roundtrip(s, mod)


@pytest.mark.parametrize("seed", range(8))
def test_random_tiles_and_locations_keep_results(seed):
    """Random tilings of the convolution and a sampled location for its padding stage (and
    for a relu epilogue of a matmul) never change the result."""
    mod = conv_pad(6, 5)
    sch = Schedule(mod, seed=seed)
    conv = sch.get_block("conv")
    i, j, _, _ = sch.get_loops(conv)
    io, ii = sch.split(i, sch.sample_perfect_tile(i, 2))
    jo, ji = sch.split(j, sch.sample_perfect_tile(j, 2))
    sch.reorder(io, jo, ii, ji)
    pad = sch.get_block("pad")
    sch.compute_at(pad, sch.sample_compute_location(pad))
    check_numeric(sch, conv_pad_ref, rand(6, 5), rand(3, 3, seed=1))
    verify_trace_roundtrip(sch, mod)

    mod = matmul_relu(8, 6, 4)
    sch = Schedule(mod, seed=seed)
    c, d = sch.get_block("C"), sch.get_block("D")
    i, j, _ = sch.get_loops(c)
    io, ii = sch.split(i, [None, 3])
    sch.reverse_compute_at(d, io if seed % 2 else ii)
    check_numeric(sch, matmul_relu_ref, rand(8, 4), rand(4, 6, seed=1))
    verify_trace_roundtrip(sch, mod)


@pytest.mark.parametrize("mod_fn, block", [
    (broadcast, "B"), (matmul_relu, "C"), (conv_pad, "pad"), (chain, "C"),
])
def test_decided_location_agrees_with_the_candidate_list(mod_fn, block):
    """Replaying a stored decision checks only that location; it must accept exactly the
    decisions the full candidate list holds, at the same loops."""
    from workbench.tir.schedule.primitive.compute_location import (
        collect_compute_location, decided_compute_location,
    )
    sch = Schedule(mod_fn())
    func, index = sch._func, sch._index()
    listed = dict(collect_compute_location(func, index, block))
    for decision in range(-2, 8):
        got = decided_compute_location(func, index, block, decision)
        if decision in listed:
            assert got is listed[decision]
        else:
            assert got is None
