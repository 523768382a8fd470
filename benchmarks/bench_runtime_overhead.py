"""Call overhead of a 3-argument PackedFunc on tiny arrays (target: median <= 5 us).

Prints the median time per call of

- ``packed``: ``f(a, b, c)`` through the runtime (argument checks, shape-variable binding,
  slot filling, the native call, return-code check);
- ``bare ctypes``: the same kernel called through ctypes with a prefilled slot array (the
  floor any Python caller pays);
- ``numpy``: ``np.add(a, b, out=c)`` on the same 4-element arrays, for scale;

and the ratios packed / bare and packed / numpy. The kernel is hand-written LLVM IR following
the kernel ABI (docs/internals.md) until codegen can produce it.
"""
from __future__ import annotations

import ctypes
import json
import statistics
import time

import llvmlite.binding as llvm
import numpy as np

import workbench.runtime as rt

N = 4
BATCH = 20_000
ROUNDS = 15

IR = """
define i32 @add(ptr %args) {
entry:
  %pa = load ptr, ptr %args
  %sb = getelementptr i64, ptr %args, i64 1
  %pb = load ptr, ptr %sb
  %sc = getelementptr i64, ptr %args, i64 2
  %pc = load ptr, ptr %sc
  %sn = getelementptr i64, ptr %args, i64 3
  %n = load i64, ptr %sn
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %ea = getelementptr float, ptr %pa, i64 %i
  %eb = getelementptr float, ptr %pb, i64 %i
  %ec = getelementptr float, ptr %pc, i64 %i
  %va = load float, ptr %ea
  %vb = load float, ptr %eb
  %s = fadd float %va, %vb
  store float %s, ptr %ec
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret i32 0
}
"""
META = {"version": 1, "entry": "add", "functions": [{"name": "add", "params": [
    {"name": n, "kind": "buffer", "dtype": "float32", "shape": ["n"]} for n in "ABC"],
    "shape_vars": ["n"]}]}


def build() -> rt.Module:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    data = json.dumps(META).encode() + b"\0"
    glob = (f'@__workbench_metadata = constant [{len(data)} x i8] c"'
            + "".join(f"\\{b:02X}" for b in data) + '"\n')
    mod = llvm.parse_assembly(glob + IR)
    mod.triple = llvm.get_process_triple()
    tm = llvm.Target.from_default_triple().create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(),
        opt=2, reloc="pic", codemodel="default")
    return rt.Module.from_object(tm.emit_object(mod))


def per_call_ns(fn, *args) -> float:
    """Median over ROUNDS of the mean time per call in a batch of BATCH calls."""
    rounds = []
    for _ in range(ROUNDS):
        start = time.perf_counter_ns()
        for _ in range(BATCH):
            fn(*args)
        rounds.append((time.perf_counter_ns() - start) / BATCH)
    return statistics.median(rounds)


def main() -> None:
    mod = build()
    f = mod["add"]
    a = rt.tensor(np.arange(N, dtype="float32"))
    b = rt.tensor(np.ones(N, dtype="float32"))
    c = rt.empty(N, "float32")
    f(a, b, c)
    assert np.array_equal(c.numpy(), a.numpy() + b.numpy())

    raw = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(mod._specs["add"][2])
    slots = (ctypes.c_int64 * 4)(a.data_ptr, b.data_ptr, c.data_ptr, N)
    addr = ctypes.addressof(slots)
    na, nb, nc = a.numpy(copy=False), b.numpy(copy=False), c.numpy(copy=False)

    packed = per_call_ns(f, a, b, c)
    bare = per_call_ns(raw, addr)
    npadd = per_call_ns(np.add, na, nb, nc)
    print(f"PackedFunc call overhead, 3 float32[{N}] arrays ({BATCH} calls x {ROUNDS} rounds)")
    print(f"  packed       {packed / 1000:7.3f} us   (target <= 5 us)")
    print(f"  bare ctypes  {bare / 1000:7.3f} us")
    print(f"  numpy add    {npadd / 1000:7.3f} us")
    print(f"  ratio packed / bare ctypes  {packed / bare:6.2f}x")
    print(f"  ratio packed / numpy add    {packed / npadd:6.2f}x")


if __name__ == "__main__":
    main()
