"""What crash isolation costs: compile times in-process vs through the compile helper.

Measured in turns in one run (the machine is shared and noisy), for the small kernel of
bench_foundation (add + softmax, 64x64):

- cold build: lower + render + LLVM, no object cache, isolation off (in-process) vs on (a
  warm helper): the difference is the price of a cache miss;
- LLVM only, for that kernel's IR and for a trivial module (the fixed round trip);
- cached build (the disk-cache hit: no helper involved, on or off);
- a helper's start-up: the first isolated compile in a process (no helper yet) minus a warm one.

Prints medians and ratios, with the load average.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time

import workbench as wb
from workbench import options, te, topi
from workbench.codegen import LLVMCompiler, isolation
from workbench.codegen.build import compile_to_object
from workbench.codegen.renderer import render
from workbench.target import Target
from workbench.tir.transform.pipeline import lower

TRIVIAL = "define void @nothing() {\n  ret void\n}\n"


def small_kernel():
    A = te.placeholder((64, 64), name="A")
    B = te.placeholder((64, 64), name="B")
    return te.create_prim_func([A, B, topi.nn.softmax(topi.add(A, B))])


def in_turns(cases: dict, rounds: int) -> dict[str, float]:
    """Median seconds of each case, the cases interleaved round by round."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def isolated(on: bool):
    def wrap(fn):
        def run():
            with options.override(compile_isolation=on):
                fn()
        return run
    return wrap


def main(rounds: int = 15) -> None:
    print(f"bench_compile_isolation: {os.cpu_count()} CPU(s), load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    target = Target("llvm")
    ll, _ = render(lower(small_kernel()), target)
    llvm = LLVMCompiler(target, use_cache=False)
    with tempfile.TemporaryDirectory() as tmp, options.override(cache_dir=tmp):
        # helper start-up: the first isolated compile of a process vs the next ones
        isolation.shutdown()
        start = time.perf_counter()
        llvm.compile(TRIVIAL)
        first = time.perf_counter() - start
        wb.build(small_kernel())   # fills the cache for the cached cases

        t = in_turns({
            "cold build, in-process": isolated(False)(
                lambda: compile_to_object(small_kernel(), use_cache=False)),
            "cold build, helper": isolated(True)(
                lambda: compile_to_object(small_kernel(), use_cache=False)),
            "LLVM only, in-process": isolated(False)(lambda: llvm.compile(ll)),
            "LLVM only, helper": isolated(True)(lambda: llvm.compile(ll)),
            "trivial module, in-process": isolated(False)(lambda: llvm.compile(TRIVIAL)),
            "trivial module, helper": isolated(True)(lambda: llvm.compile(TRIVIAL)),
            "cached build, isolation off": isolated(False)(lambda: wb.build(small_kernel())),
            "cached build, isolation on": isolated(True)(lambda: wb.build(small_kernel())),
        }, rounds)
    for name, secs in t.items():
        print(f"   {name:32s} {secs * 1e3:8.2f} ms")
    print(f"   first isolated compile (helper start + trivial module) {first * 1e3:8.1f} ms "
          f"(start-up about {(first - t['trivial module, helper']) * 1e3:.0f} ms)")
    for what in ("cold build", "LLVM only", "trivial module"):
        on, off = t[f"{what}, helper"], t[f"{what}, in-process"]
        print(f"   {what:16s} helper / in-process {on / off:5.2f}x  "
              f"({(on - off) * 1e3:+.2f} ms)")
    print(f"   cached build     on / off            "
          f"{t['cached build, isolation on'] / t['cached build, isolation off']:5.2f}x")
    print(f"   isolation stats: {isolation.stats()}")


if __name__ == "__main__":
    main()
