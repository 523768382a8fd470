"""Relax VM overhead: per-Call cost on a chain of 1,000 tiny kernels (target <= 5 us per call,
including the kernel's own ~1 us packed-call cost).

The program, built with ExecBuilder, is what a memory-planned compiler would emit::

    main(x):  storage = alloc_storage(2 * 64 bytes); a, b = two tensors in it
              add_one(x, a); add_one(a, b); add_one(b, a); ...   (1,000 kernel calls)
              return the last one

Printed (medians over several rounds, microseconds per kernel call):

- ``vm``: ``vm["main"](x)`` divided by the number of kernel calls (static replay: the
  function is recorded on its first call and replayed as native calls, relax_vm/replay.py);
- ``vm, interpreted``: the same with the option ``vm_static_replay`` off (the bytecode loop);
- ``direct``: the same 1,000 calls from a Python loop (the kernel's own packed-call cost);
- ``vm overhead``: ``vm, interpreted - direct``, the interpreter's share per Call instruction;
- ``vm + instrument``: with a no-op instrument (the slow, hooked loop), for scale;
- ``unplanned``: a variant allocating a fresh tensor (alloc_storage + alloc_tensor) before
  every kernel call, as code without memory planning would.

Compiled graphs (the relax compiler, ``relax.build``), on a transformer block (layer norm,
2-head attention, MLP, residuals; batch 4, sequence 32, width 64) built with ``relax.frontend.nn``:

- fusion: unique kernels and kernel launches per call, and the median time of ``vm["forward"]``
  with fusion on and off (kernels are unscheduled serial loops; the tuner schedules them later);
- memory: bytes allocated per call with and without memory planning
  (``exe.memory_usage``; the planned number is checked against the bytes ``alloc_storage``
  really allocates during a run).
"""
from __future__ import annotations

import statistics
import time

import numpy as np

import workbench as wb
from workbench import options, te
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
    with options.override(vm_static_replay=False):
        interpreted = VirtualMachine(planned_chain(lib, N_CALLS), wb.cpu())["main"]
    t_interp = median_us(lambda: interpreted(x), N_CALLS)
    t_direct = median_us(direct, N_CALLS)
    vm.set_instrument(lambda *args: None)
    t_instr = median_us(lambda: main_fn(x), N_CALLS)
    vm.set_instrument(None)
    vm2 = VirtualMachine(unplanned_chain(lib, N_CALLS), wb.cpu())
    t_unplanned = median_us(lambda: vm2["main"](x), N_CALLS)

    print(f"chain of {N_CALLS} kernel calls on float32[{SIZE}] (median of {ROUNDS} runs, "
          "us per kernel call)")
    print(f"  vm                 {t_vm:7.3f}   (target <= 5; static replay)")
    print(f"  vm, interpreted    {t_interp:7.3f}")
    print(f"  direct (Python)    {t_direct:7.3f}")
    print(f"  vm overhead        {t_interp - t_direct:7.3f}   (interpreted - direct, per Call "
          "instruction)")
    print(f"  vm / direct        {t_vm / t_direct:7.2f}x (interpreted {t_interp / t_direct:.2f}x)")
    print(f"  vm + instrument    {t_instr:7.3f}")
    print(f"  unplanned (3 calls per kernel: alloc_storage, alloc_tensor, kernel) "
          f"{t_unplanned:7.3f}")



# -- compiled graphs: fusion and memory planning (relax compiler) --------------------------------

GRAPH_BATCH, GRAPH_SEQ, GRAPH_DIM, GRAPH_HEADS = 4, 32, 64, 2


def transformer_block():
    """``(IRModule, params)`` of a pre-norm transformer block exported with relax.frontend.nn."""
    from workbench.relax.frontend import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            d = GRAPH_DIM
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
            self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

        def forward(self, x):
            b, s, d, h = GRAPH_BATCH, GRAPH_SEQ, GRAPH_DIM, GRAPH_HEADS
            y = self.ln1(x)
            q, k, v = (nn.op.reshape(m(y), [b, s, h, d // h]) for m in (self.q, self.k, self.v))
            x = x + self.o(nn.op.reshape(nn.op.scaled_dot_product_attention(q, k, v), [b, s, d]))
            return x + self.fc2(nn.relu(self.fc1(self.ln2(x))))

    model = Block()
    spec = {"forward": {"x": nn.spec.Tensor((GRAPH_BATCH, GRAPH_SEQ, GRAPH_DIM), "float32")}}
    mod, named = model.export_tvm(spec)
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal(p.shape) * 0.1).astype("float32") for _, p in named]
    return mod, params


def kernel_launches(exe, func: str = "forward") -> int:
    from workbench.runtime.relax_vm.bytecode import Call
    kernels = {n for n in exe.kernel_names if not n.startswith("shape_func")}
    return sum(isinstance(i, Call) and exe.func_table[i.func_idx].name in kernels
               for i in exe.instructions(exe.function_info(func)))


def allocated_bytes(exe, args) -> int:
    """Bytes ``vm.builtin.alloc_storage`` allocates during one call (an instrument counts)."""
    vm = VirtualMachine(exe, wb.cpu())
    sizes = []

    def count(func, name, before_run, ret, *call_args):
        if before_run and name == "vm.builtin.alloc_storage":
            sizes.append(int(np.prod(call_args[1])))
    vm.set_instrument(count)
    vm["forward"](*args)
    return sum(sizes)


def graph_main() -> None:
    from workbench import relax
    mod, params = transformer_block()
    x = np.random.default_rng(1).standard_normal(
        (GRAPH_BATCH, GRAPH_SEQ, GRAPH_DIM)).astype("float32")
    args = [wb.nd.array(x)] + [wb.nd.array(p) for p in params]
    results = {}
    for label, kw in (("fused", {}), ("unfused", {"fuse": False}),
                      ("fused, unplanned", {"plan_memory": False})):
        exe = relax.build(mod, "llvm", **kw)
        vm = VirtualMachine(exe, wb.cpu())
        out = vm["forward"](*args).numpy()
        timer = vm.time_evaluator("forward", wb.cpu(), number=3, repeat=5)
        results[label] = (exe, out, timer(*args).median * 1e3)
    ref = results["unfused"][1]
    for label, (_, out, _) in results.items():
        assert np.allclose(out, ref, rtol=1e-4, atol=1e-5), f"{label} differs from unfused"
    print(f"\ntransformer block, batch {GRAPH_BATCH} x seq {GRAPH_SEQ} x dim {GRAPH_DIM} "
          f"({GRAPH_HEADS} heads), unscheduled kernels")
    print(f"  {'':18s}{'kernels':>8s}{'launches':>10s}{'ms/call':>10s}")
    for label in ("fused", "unfused"):
        exe, _, ms = results[label]
        n_kernels = len([k for k in exe.kernel_names if not k.startswith("shape_func")])
        print(f"  {label:18s}{n_kernels:8d}{kernel_launches(exe):10d}{ms:10.2f}")
    fused_ms, unfused_ms = results["fused"][2], results["unfused"][2]
    print(f"  fusion speedup     {unfused_ms / fused_ms:.2f}x")
    planned, unplanned = results["fused"][0], results["fused, unplanned"][0]
    p = planned.memory_usage["forward"]
    u = unplanned.memory_usage["forward"]
    measured = allocated_bytes(planned, args)
    assert measured == p.planned_bytes, (measured, p.planned_bytes)
    print(f"  memory per call    planned {p.planned_bytes / 1024:8.1f} KiB in "
          f"{p.planned_count} storages, unplanned {u.planned_bytes / 1024:8.1f} KiB in "
          f"{u.planned_count} ({100 * p.planned_bytes / u.planned_bytes:.0f}%; measured "
          f"{measured / 1024:.1f} KiB)")


if __name__ == "__main__":
    main()
    graph_main()
