"""Dynamic sequence length (issue 22): one build of a transformer encoder exported with a
symbolic sequence dim (``torch.export.Dim("seq", max=...)``), run at several lengths, against a
build specialised for each length.

The model is ``torch.nn.TransformerEncoder`` (batch 1, post-LayerNorm layers, ReLU MLP 4x wide,
random weights), exported once with the dynamic dim and once per length with static shapes,
both through ``from_exported_program`` and ``relax.build(mod, "llvm -num-cores=T")``. For every
length the dynamic and the static executable are timed in turns (each round times both once,
so load on a shared machine hits them alike; ``--number`` calls per sample), and the median
ratio dynamic / static is printed with each one's median time. Outputs are checked against
PyTorch (max abs difference printed; the tests hold it to 1e-4).

Usage: ``python benchmarks/bench_dynamic_seq.py [--layers 2] [--d-model 256] [--heads 4]
[--max-len 128] [--lengths 1,7,64,100,128] [--rounds 9] [--threads 2] [--cpu-time]``
(``--cpu-time`` with ``--threads 1``: thread CPU time, steadier on a loaded machine)
(BERT-base's shape: ``--layers 12 --d-model 768 --heads 12``; slow to build on 2 cores).
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

import workbench as wb  # noqa: E402  (before torch: workbench bounds libgomp's idle spinning)


def encoder(layers: int, d_model: int, heads: int) -> Any:
    import torch
    nn = torch.nn
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=4 * d_model,
                                       dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False).eval()


def export(model: Any, example: Any, max_len: int | None) -> Any:
    """``torch.export`` with plain aten ops (the fused encoder-layer fast path off); the
    sequence dim symbolic up to ``max_len`` unless it is None."""
    import torch
    dynamic = None if max_len is None else ({1: torch.export.Dim("seq", max=max_len)},)
    fastpath = torch.backends.mha.get_fastpath_enabled()
    torch.backends.mha.set_fastpath_enabled(False)
    try:
        return torch.export.export(model, (example,), dynamic_shapes=dynamic)
    finally:
        torch.backends.mha.set_fastpath_enabled(fastpath)


def build(ep: Any, target: str) -> Any:
    from workbench import relax
    from workbench.relax.frontend.torch import from_exported_program
    return relax.build(from_exported_program(ep), target)


def runner(exe: Any, x: np.ndarray) -> tuple[Callable[[], Any], np.ndarray]:
    vm = wb.relax.VirtualMachine(exe, wb.cpu())
    fn, arg = vm["main"], wb.nd.array(x)
    out = fn(arg)
    first = out[0] if isinstance(out, (list, tuple)) else out
    return (lambda: fn(arg)), first.numpy()


def sample(call: Callable[[], Any], number: int, clock: Callable[[], float] = time.perf_counter
           ) -> float:
    call()
    t0 = clock()
    for _ in range(number):
        call()
    return (clock() - t0) / number


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--max-len", type=int, default=128)
    ap.add_argument("--lengths", default="1,7,64,100,128")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--number", type=int, default=0,
                    help="calls per sample (0: about 20 ms of calls)")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--cpu-time", action="store_true",
                    help="with --threads 1: the thread's CPU time instead of wall time (on a "
                         "loaded machine, leaves out the time spent waiting for a core)")
    ns = ap.parse_args()
    lengths = [int(x) for x in ns.lengths.split(",") if x.strip()]
    if not lengths or min(lengths) < 1 or max(lengths) > ns.max_len:
        ap.error(f"--lengths must be in 1..--max-len ({ns.max_len}), got {lengths}")
    if min(ns.rounds, ns.threads, ns.layers, ns.heads) < 1 or ns.number < 0:
        ap.error("--rounds, --threads, --layers, --heads must be >= 1, --number >= 0")
    if ns.cpu_time and ns.threads != 1:
        ap.error("--cpu-time measures the calling thread: use it with --threads 1")
    clock = time.thread_time if ns.cpu_time else time.perf_counter

    import torch
    torch.set_num_threads(ns.threads)
    target = f"llvm -num-cores={ns.threads}"
    model = encoder(ns.layers, ns.d_model, ns.heads)
    print(f"load average before: {os.getloadavg()}")
    t0 = time.perf_counter()
    dynamic = build(export(model, torch.randn(1, min(64, ns.max_len), ns.d_model), ns.max_len),
                    target)
    print(f"dynamic build: {time.perf_counter() - t0:.1f} s (one build for every length)")
    rows = []
    for n in lengths:
        x = torch.randn(1, n, ns.d_model)
        with torch.no_grad():
            want = model(x).numpy()
        static = build(export(model, x, None), target)
        dyn_call, dyn_out = runner(dynamic, x.numpy())
        st_call, st_out = runner(static, x.numpy())
        number = ns.number or max(1, int(0.02 / max(sample(st_call, 1), 1e-6)))
        dyn_t, st_t, ratios = [], [], []
        for _ in range(ns.rounds):
            a, b = sample(dyn_call, number, clock), sample(st_call, number, clock)
            dyn_t.append(a)
            st_t.append(b)
            ratios.append(a / b)
        rows.append((n, statistics.median(dyn_t) * 1e3, statistics.median(st_t) * 1e3,
                     statistics.median(ratios), float(np.abs(dyn_out - want).max()),
                     float(np.abs(st_out - want).max())))
    print(f"\n{ns.layers}-layer encoder, d_model {ns.d_model}, {ns.heads} heads, batch 1, "
          f"seq <= {ns.max_len}, {ns.threads} threads, {ns.rounds} rounds (medians"
          f"{', thread CPU time' if ns.cpu_time else ''})")
    print(f"{'seq':>5} {'dynamic ms':>11} {'static ms':>10} {'dyn/static':>11} "
          f"{'err dyn':>9} {'err static':>10}")
    for n, d, s, r, ed, es in rows:
        print(f"{n:>5} {d:>11.3f} {s:>10.3f} {r:>11.3f} {ed:>9.1e} {es:>10.1e}")
    print(f"\nload average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
