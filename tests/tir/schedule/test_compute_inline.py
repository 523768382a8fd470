"""compute_inline and reverse_compute_inline on te workloads.

Printed IR is compared with text written here (checked by hand against TVM's behaviour), results
with numpy through the interpreter, and traces round-trip through JSON and Python. Refused
requests raise ScheduleError and leave the schedule unchanged.
"""
from __future__ import annotations

import numpy as np
from compute_location_workloads import (
    assert_script, broadcast, broadcast_ref, chain, chain_1d, chain_ref, check_numeric,
    check_refused, conv_pad, conv_pad_ref, matmul_relu, rand, transpose_epilogue, two_consumers,
    two_inputs,
)

from workbench.tir import interpreter
from workbench.tir.schedule import Schedule
from workbench.tir.schedule.testing import verify_trace_roundtrip


# ---- compute_inline ----------------------------------------------------------------------------

def test_compute_inline_elementwise_chain():
    mod = chain()
    sch = Schedule(mod)
    sch.compute_inline(sch.get_block("B"))
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        for i, j in T.grid(16, 16):
            with T.block("C"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                T.reads(A[v_i, v_j])
                T.writes(C[v_i, v_j])
                C[v_i, v_j] = A[v_i, v_j] * T.float32(2) + T.float32(1)
    """)
    check_numeric(sch, chain_ref, rand(16, 16))
    verify_trace_roundtrip(sch, mod)


def test_compute_inline_into_two_consumers():
    mod = two_consumers()
    sch = Schedule(mod)
    sch.compute_inline(sch.get_block("B"))
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8,), "float32"), D: T.Buffer((8,), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        for i in range(8):
            with T.block("C"):
                v_i = T.axis.remap("S", [i])
                T.reads(A[v_i])
                T.writes(C[v_i])
                C[v_i] = A[v_i] * T.float32(2) + T.float32(1)
        for i_1 in range(8):
            with T.block("D"):
                v_i_1 = T.axis.remap("S", [i_1])
                T.reads(A[v_i_1])
                T.writes(D[v_i_1])
                D[v_i_1] = A[v_i_1] * T.float32(2) * T.float32(3)
    """)
    a = rand(8)
    c, d = np.zeros(8, "float32"), np.zeros(8, "float32")
    interpreter.run(sch.mod["main"], a, c, d)
    np.testing.assert_allclose(c, a * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(d, a * 2 * 3, rtol=1e-6)
    verify_trace_roundtrip(sch, mod)


def test_compute_inline_padding_into_convolution():
    mod = conv_pad()
    sch = Schedule(mod)
    sch.compute_inline(sch.get_block("pad"))
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((6, 6), "float32"), W: T.Buffer((3, 3), "float32"), conv: T.Buffer((6, 6), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        for i, j, ry, rx in T.grid(6, 6, 3, 3):
            with T.block("conv"):
                v_i, v_j, v_ry, v_rx = T.axis.remap("SSRR", [i, j, ry, rx])
                T.reads(A[v_i + v_ry - 1, v_j + v_rx - 1], W[v_ry, v_rx])
                T.writes(conv[v_i, v_j])
                with T.init():
                    conv[v_i, v_j] = T.float32(0)
                conv[v_i, v_j] = conv[v_i, v_j] + T.if_then_else(v_i + v_ry >= 1 and v_i + v_ry < 7 and v_j + v_rx >= 1 and v_j + v_rx < 7, A[v_i + v_ry - 1, v_j + v_rx - 1], T.float32(0)) * W[v_ry, v_rx]
    """)
    check_numeric(sch, conv_pad_ref, rand(6, 6), rand(3, 3, seed=1))
    verify_trace_roundtrip(sch, mod)


def test_compute_inline_into_broadcast_consumer_after_compute_at():
    mod = broadcast()
    sch = Schedule(mod)
    b = sch.get_block("B")
    _, j = sch.get_loops(sch.get_block("C"))
    sch.compute_at(b, j)
    sch.compute_inline(b)
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((8,), "float32"), C: T.Buffer((8, 4), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        for i, j in T.grid(8, 4):
            with T.block("C"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                T.reads(A[v_i])
                T.writes(C[v_i, v_j])
                C[v_i, v_j] = A[v_i] * T.float32(2) + T.float32(1)
    """)
    check_numeric(sch, broadcast_ref, rand(8))
    verify_trace_roundtrip(sch, mod)


def test_compute_inline_refuses_reduction():
    sch = Schedule(matmul_relu())
    c = sch.get_block("C")
    check_refused(sch, lambda: sch.compute_inline(c), "compute_inline", "'C'", "reduction")


def test_compute_inline_refuses_output_block():
    sch = Schedule(chain())
    c = sch.get_block("C")
    check_refused(sch, lambda: sch.compute_inline(c), "compute_inline", "'C'", "output block")


def test_compute_inline_refuses_root_block():
    sch = Schedule(chain())
    root = sch.get_block("root")
    check_refused(sch, lambda: sch.compute_inline(root), "compute_inline", "root block")


def test_compute_inline_refuses_removed_block():
    sch = Schedule(chain())
    b = sch.get_block("B")
    sch.compute_inline(b)
    check_refused(sch, lambda: sch.compute_inline(b), "compute_inline", "no longer exists")


# ---- reverse_compute_inline ----------------------------------------------------------------

def test_reverse_compute_inline_elementwise_chain():
    mod = chain()
    sch = Schedule(mod)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        for i, j in T.grid(16, 16):
            with T.block("B"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                T.reads(A[v_i, v_j])
                T.writes(C[v_i, v_j])
                C[v_i, v_j] = A[v_i, v_j] * T.float32(2) + T.float32(1)
    """)
    check_numeric(sch, chain_ref, rand(16, 16))
    verify_trace_roundtrip(sch, mod)


def test_reverse_compute_inline_transposed_store():
    mod = transpose_epilogue()
    sch = Schedule(mod)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((4, 6), "float32"), C: T.Buffer((6, 4), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        for i, j in T.grid(4, 6):
            with T.block("B"):
                v_i, v_j = T.axis.remap("SS", [i, j])
                T.reads(A[v_i, v_j])
                T.writes(C[v_j, v_i])
                C[v_j, v_i] = A[v_i, v_j] * T.float32(2) + T.float32(1)
    """)
    check_numeric(sch, lambda a: (a * 2 + 1).T, rand(4, 6))
    verify_trace_roundtrip(sch, mod)


def test_reverse_compute_inline_smaller_consumer_adds_predicate():
    mod = chain_1d(16, 8)
    sch = Schedule(mod)
    sch.reverse_compute_inline(sch.get_block("C"))
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((16,), "float32"), C: T.Buffer((8,), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        for i in range(16):
            with T.block("B"):
                v_i = T.axis.remap("S", [i])
                T.where(i < 8)
                T.reads(A[v_i])
                T.writes(C[v_i])
                C[v_i] = A[v_i] * T.float32(2) + T.float32(1)
    """)
    check_numeric(sch, lambda a: (a * 2 + 1)[:8], rand(16))
    verify_trace_roundtrip(sch, mod)


def test_reverse_compute_inline_under_tiled_producer():
    mod = chain()
    sch = Schedule(mod)
    i, j = sch.get_loops(sch.get_block("B"))
    sch.split(j, [None, 4])
    sch.reverse_compute_inline(sch.get_block("C"))
    assert_script(sch, """
    @T.prim_func
    def main(A: T.Buffer((16, 16), "float32"), C: T.Buffer((16, 16), "float32")):
        T.func_attr({"tir.noalias": True})
        # with T.block("root"):
        for i, j_0, j_1 in T.grid(16, 4, 4):
            with T.block("B"):
                v_i = T.axis.spatial(16, i)
                v_j = T.axis.spatial(16, j_0 * 4 + j_1)
                T.reads(A[v_i, v_j])
                T.writes(C[v_i, v_j])
                C[v_i, v_j] = A[v_i, v_j] * T.float32(2) + T.float32(1)
    """)
    check_numeric(sch, chain_ref, rand(16, 16))
    verify_trace_roundtrip(sch, mod)


def test_reverse_compute_inline_refuses_reduction_producer():
    sch = Schedule(matmul_relu())
    d = sch.get_block("D")
    check_refused(sch, lambda: sch.reverse_compute_inline(d), "reverse_compute_inline",
                  "'D'", "producer 'C' must be a complete block")


def test_reverse_compute_inline_refuses_two_produced_inputs():
    sch = Schedule(two_inputs())
    c = sch.get_block("C")
    check_refused(sch, lambda: sch.reverse_compute_inline(c), "reverse_compute_inline",
                  "reads 2 buffers", "'B1'", "'B2'")


def test_reverse_compute_inline_refuses_broadcast_consumer():
    sch = Schedule(broadcast())
    c = sch.get_block("C")
    check_refused(sch, lambda: sch.reverse_compute_inline(c), "reverse_compute_inline",
                  "'v_j'", "does not index 'B'")


def test_reverse_compute_inline_refuses_buffer_with_other_readers():
    sch = Schedule(two_consumers())
    c = sch.get_block("C")
    check_refused(sch, lambda: sch.reverse_compute_inline(c), "reverse_compute_inline",
                  "also read by ['D']")


def test_reverse_compute_inline_refuses_consumer_with_predicate():
    mod = chain_1d(10)
    sch = Schedule(mod)
    (i,) = sch.get_loops(sch.get_block("C"))
    sch.split(i, [None, 4])
    c = sch.get_block("C")
    check_refused(sch, lambda: sch.reverse_compute_inline(c), "reverse_compute_inline",
                  "predicate")
