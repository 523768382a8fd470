"""A parameter's layout is the caller's: lowering never re-strides it (issue 11, example 3).

The "LLVM abort" of issue 11 was not LLVM's fault. After ``storage_align(T_relu, 0, 0, 4, 1)``
and ``reverse_compute_inline(T_subtract)``, T_relu wrote the function's output with the
alignment annotation still on it; lowering gave the *parameter* padded strides (row stride 9
instead of 6), so the kernel stored 33 floats into the caller's 24-float array. That heap
overflow corrupted malloc's bookkeeping, and the next allocation to notice it aborted the
process: often inside LLVM's pass manager, the biggest allocator around, hence the stack in
the report (``Fatal Python error: Aborted``; the module itself verified and compiled fine).

Fixed in code generation: the lowering ignores an alignment annotation on a parameter (as TVM
does; storage_align only re-lays out buffers the function allocates), and ``verify_prim_func``
refuses any access through a view of a parameter that spans more than the caller's array.
Whether the schedule should refuse or drop the annotation is the schedule's own business.
"""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import te, topi
from workbench.tir.analysis.verify import IRVerifyError, verify_prim_func
from workbench.tir.buffer import Buffer
from workbench.tir.expr import BufferLoad, IntImm
from workbench.tir.functor import IRMutator, IRVisitor
from workbench.tir.schedule import Schedule, ScheduleError
from workbench.tir.stmt import Block, BufferStore

GUARD = np.float32(-7777.0)


def _elementwise():
    """relu(x * 2 + y) - z: the workload of the property test that found it."""
    x, y, z = (te.placeholder((4, 6), name="X"), te.placeholder((6,), name="Y"),
               te.placeholder((4, 1), name="Z"))
    d = topi.nn.relu(topi.add(topi.multiply(x, 2.0), y))
    return te.create_prim_func([x, y, z, topi.subtract(d, z)])


def _inputs():
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal(s).astype("float32") for s in ((4, 6), (6,), (4, 1)))
    return x, y, z, np.maximum(x * 2 + y, 0) - z


def _guarded_output(shape, dtype="float32"):
    """An NDArray whose elements are followed by 64 guard values, so a write past its end is
    seen (an ordinary NDArray has unpredictable slack after it)."""
    n = int(np.prod(shape))
    raw = np.full(n + 64 + 16, GUARD, dtype)
    start = (-raw.ctypes.data % 64) // raw.itemsize   # the kernel ABI wants 64-byte alignment
    out = wb.nd.empty(shape, dtype)
    view = raw[start:start + n].reshape(shape)
    view[...] = np.nan
    out._view, out._ptr = view, view.ctypes.data   # test-only: point the NDArray at `raw`
    return out, raw[start + n:start + n + 64]


def _run_checked(func) -> None:
    x, y, z, expected = _inputs()
    rt = wb.build(func)
    out, guard = _guarded_output((4, 6))
    rt["main"](wb.nd.array(x), wb.nd.array(y), wb.nd.array(z), out)
    assert (guard == GUARD).all(), "the kernel wrote past the end of its output"
    np.testing.assert_allclose(out.numpy(), expected, rtol=1e-6)


class _AlignBlock(IRMutator):
    """Puts a ``buffer_dim_align`` annotation on one block (what storage_align records)."""

    def __init__(self, name: str, entry: tuple) -> None:
        super().__init__()
        self.name, self.entry = name, entry

    def visit_Block(self, block: Block) -> Block:
        block = self.generic_visit(block)
        if block.name_hint != self.name:
            return block
        return block.replace(annotations={**block.annotations,
                                          "buffer_dim_align": (self.entry,)})


def _param_views(func, param: Buffer) -> list[Buffer]:
    found = []

    class _V(IRVisitor):
        def visit_BufferStore(self, s: BufferStore) -> None:
            if s.buffer.data is param.data:
                found.append(s.buffer)
            self.generic_visit(s)

        def visit_BufferLoad(self, e: BufferLoad) -> None:
            if e.buffer.data is param.data:
                found.append(e.buffer)
            self.generic_visit(e)

    _V().visit(func.body)
    return found


@pytest.mark.parametrize("factor,offset", [(4, 1), (8, 3), (4, 0)])
def test_alignment_on_a_block_writing_an_output_leaves_the_output_compact(factor, offset):
    func = _elementwise()
    out_param = func.buffer_map[func.params[-1]]
    # The block writing the output carries an alignment (hand-made: the schedule may refuse
    # to make this itself), as it did after reverse_compute_inline in the issue's trace.
    aligned = func.with_body(_AlignBlock("T_subtract", (0, 0, factor, offset)).visit(func.body))
    lowered = wb.lower(aligned)["main"]
    views = _param_views(lowered, out_param)
    assert views and all(not v.strides and v.shape[0].value == 24 for v in views), views
    _run_checked(aligned)


def test_alignment_of_an_intermediate_still_pads_it():
    """The fix is only for parameters: storage_align of an allocated buffer keeps working."""
    func = _elementwise()
    aligned = func.with_body(_AlignBlock("T_add", (0, 0, 8, 3)).visit(func.body))
    script = wb.lower(aligned)["main"].script()
    assert "* 11 +" in script, script   # row stride 6 padded to 11 (11 % 8 == 3)
    _run_checked(aligned)


def test_the_issue_trace_builds_right_or_is_refused():
    """The 8-step trace of issue 11 (examples 2 and 3). Either the schedule refuses a step
    (the legality side) or the kernel computes the right numbers without writing past its
    output (this side); it used to write 33 floats into 24."""
    sch = Schedule(wb.IRModule({"main": _elementwise()}), seed=2374)
    try:
        blk = sch.get_block("T_multiply")
        sch.add_unit_loop(sch.get_loops(blk)[0])
        sch.add_unit_loop(sch.get_loops(blk)[0])
        loc = sch.sample_compute_location(blk, decision=1)
        sch.compute_at(blk, loc)
        sch.storage_align(sch.get_block("T_relu"), 0, 0, 4, 1)
        sch.reverse_compute_inline(sch.get_block("T_subtract"))
        sch.cache_read(sch.get_block("T_add"), 0, "global")
    except ScheduleError:
        return
    _run_checked(sch.mod["main"])


def test_verifier_refuses_a_view_that_overruns_a_parameter():
    """Whatever pass would produce it next, an access that spans past a parameter's end is
    refused before LLVM, naming the buffer and both sizes."""
    func = _elementwise()
    out_param = func.buffer_map[func.params[-1]]
    lowered = wb.lower(func)["main"]
    padded = out_param.replace(shape=(IntImm("int32", 33),), strides=())

    class _Pad(IRMutator):
        def visit_BufferStore(self, s: BufferStore):
            s = self.generic_visit(s)
            return s.replace(buffer=padded) if s.buffer.data is out_param.data else s

    bad = lowered.with_body(_Pad().visit(lowered.body))
    with pytest.raises(IRVerifyError, match=r"'T_subtract'.*spans 33 elements.*has 24"):
        verify_prim_func(bad)
    verify_prim_func(lowered)   # the real lowering passes


def test_a_parameter_declared_with_padded_strides_is_refused():
    a = te.placeholder((4, 6), name="A")
    b = te.compute((4, 6), lambda i, j: a[i, j] + 1.0, name="B")
    func = te.create_prim_func([a, b])
    old = func.buffer_map[func.params[0]]
    strided = old.replace(strides=(IntImm("int32", 8), IntImm("int32", 1)))

    class _Swap(IRMutator):
        def rewrite_buffer(self, buf):
            return strided if buf is old else super().rewrite_buffer(buf)

    body = _Swap().visit(func.body)
    bad = func.replace(buffer_map={**func.buffer_map, func.params[0]: strided}, body=body)
    with pytest.raises(IRVerifyError, match="spans 30 elements but the caller's array has 24"):
        wb.build(bad)
