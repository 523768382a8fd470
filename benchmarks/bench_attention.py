"""The attention op alone (issue 22): Workbench's fused streaming kernel against PyTorch's
``F.scaled_dot_product_attention`` and against the staged te formulation it replaced (scores,
max, exp, sum and output as separate stages, each (B, N, S, T) tensor written to memory).

Shapes: BERT-base (batch 1, seq 128, 12 heads, head dim 64, a padding mask over the last 16
keys) and GPT-2 small's causal self-attention at seq 128, 256 and 512. Every runner uses
``--threads`` threads; the runners are timed in turns (each round times every runner once, so
load on a shared machine hits them alike) and the median over ``--rounds`` is printed, with
the ratios to PyTorch measured in the same run. Outputs are checked against PyTorch's.

Usage: ``python benchmarks/bench_attention.py [--threads 2] [--rounds 9] [--shapes bert,gpt2-512]
[--cpu-time]`` (``--cpu-time`` with ``--threads 1``: thread CPU time instead of wall time).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import workbench as wb  # noqa: E402  (before torch: workbench's thread pool starts first)

#: name -> (batch, seq, heads, head_dim, causal, padded keys)
SHAPES = {
    "bert": (1, 128, 12, 64, False, 16),
    "gpt2-128": (1, 128, 12, 64, True, 0),
    "gpt2-256": (1, 256, 12, 64, True, 0),
    "gpt2-512": (1, 512, 12, 64, True, 0),
}


def workbench_runner(shape: tuple, fused: bool, threads: int) -> Callable[..., Any]:
    """The compiled attention op (fused: the default legalization; else the te stages, with
    the default schedules)."""
    from workbench import relax
    from workbench.relax import op as R
    from workbench.topi.nn.relax_extras import attention as te_attention
    b, s, n, h, causal, padded = shape
    bb = relax.BlockBuilder()
    qkv = [relax.Var(x, relax.TensorStructInfo((b, s, n, h), "float32")) for x in "qkv"]
    params = qkv + ([relax.Var("mask", relax.TensorStructInfo((b, 1, 1, s), "float32"))]
                    if padded else [])
    mode = "TopLeft" if causal else None
    with bb.function("main", params):
        with bb.dataflow():
            bias = params[3] if padded else None
            if fused:
                out = bb.emit(R.nn.attention(*qkv, bias, None, mode))
            else:
                out = bb.emit_te(te_attention, *qkv, bias, None, mode)
            out = bb.emit_output(out)
        bb.emit_func_output(out)
    exe = relax.build(bb.get(), f"llvm -num-cores={threads}")
    vm = relax.VirtualMachine(exe, wb.cpu())
    return vm["main"]


def inputs(shape: tuple) -> list[np.ndarray]:
    b, s, n, h, _, padded = shape
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((b, s, n, h)).astype(np.float32) for _ in range(3)]
    if padded:
        mask = np.zeros((b, 1, 1, s), np.float32)
        mask[..., s - padded:] = -np.inf
        arrays.append(mask)
    return arrays


def timed(fn: Callable[[], Any], clock: Callable[[], float] = time.perf_counter,
          min_seconds: float = 0.05) -> float:
    """Seconds per call: as many calls as fill ``min_seconds``, once."""
    fn()
    n, start = 0, clock()
    while True:
        fn()
        n += 1
        spent = clock() - start
        if spent >= min_seconds:
            return spent / n


def bench(name: str, shape: tuple, threads: int, rounds: int, cpu_time: bool) -> None:
    import torch
    import torch.nn.functional as F
    b, s, n, h, causal, padded = shape
    arrays = inputs(shape)
    tq, tk, tv = (torch.from_numpy(a).permute(0, 2, 1, 3).contiguous() for a in arrays[:3])
    tmask = torch.from_numpy(arrays[3]) if padded else None

    def torch_call() -> Any:
        with torch.inference_mode():
            return F.scaled_dot_product_attention(tq, tk, tv, attn_mask=tmask, is_causal=causal)

    ref = torch_call().permute(0, 2, 1, 3).numpy()
    nd = [wb.nd.array(a) for a in arrays]
    runners: dict[str, Callable[[], Any]] = {"PyTorch SDPA": torch_call}
    for label, fused in (("Workbench fused", True), ("Workbench te stages", False)):
        f = workbench_runner(shape, fused, threads)
        err = float(np.abs(f(*nd).numpy() - ref).max())
        print(f"  {label}: max abs error against PyTorch {err:.1e}")
        runners[label] = lambda f=f: f(*nd)
    times: dict[str, list[float]] = {k: [] for k in runners}
    # One thread: every runner computes in the calling thread, whose CPU time a shared
    # machine's other work does not inflate (wall time does).
    clock = time.thread_time if cpu_time and threads == 1 else time.perf_counter
    for _ in range(rounds):
        for label, fn in runners.items():
            times[label].append(timed(fn, clock))
    med = {k: statistics.median(v) for k, v in times.items()}
    torch_t = med["PyTorch SDPA"]
    flops = 4 * b * n * s * s * h * (0.5 if causal else 1.0)
    for label, t in med.items():
        print(f"  {label:22s} {t * 1e3:8.3f} ms  {flops / t / 1e9:6.1f} GFLOP/s  "
              f"x{t / torch_t:5.2f} PyTorch's time")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--cpu-time", action="store_true",
                    help="with --threads 1: time the calling thread's CPU time, not wall time")
    args = ap.parse_args()
    import torch
    torch.set_num_threads(args.threads)
    for name in args.shapes.split(","):
        if name not in SHAPES:
            raise SystemExit(f"unknown shape {name!r}; known: {', '.join(SHAPES)}")
        b, s, n, h, causal, padded = SHAPES[name]
        print(f"{name}: batch {b}, seq {s}, {n} heads x {h}, "
              f"{'causal' if causal else f'padding mask ({padded} keys)'}, "
              f"{args.threads} threads")
        bench(name, SHAPES[name], args.threads, args.rounds, args.cpu_time)


if __name__ == "__main__":
    main()
