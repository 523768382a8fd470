"""Relax VM overhead: per-Call cost on a chain of 1,000 tiny kernels (target <= 5 us per call,
including the kernel's own ~1 us packed-call cost).

The program, built with ExecBuilder, is what a memory-planned compiler would emit::

    main(x):  storage = alloc_storage(2 * 64 bytes); a, b = two tensors in it
              add_one(x, a); add_one(a, b); add_one(b, a); ...   (1,000 kernel calls)
              return the last one

Printed (medians over several rounds, microseconds per kernel call):

- ``vm``: ``vm["main"](x)`` divided by the number of kernel calls;
- ``direct``: the same 1,000 calls from a Python loop (the kernel's own packed-call cost);
- ``vm overhead``: ``vm - direct``, the interpreter's share per Call instruction;
- ``vm + instrument``: with a no-op instrument (the slow, hooked loop), for scale;
- ``unplanned``: a variant allocating a fresh tensor (alloc_storage + alloc_tensor) before
  every kernel call, as code without memory planning would.

Fusion and memory-planning comparisons (compiled graphs) belong to the relax compiler and are
added to this script when it exists.
"""
from __future__ import annotations

import statistics
import time

import numpy as np

import workbench as wb
from workbench import te
from workbench.runtime.relax_vm import DataType, ExecBuilder, VirtualMachine

N_CALLS = 1000
ROUNDS = 15
SIZE = 4


def build_kernel() -> wb.runtime.Module:
    A = te.placeholder((SIZE,), name="A")
    B = te.compute((SIZE,), lambda i: A[i] + 1.0, name="B")
    return wb.build(te.create_prim_func([A, B]), name="add_one")


def planned_chain(lib: wb.runtime.Module, n: int):
    ib = ExecBuilder()
    f32 = DataType("float32")
    with ib.function("main", num_inputs=1, param_names=["x"]):
        ib.emit_call("vm.builtin.alloc_storage",
                     args=[ib.vm_state(), (128,), ib.imm(0), DataType("uint8"),
                           ib.convert_constant("global")], dst=ib.r(1))
        ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(1), ib.imm(0), (SIZE,), f32],
                     dst=ib.r(2))
        ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(1), ib.imm(64), (SIZE,), f32],
                     dst=ib.r(3))
        src = ib.r(0)
        for i in range(n):
            dst = ib.r(2 + i % 2)
            ib.emit_call("add_one", args=[src, dst])
            src = dst
        ib.emit_ret(src)
    exe = ib.get()
    exe.import_module(lib)
    return exe


def unplanned_chain(lib: wb.runtime.Module, n: int):
    ib = ExecBuilder()
    f32 = DataType("float32")
    with ib.function("main", num_inputs=1, param_names=["x"]):
        src = ib.r(0)
        reg = 1
        for _ in range(n):
            ib.emit_call("vm.builtin.alloc_storage",
                         args=[ib.vm_state(), (SIZE * 4,), ib.imm(0), DataType("uint8"),
                               ib.convert_constant("global")], dst=ib.r(reg))
            ib.emit_call("vm.builtin.alloc_tensor", args=[ib.r(reg), ib.imm(0), (SIZE,), f32],
                         dst=ib.r(reg + 1))
            ib.emit_call("add_one", args=[src, ib.r(reg + 1)])
            src = ib.r(reg + 1)
            reg += 2
        ib.emit_ret(src)
    exe = ib.get()
    exe.import_module(lib)
    return exe


def median_us(fn, per: int) -> float:
    fn()  # warm-up
    samples = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t0) / 1e3 / per)
    return statistics.median(samples)


def main() -> None:
    lib = build_kernel()
    kernel = lib["add_one"]
    x = wb.nd.array(np.zeros(SIZE, dtype="float32"))
    vm = VirtualMachine(planned_chain(lib, N_CALLS), wb.cpu())
    out = vm["main"](x)
    assert np.allclose(out.numpy(), N_CALLS), "the chain computed the wrong value"

    a = wb.nd.empty((SIZE,), "float32")
    b = wb.nd.empty((SIZE,), "float32")

    def direct() -> None:
        kernel(x, a)
        for i in range(N_CALLS - 1):
            if i % 2:
                kernel(b, a)
            else:
                kernel(a, b)

    main_fn = vm["main"]
    t_vm = median_us(lambda: main_fn(x), N_CALLS)
    t_direct = median_us(direct, N_CALLS)
    vm.set_instrument(lambda *args: None)
    t_instr = median_us(lambda: main_fn(x), N_CALLS)
    vm.set_instrument(None)
    vm2 = VirtualMachine(unplanned_chain(lib, N_CALLS), wb.cpu())
    t_unplanned = median_us(lambda: vm2["main"](x), N_CALLS)

    print(f"chain of {N_CALLS} kernel calls on float32[{SIZE}] (median of {ROUNDS} runs, "
          "us per kernel call)")
    print(f"  vm                 {t_vm:7.3f}   (target <= 5)")
    print(f"  direct (Python)    {t_direct:7.3f}")
    print(f"  vm overhead        {t_vm - t_direct:7.3f}   (vm - direct, per Call instruction)")
    print(f"  vm / direct        {t_vm / t_direct:7.2f}x")
    print(f"  vm + instrument    {t_instr:7.3f}")
    print(f"  unplanned (3 calls per kernel: alloc_storage, alloc_tensor, kernel) "
          f"{t_unplanned:7.3f}")


if __name__ == "__main__":
    main()
