"""te workloads and checks shared by the reduction / rfactor / blockize schedule tests."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from workbench import te
from workbench.ir.structural import structural_equal
from workbench.tir import interpreter
from workbench.tir.schedule import Schedule, ScheduleError
from workbench.tir.schedule.testing import verify_trace_roundtrip
from workbench.tir.transform import lower


def matmul(m: int = 8, n: int = 4, k: int = 16):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
    return te.create_prim_func([A, B, C])


def row_reduce(reducer: Callable = te.sum, m: int = 8, n: int = 16, where: bool = False):
    A = te.placeholder((m, n), name="A")
    r = te.reduce_axis((0, n), name="k")
    cond = (r.var < n - 3) if where else None
    B = te.compute((m,), lambda i: reducer(A[i, r], axis=r, where=cond), name="B")
    return te.create_prim_func([A, B])


def sum_2axis(m: int = 4, n: int = 6, p: int = 8):
    """B[i] = sum over (j, k) of A[i, j, k]: two reduction loops."""
    A = te.placeholder((m, n, p), name="A")
    j = te.reduce_axis((0, n), name="j")
    k = te.reduce_axis((0, p), name="k")
    B = te.compute((m,), lambda i: te.sum(A[i, j, k], axis=[j, k]), name="B")
    return te.create_prim_func([A, B])


def softmax_like(m: int = 4, n: int = 16):
    """Row max, then exp(A - max): the first half of a softmax."""
    A = te.placeholder((m, n), name="A")
    r = te.reduce_axis((0, n), name="k")
    M = te.compute((m,), lambda i: te.max(A[i, r], axis=r), name="M")
    E = te.compute((m, n), lambda i, j: te.exp(A[i, j] - M[i]), name="E")
    return te.create_prim_func([A, E])


def elementwise(m: int = 16, n: int = 8):
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: A[i, j] * 2.0, name="B")
    return te.create_prim_func([A, B])


def two_stages(m: int = 8, n: int = 4):
    A = te.placeholder((m, n), name="A")
    B = te.compute((m, n), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((m, n), lambda i, j: B[i, j] * 3.0, name="C")
    return te.create_prim_func([A, C])


# ---- numpy references: inputs -> the last (output) argument ---------------------------------

def ref_matmul(a, b):
    return a @ b


def ref_softmax_like(a):
    return np.exp(a - a.max(axis=1, keepdims=True))


def inputs_for(func, seed: int = 0) -> list[np.ndarray]:
    """Random inputs and zeroed outputs (NaN would hide nothing: every output is written)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for p in func.params:
        buf = func.buffer_map[p]
        shape = tuple(int(s.value) for s in buf.shape)
        arrays.append(rng.uniform(0.5, 1.5, shape).astype(buf.dtype))
    arrays[-1][...] = 0
    return arrays


def check_numerics(sch: Schedule, original, reference: Callable, rtol: float = 1e-5) -> None:
    """Run the scheduled IR (block form, and lowered) in the interpreter against numpy, and
    check that the trace round-trips."""
    func = sch.mod["main"]
    for f in (func, lower(sch.mod)["main"]):
        arrays = inputs_for(original)
        interpreter.run(f, *arrays)
        np.testing.assert_allclose(arrays[-1], reference(*arrays[:-1]), rtol=rtol, atol=1e-5)
    verify_trace_roundtrip(sch, original)


def assert_schedule_error(sch: Schedule, call: Callable[[], object], match: str) -> None:
    """``call`` raises ScheduleError matching ``match`` and leaves the schedule unchanged."""
    before, n_insts = sch.mod, len(sch.trace)
    with pytest.raises(ScheduleError, match=match):
        call()
    assert structural_equal(before, sch.mod)
    assert len(sch.trace) == n_insts


__all__ = ["matmul", "row_reduce", "sum_2axis", "softmax_like", "elementwise", "two_stages",
           "ref_matmul", "ref_softmax_like", "inputs_for", "check_numerics",
           "assert_schedule_error"]
