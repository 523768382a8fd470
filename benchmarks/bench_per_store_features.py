"""Speed of the full per-store feature extractor (164 columns) on tuner candidates.

Candidates are what the evolutionary search scores: design spaces of a 512^3 matmul (and a
conv2d) from the default llvm rules, replayed with fresh random decisions and post-processed.
Prints the median CPU time per candidate for a cold cache (lowering + walk), a warm cache (one
structural hash), the split between lowering and the walk, and, for scale, the time of the
reduced part-1 extractor on the same candidates.

Run: ``.venv/bin/python benchmarks/bench_per_store_features.py``
"""
from __future__ import annotations

import statistics
import time

import workbench as wb
from workbench import te, topi
from workbench.meta_schedule.feature_extractor.per_store import extractor as X
from workbench.meta_schedule.feature_extractor.per_store import preprocess as P
from workbench.meta_schedule.feature_extractor.per_store.collector import (
    FeatureConfig, collect_rows,
)
from workbench.meta_schedule.search_strategy.base import TraceApplier
from workbench.meta_schedule.search_strategy.search_strategy import MeasureCandidate
from workbench.meta_schedule.tune_context import TuneContext

N_CANDIDATES = 40


def matmul(n: int = 512) -> wb.IRModule:
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return wb.IRModule({"main": te.create_prim_func([A, B, C])})


def conv2d() -> wb.IRModule:
    data = te.placeholder((1, 64, 56, 56), "float32", name="data")
    kernel = te.placeholder((64, 64, 3, 3), "float32", name="kernel")
    out = topi.nn.conv2d_nchw(data, kernel, 1, 1, 1)
    return wb.IRModule({"main": te.create_prim_func([data, kernel, out])})


def candidates(mod: wb.IRModule, n: int) -> tuple[TuneContext, list[MeasureCandidate]]:
    ctx = TuneContext(mod, target="llvm -num-cores=4", space_generator="post-order-apply",
                      rand_state=7)
    spaces = ctx.space_generator.generate_design_space(ctx.mod)
    traces = [s.trace.simplified(remove_postproc=True) for s in spaces]
    applier = TraceApplier(ctx.mod, ctx.space_generator.postprocs)
    out: list[MeasureCandidate] = []
    seed = 0
    while len(out) < n:
        seed += 1
        sch = applier.apply(traces[seed % len(traces)], seed, keep_decisions=False)
        if sch is not None:
            out.append(MeasureCandidate(sch, []))
    return ctx, out


def per_candidate_ms(fn, cands) -> float:
    times = []
    for c in cands:
        # CPU time of this process: the shared machine's load does not inflate it.
        t = time.process_time()
        fn(c)
        times.append(time.process_time() - t)
    return statistics.median(times) * 1e3


def main() -> None:
    ext = X.PerStoreFeature()
    for name, mod in (("matmul 512^3", matmul()), ("conv2d 1x64x56x56 k3", conv2d())):
        ctx, cands = candidates(mod, N_CANDIDATES)

        def cold(c, ctx=ctx):
            X._FEATURES.data.clear()
            P._LOWERED.data.clear()
            ext.extract_from(ctx, [c])

        cold_ms = per_candidate_ms(cold, cands)
        ext.extract_from(ctx, cands)
        warm_ms = per_candidate_ms(lambda c, ctx=ctx: ext.extract_from(ctx, [c]), cands)
        lowered = [P.lower(c.sch.mod, passes=P.FEATURE_PASSES) for c in cands]
        lower_ms = per_candidate_ms(lambda c: P.lower(c.sch.mod, passes=P.FEATURE_PASSES),
                                    cands)
        walk_ms = per_candidate_ms(lambda m: collect_rows(m, FeatureConfig()), lowered)
        from workbench.meta_schedule.feature_extractor import PerStoreFeature
        reduced = PerStoreFeature()
        reduced_ms = per_candidate_ms(lambda c, r=reduced, ctx=ctx: r.extract_from(ctx, [c]), cands)
        rows = statistics.median(len(f) for f in ext.extract_from(ctx, cands))
        print(f"{name}: {len(cands)} candidates, median {rows} rows")
        print(f"  cold (lower + walk): {cold_ms:6.2f} ms/candidate  "
              f"[lower {lower_ms:.2f} ms, walk {walk_ms:.2f} ms]")
        print(f"  warm (cached):       {warm_ms:6.2f} ms/candidate")
        print(f"  reduced part-1 extractor, for scale: {reduced_ms:.2f} ms/candidate")


if __name__ == "__main__":
    main()
