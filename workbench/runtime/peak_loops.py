"""The CPU's arithmetic peaks, measured with llvmlite loops of independent accumulator chains.

Kinds (ops count 2 per multiply-add):

- ``fp32``: ``llvm.fma.v16f32`` (32 flops per instruction);
- ``int8``: AVX-512 VNNI ``vpdpbusd`` (64 u8 x s8 products: 128 ops);
- ``bf16``: AVX512-BF16 ``vdpbf16ps`` (32 bf16 products: 64 flops);
- ``amx-int8``: AMX ``tdpbusd`` on 16 x 64-byte tiles (16 x 16 x 64 products: 32768 ops);
- ``amx-bf16``: AMX ``tdpbf16ps`` (16 x 16 x 32 products: 16384 flops).

:data:`NARROW_FP32_KINDS` are the fp32 loops of CPUs without AVX-512: ``fp32-avx2``
(``llvm.fma.v8f32``, x86 FMA3: 16 flops per instruction) and ``fp32-neon`` (``v4f32``, Arm:
8 flops). :func:`fp32_kind` picks the widest a target has; the machine limits
(:mod:`.machine_limits`) use it, ``benchmarks/bench_peak.py`` measures :data:`PEAK_KINDS`.

:func:`measure` runs the loop on one thread (the per-core peak) and on ``cores`` threads at
once (the all-core peak). The threads are started once and released together by a barrier for
each round; a round's rate is the total work over the span from the first start to the last
end, so only rounds in which the threads really ran side by side reach the peak. ctypes
releases the GIL for the calls. Each figure is the best round in a time budget: on a shared,
loaded machine that is a moment when the cores were free, like the best-single-call timing of
the kernels it is compared with.
"""
from __future__ import annotations

import ctypes
import threading
import time
from dataclasses import dataclass
from typing import Callable

__all__ = ["PEAK_KINDS", "NARROW_FP32_KINDS", "Peak", "measure", "available", "fp32_kind", "best_span"]

_N_ACC = 12  # vector accumulator chains: more than latency x throughput on current cores


@dataclass(frozen=True)
class _Kind:
    features: tuple[str, ...]   # target features the instruction needs
    ops: int                    # ops per instruction
    ir: str                     # LLVM IR defining void @peak(i64 n, i8* scratch)
    cpu_state: str | None = None


def _vector_ir(decl: str, call: str, ty: str, add: str, lanes: int = 16) -> str:
    """``_N_ACC`` independent chains ``acc = call(acc, x, y)``, summed and stored at the end
    (so the loop is not dead code); ``x`` / ``y`` are ``lanes`` x 1.0f (as i32 ``xi`` /
    ``yi`` too)."""
    ones = "<" + ", ".join(["i32 1065353216"] * lanes) + ">"
    vi, vf = f"<{lanes} x i32>", f"<{lanes} x float>"
    lines = [decl, "define void @peak(i64 %n, i8* %scratch) {", "entry:",
             f"  %xi = bitcast {vi} {ones} to {vi}",
             f"  %x = bitcast {vi} %xi to {vf}",
             f"  %yi = add {vi} %xi, zeroinitializer",
             f"  %y = bitcast {vi} %yi to {vf}",
             "  br label %loop", "loop:", "  %i = phi i64 [0, %entry], [%inext, %loop]"]
    lines += [f"  %a{k} = phi {ty} [zeroinitializer, %entry], [%b{k}, %loop]"
              for k in range(_N_ACC)]
    lines += [f"  %b{k} = " + call.format(acc=f"%a{k}") for k in range(_N_ACC)]
    lines += ["  %inext = add i64 %i, 1", "  %c = icmp slt i64 %inext, %n",
              "  br i1 %c, label %loop, label %exit", "exit:"]
    acc = "%b0"
    for k in range(1, _N_ACC):
        lines.append(f"  %s{k} = {add} {ty} {acc}, %b{k}")
        acc = f"%s{k}"
    lines += [f"  %p = bitcast i8* %scratch to {ty}*", f"  store {ty} {acc}, {ty}* %p, align 4",
              "  ret void", "}"]
    return "\n".join(lines)


def _amx_ir(dot: str) -> str:
    """Four independent C tiles (0-3) += A tiles (4, 5) x B tiles (6, 7), all 16 rows x 64
    bytes; the configuration is the first 64 bytes of ``scratch``, the C tiles are stored
    after it."""
    lines = ["declare void @llvm.x86.ldtilecfg(i8*)", "declare void @llvm.x86.tilezero(i8)",
             f"declare void @{dot}(i8, i8, i8)",
             "declare void @llvm.x86.tilestored64(i8, i8*, i64)",
             "declare void @llvm.x86.tilerelease()",
             "define void @peak(i64 %n, i8* %scratch) {", "entry:",
             "  call void @llvm.x86.ldtilecfg(i8* %scratch)"]
    lines += [f"  call void @llvm.x86.tilezero(i8 {t})" for t in range(8)]
    lines += ["  br label %loop", "loop:", "  %i = phi i64 [0, %entry], [%inext, %loop]"]
    lines += [f"  call void @{dot}(i8 {c}, i8 {a}, i8 {b})"
              for c, a, b in ((0, 4, 6), (1, 4, 7), (2, 5, 6), (3, 5, 7))]
    lines += ["  %inext = add i64 %i, 1", "  %c = icmp slt i64 %inext, %n",
              "  br i1 %c, label %loop, label %exit", "exit:"]
    for t in range(4):
        lines += [f"  %o{t} = getelementptr i8, i8* %scratch, i64 {64 + 1024 * t}",
                  f"  call void @llvm.x86.tilestored64(i8 {t}, i8* %o{t}, i64 64)"]
    lines += ["  call void @llvm.x86.tilerelease()", "  ret void", "}"]
    return "\n".join(lines)


PEAK_KINDS: dict[str, _Kind] = {
    "fp32": _Kind(("avx512f",), 32, _vector_ir(
        "declare <16 x float> @llvm.fma.v16f32(<16 x float>, <16 x float>, <16 x float>)",
        "call <16 x float> @llvm.fma.v16f32(<16 x float> %x, <16 x float> %y, "
        "<16 x float> {acc})", "<16 x float>", "fadd")),
    "int8": _Kind(("avx512vnni",), 128, _vector_ir(
        "declare <16 x i32> @llvm.x86.avx512.vpdpbusd.512(<16 x i32>, <16 x i32>, <16 x i32>)",
        "call <16 x i32> @llvm.x86.avx512.vpdpbusd.512(<16 x i32> {acc}, <16 x i32> %xi, "
        "<16 x i32> %yi)", "<16 x i32>", "add")),
    "bf16": _Kind(("avx512bf16",), 64, _vector_ir(
        "declare <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float>, <16 x i32>, "
        "<16 x i32>)",
        "call <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float> {acc}, "
        "<16 x i32> %xi, <16 x i32> %yi)", "<16 x float>", "fadd")),
    "amx-int8": _Kind(("amx-tile", "amx-int8"), 2 * 16 * 16 * 64 * 4,
                      _amx_ir("llvm.x86.tdpbusd"), "amx"),
    "amx-bf16": _Kind(("amx-tile", "amx-bf16"), 2 * 16 * 16 * 32 * 4,
                      _amx_ir("llvm.x86.tdpbf16ps"), "amx"),
}


def _fma_kind(features: tuple[str, ...], lanes: int) -> _Kind:
    vec = f"<{lanes} x float>"
    return _Kind(features, 2 * lanes, _vector_ir(
        f"declare {vec} @llvm.fma.v{lanes}f32({vec}, {vec}, {vec})",
        f"call {vec} @llvm.fma.v{lanes}f32({vec} %x, {vec} %y, {vec} {{acc}})", vec, "fadd",
        lanes))


# Without the feature LLVM would expand llvm.fma into a libm call per lane: no peak at all.
NARROW_FP32_KINDS: dict[str, _Kind] = {
    "fp32-avx2": _fma_kind(("fma",), 8),   # FMA3 comes with AVX
    "fp32-neon": _fma_kind(("neon",), 4),
}
_ALL_KINDS = {**PEAK_KINDS, **NARROW_FP32_KINDS}
# _vector_ir's loop issues _N_ACC instructions per iteration, _amx_ir's four (counted above).
_PER_ITER = {k: (_N_ACC if not v.cpu_state else 1) for k, v in _ALL_KINDS.items()}


def fp32_kind(target) -> str | None:
    """The widest fp32 FMA loop ``target`` (anything with ``has_feature(name)``, such as a
    workbench Target) can run, or None when it has none of them."""
    for kind in ("fp32", *NARROW_FP32_KINDS):
        if available(kind, target) is None:
            return kind
    return None


def available(kind: str, target) -> str | None:
    """None when ``target`` (a workbench Target) can run the ``kind`` loop here, else why not."""
    if kind not in _ALL_KINDS:
        raise ValueError(f"unknown peak kind {kind!r}; known: {sorted(_ALL_KINDS)}")
    spec = _ALL_KINDS[kind]
    missing = [f for f in spec.features if not target.has_feature(f)]
    if missing:
        return f"the CPU lacks {', '.join(missing)}"
    if spec.cpu_state:
        from . import cpu_state
        try:
            cpu_state.require(spec.cpu_state)
        except RuntimeError as e:
            return str(e)
    return None


def _check_host_runs(kind: str, spec: _Kind) -> None:
    import llvmlite.binding as llvm
    host = llvm.get_host_cpu_features()
    missing = [f for f in spec.features if not host.get(f, False)]
    if missing:
        raise RuntimeError(f"cannot measure the {kind!r} peak: this CPU "
                           f"({llvm.get_host_cpu_name()}) lacks {', '.join(missing)}")
    if spec.cpu_state:
        from . import cpu_state
        cpu_state.require(spec.cpu_state)   # the OS's permission first (AMX); or why not


@dataclass(frozen=True)
class Peak:
    per_core: float     # ops/s of one thread
    all_cores: float    # ops/s of ``cores`` threads side by side
    cores: int


def _compile(kind: str):
    from .loader import jit_host_ir
    return jit_host_ir(_ALL_KINDS[kind].ir, "peak",
                       ctypes.CFUNCTYPE(None, ctypes.c_int64, ctypes.c_void_p))


def _scratch() -> ctypes.Array:
    """64 bytes of AMX configuration (palette 1, every tile 16 rows x 64 bytes) followed by
    room for four stored tiles; the vector loops store their sum at the start."""
    buf = (ctypes.c_uint8 * (64 + 4 * 1024 + 64))()
    buf[0] = 1
    for t in range(8):
        buf[16 + 2 * t] = 64
        buf[48 + t] = 16
    return buf


class _Team:
    """``n`` threads that each run ``work(k)`` (``k``: the thread's number) when released by a
    barrier."""

    def __init__(self, work: Callable[[int], None], n: int) -> None:
        self.work, self.n = work, n
        self.times = [(0.0, 0.0)] * n
        self.start = threading.Barrier(n + 1)
        self.done = threading.Barrier(n + 1)
        self.stop = False
        self.threads = [threading.Thread(target=self._work, args=(k,), daemon=True)
                        for k in range(n)]
        for t in self.threads:
            t.start()

    def _work(self, k: int) -> None:
        while True:
            self.start.wait()
            if self.stop:
                return
            t0 = time.perf_counter()
            self.work(k)
            self.times[k] = (t0, time.perf_counter())
            self.done.wait()

    def round(self) -> float:
        """Seconds from the first thread's start to the last one's end."""
        self.start.wait()
        self.done.wait()
        return max(e for _, e in self.times) - min(s for s, _ in self.times)

    def close(self) -> None:
        self.stop = True
        self.start.wait()
        for t in self.threads:
            t.join()


def best_span(work: Callable[[int], None], threads: int, budget: float,
              min_rounds: int) -> float:
    """The shortest round, in seconds, of ``threads`` threads each running ``work(k)`` side by
    side (``k`` = 0 .. threads - 1; released together, timed from the first start to the last
    end), over at least ``min_rounds`` rounds and until ``budget`` seconds have passed. The
    work must release the GIL (a ctypes call, a large numpy operation) to run in parallel."""
    team = _Team(work, threads)
    try:
        best, rounds, t_end = float("inf"), 0, time.perf_counter() + budget
        while rounds < min_rounds or time.perf_counter() < t_end:
            best = min(best, team.round())
            rounds += 1
    finally:
        team.close()
    return best


def _best_rate(fn, threads: int, iters: int, ops_per_call: float, budget: float,
               min_rounds: int) -> float:
    scratch = [_scratch() for _ in range(threads)]
    addrs = [ctypes.addressof(b) for b in scratch]
    span = best_span(lambda k: fn(iters, addrs[k]), threads, budget, min_rounds)
    return ops_per_call * threads / span


def measure(kind: str, cores: int, budget: float = 1.5, min_rounds: int = 10) -> Peak:
    """The per-core and ``cores``-thread peaks of ``kind`` (:func:`available` says whether a
    target can run it). Each is the best round within ``budget`` seconds (at least
    ``min_rounds`` rounds) of a loop sized to run about 3 ms. Raises RuntimeError, naming
    why, where this host cannot run the loop (an instruction it lacks, AMX tile state the OS
    refuses) instead of executing it: that would kill the process with SIGILL."""
    if kind not in _ALL_KINDS:
        raise ValueError(f"unknown peak kind {kind!r}; known: {sorted(_ALL_KINDS)}")
    spec = _ALL_KINDS[kind]
    _check_host_runs(kind, spec)
    fn = _compile(kind)
    warm = _scratch()
    fn(1000, ctypes.addressof(warm))
    t0 = time.perf_counter()
    fn(100_000, ctypes.addressof(warm))
    iters = max(1000, int(100_000 * 0.003 / max(time.perf_counter() - t0, 1e-6)))
    ops = spec.ops * _PER_ITER[kind] * iters
    one = _best_rate(fn, 1, iters, ops, budget, min_rounds)
    many = _best_rate(fn, cores, iters, ops, budget, min_rounds) if cores > 1 else one
    return Peak(one, many, cores)
