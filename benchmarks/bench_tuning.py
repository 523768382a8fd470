"""Tuning benchmark (issue 7 "Done when"): 64 trials of the default tuner on

1. matmul 512x512x512 float32 (target: >= 0.6 of numpy's matmul GFLOPS),
2. conv2d NHWC 1x56x56x64 -> 64, 3x3, stride 1, pad 1, relu fused, one PrimFunc via te
   (target: >= 0.6 of numpy's matmul GFLOPS; also compared with an im2col + numpy reference),

with target ``llvm -num-cores=N`` (N = the machine's cores), ``tune_tir`` defaults
(evolutionary search, XGB cost model, 64 trials per iteration). Prints per workload the
tuned GFLOPS (best measured record, and re-measured after ``compile_tir`` + build), the
ratios to the references, the tuning wall time and the tuner's Profiler table. With
``--tvm-python PY`` (or ``WORKBENCH_TVM_PYTHON``: a Python that has Apache TVM 0.27, see
``tvm_anchor.py``) TVM's MetaSchedule tunes the same workload with the same trials in the same
run, and its wall time and kernel are printed next to ours (target: at most half its time;
ours is what a default ``tune_tir`` call takes, the search and its confirmation, without the
opt-in post-optimization). The two run in turns, ``--turns`` times each (default 2: ours, TVM,
ours, TVM), each of ours with a fresh compile cache (as TVM's starts) and its own seed; the
ratio is the median of the turns'. Also printed: when the first batch went to the builder (target
<= 5 s) and the tuner's own share of the wall time, everything but building and running
candidates (target < 20%). "rebuilt" is the best schedule built again with its weights packed
once up front (RewriteLayout; what the tuner measured); the kernel that packs on every call is
shown too. The references (numpy's matmul; for conv2d also im2col + numpy
and, when torch is installed, PyTorch's conv2d) are timed in turns with the tuned kernel right
after its tuning, best of 9 rounds each, so load on a shared machine skews all alike.

After the search, ``post_optimization=True`` runs the Droplet search around the best record
(``--no-post-opt`` skips it): printed are the best record before and after, the extra trials
and seconds, and the two kernels rebuilt and timed in turns (before / after > 1: it helped).
The tuning wall time is the search's alone.

Usage: ``python benchmarks/bench_tuning.py [--trials 64] [--only matmul|conv2d] [--no-post-opt]
[--tvm-python tvmenv/bin/python [--turns 2]]``
"""
from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import workbench as wb  # noqa: E402
from workbench import meta_schedule as ms  # noqa: E402
from workbench import te, topi  # noqa: E402

ANCHOR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tvm_anchor.py")


def tvm_anchor(python: str, name: str, trials: int, per_iter: int) -> dict | None:
    """TVM's tune_tir of workload ``name`` run by ``python`` (tvm_anchor.py): its JSON line,
    or None (printed why) when it fails."""
    import json
    import subprocess
    from workbench.target import Target
    target = Target(TARGET)
    mcpu = target.host_cpu
    cores = target.max_num_threads()
    argv = [python, ANCHOR] + (["matmul", "512"] if name == "matmul" else ["conv2d"]) + \
        [str(trials), str(per_iter), mcpu, str(cores)]
    env = dict(os.environ, TVM_BUILD_TIMEOUT=os.environ.get("TVM_BUILD_TIMEOUT", "300"))
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        print(f"[{name}] TVM's run failed (exit {proc.returncode}): "
              f"{proc.stderr.strip().splitlines()[-1:] or proc.stdout[-300:]}")
        return None
    return json.loads(lines[-1])


def matmul_func(n: int = 512):
    A = te.placeholder((n, n), "float32", name="A")
    B = te.placeholder((n, n), "float32", name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def conv2d_relu_func():
    data = te.placeholder((1, 56, 56, 64), "float32", name="data")
    weight = te.placeholder((3, 3, 64, 64), "float32", name="weight")
    conv = topi.nn.conv2d_nhwc(data, weight, 1, 1, 1)
    out = topi.nn.relu(conv)
    return te.create_prim_func([data, weight, out])


def best_of(fn, rounds: int = 7, min_secs: float = 0.05) -> float:
    """Best seconds per call of ``fn`` over ``rounds`` rounds of >= ``min_secs`` each."""
    fn()
    return min(_one_round(fn, min_secs) for _ in range(rounds))


def _one_round(fn, min_secs: float) -> float:
    n, t0 = 0, time.perf_counter()
    while True:
        fn()
        n += 1
        el = time.perf_counter() - t0
        if el >= min_secs:
            return el / n


# After a parallel call, a thread pool keeps its threads spinning for a while (OpenBLAS for
# up to ~0.1 s, libgomp for less); timing another library's kernel then measures both fighting
# over the cores (seen here: our conv2d 2x slower right after numpy's matmul). Each round
# starts after this pause.
SETTLE_SECS = 0.3


def best_of_interleaved(fns: dict, rounds: int = 9, min_secs: float = 0.05) -> dict:
    """Best seconds per call of each function, timing them in turns (round 1 of each, then
    round 2 of each, ...): on a shared machine a burst of load then hits all of them, so their
    ratios stay fair even when the absolute numbers move."""
    for fn in fns.values():
        fn()
    best = {k: float("inf") for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            time.sleep(SETTLE_SECS)
            best[k] = min(best[k], _one_round(fn, min_secs))
    return best


def _numpy_matmul_fn(n: int = 512):
    rng = np.random.RandomState(0)
    a = rng.rand(n, n).astype("float32")
    b = rng.rand(n, n).astype("float32")
    out = np.empty((n, n), "float32")
    return lambda: np.matmul(a, b, out=out)


def _im2col_conv_fn():
    rng = np.random.RandomState(0)
    x = rng.rand(1, 56, 56, 64).astype("float32")
    w = rng.rand(3, 3, 64, 64).astype("float32")
    wm = w.reshape(9 * 64, 64)

    def run():
        xp = np.pad(x[0], ((1, 1), (1, 1), (0, 0)))
        cols = np.empty((56, 56, 3, 3, 64), "float32")
        for dy in range(3):
            for dx in range(3):
                cols[:, :, dy, dx, :] = xp[dy:dy + 56, dx:dx + 56, :]
        return np.maximum(cols.reshape(56 * 56, 9 * 64) @ wm, 0)

    return run


def _torch_conv_fn():
    """PyTorch's conv2d + relu (oneDNN on CPU) when torch is installed, else None: the
    strongest conv2d reference this machine can run (``pip install torch`` to enable)."""
    try:
        import torch
    except ImportError:
        return None
    torch.set_num_threads(os.cpu_count() or 2)
    rng = np.random.RandomState(0)
    x = torch.from_numpy(rng.rand(1, 64, 56, 56).astype("float32")).contiguous(
        memory_format=torch.channels_last)
    w = torch.from_numpy(rng.rand(64, 64, 3, 3).astype("float32"))
    conv = torch.nn.functional.conv2d

    def run():
        with torch.no_grad():
            return torch.relu_(conv(x, w, padding=1))

    return run


CONV_FLOP = 2 * 56 * 56 * 64 * 64 * 9
MATMUL_FLOP = 2 * 512 ** 3


def built_kernel_fn(sch, func, prepacked: bool = False):
    """A no-argument callable running the scheduled module once on random inputs.

    ``prepacked``: strip the weight-packing blocks RewriteLayout added and pass the weights
    packed once up front (what the tuner measures, and what a model with constant weights
    runs); otherwise the kernel packs its weights on every call (``compile_tir``'s module)."""
    from workbench.tir.transform import RemoveWeightLayoutRewriteBlock
    from workbench.tir.transform.remove_weight_layout_rewrite_block import layout_rewrites

    mod = sch.mod
    rewrites = {}
    if prepacked:
        mod = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)
        rewrites = {r.param_index: r for r in layout_rewrites(mod["main"])}
    rt = wb.build(mod, target=TARGET)
    rng = np.random.RandomState(0)
    args = []
    for i, p in enumerate(func.params):
        buf = func.buffer_map[p]
        shape = [int(s.value) for s in buf.shape]
        value = rng.uniform(-1, 1, shape).astype(buf.dtype)
        if i in rewrites:
            value = rewrites[i].pack(value)
        args.append(wb.nd.array(value))
    f = rt["main"]
    return lambda: f(*args)


def _packs_weights(sch) -> bool:
    from workbench.tir.transform import RemoveWeightLayoutRewriteBlock
    from workbench.tir.transform.remove_weight_layout_rewrite_block import layout_rewrites
    stripped = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(sch.mod)
    return bool(layout_rewrites(stripped["main"]))


class _PostOptResults(logging.Handler):
    """Collects the PostOptResult that the post-optimization logs with each summary line."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.results = []
        self.confirmed = []   # the ConfirmResults of the re-measurement ending the run
        self.first_batch_at: float | None = None   # perf_counter of the first batch sent


    def emit(self, record: logging.LogRecord) -> None:
        if hasattr(record, "post_opt"):
            self.results.append(record.post_opt)
        if hasattr(record, "confirm"):
            self.confirmed.append(record.confirm)
        if self.first_batch_at is None and str(record.msg).startswith("Sending") and \
                "to builder" in str(record.msg):
            self.first_batch_at = time.perf_counter()


def tune(name: str, func, trials: int, flop: int, post_opt: bool = True, seed: int = 0):
    work_dir = tempfile.mkdtemp(prefix=f"bench_tuning_{name}_")
    collect = _PostOptResults()
    post_logger = logging.getLogger("workbench.meta_schedule.post_optimization")
    post_logger.addHandler(collect)
    post_logger.setLevel(logging.INFO)
    ms_logger = logging.getLogger("workbench.meta_schedule")
    ms_logger.addHandler(collect)
    t0 = time.perf_counter()
    try:
        with ms.Profiler() as prof:
            db = ms.tune_tir(func, TARGET, work_dir, max_trials_global=trials,
                             num_trials_per_iter=PER_ITER, seed=seed,
                             post_optimization=post_opt)
    finally:
        post_logger.removeHandler(collect)
        ms_logger.removeHandler(collect)
    wall = end_to_end = time.perf_counter() - t0
    post = collect.results[0] if collect.results else None
    if post is not None:
        wall -= post.seconds  # the search's wall time, comparable with TVM's
    wall -= sum(c.seconds for c in collect.confirmed)  # and without the re-measurements
    recs = [r for r in db.get_all_tuning_records()
            if r.run_secs and max(r.run_secs) < 1e9]
    best_rec = min(float(np.median(r.run_secs)) for r in recs) if recs else float("nan")
    sch = ms.compile_tir(db, func, TARGET)
    refs = {"numpy_matmul": _numpy_matmul_fn()}
    if name == "conv2d":
        refs["im2col_numpy"] = _im2col_conv_fn()
        torch_fn = _torch_conv_fn()
        if torch_fn is not None:
            refs["torch_conv2d"] = torch_fn
    times = {}
    try:
        if sch is None:
            raise RuntimeError("no valid schedule in the database")
        kernels = {"tuned": built_kernel_fn(sch, func, prepacked=True)}
        if post is not None and post.best_after < post.best_before:
            # the search's best, before post-optimization, timed in the same turns
            kernels["before_post_opt"] = built_kernel_fn(post.schedule_before(), func,
                                                         prepacked=True)
        if _packs_weights(sch):
            kernels["tuned_packing"] = built_kernel_fn(sch, func)
        times = best_of_interleaved({**kernels, **refs})
    except Exception as e:  # noqa: BLE001 - report, keep going
        print(f"[{name}] re-measuring the best schedule failed: {e}")
        times = best_of_interleaved(refs)
        times["tuned"] = float("nan")
    rebuilt = times.pop("tuned")
    before_post_opt = times.pop("before_post_opt", rebuilt)
    packs = "tuned_packing" in times
    packing = times.pop("tuned_packing", rebuilt)
    first = collect.first_batch_at - t0 if collect.first_batch_at is not None else math.nan
    # what a default tune_tir call takes (search + confirmation; post-optimization is opt-in)
    default_call = end_to_end - (post.seconds if post is not None else 0.0)
    return {"wall": wall, "end_to_end": end_to_end, "default_call": default_call, "first_batch_s": first, "prof": prof, "best_rec_s": best_rec, "rebuilt_s": rebuilt,
            "gflops_rec": flop / best_rec / 1e9, "gflops_rebuilt": flop / rebuilt / 1e9,
            "gflops_packing": flop / packing / 1e9, "n_valid": len(recs), "ref_s": times,
            "packs": packs, "post": post, "before_post_opt_s": before_post_opt}


def main() -> None:
    global TARGET
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--only", choices=["matmul", "conv2d"])
    ap.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--mcpu", default=None,
                    help="LLVM CPU to tune for instead of this machine's (e.g. haswell: AVX2, "
                         "no AVX-512 micro-kernels in the space)")
    ap.add_argument("--no-post-opt", action="store_true",
                    help="skip the post-optimization (Droplet search) after the search")
    ap.add_argument("--tvm-python", default=os.environ.get("WORKBENCH_TVM_PYTHON"),
                    help="a Python with Apache TVM 0.27: TVM tunes the same workloads in the "
                         "same run (tvm_anchor.py)")
    ap.add_argument("--turns", type=int, default=2,
                    help="with --tvm-python: ours and TVM's tuning run this many times each, "
                         "alternating; the ratio printed is the median of the turns' (each "
                         "of our later turns has its own seed and a fresh compile cache)")
    args = ap.parse_args()
    if args.turns < 1:
        ap.error(f"--turns must be >= 1, got {args.turns}")
    TARGET = f"llvm -num-cores={args.cores}"
    if args.mcpu:
        TARGET += f" -mcpu={args.mcpu}"
    print(f"target: {TARGET}; trials per workload: {args.trials}")
    print("references are timed interleaved with each tuned kernel, after its tuning "
          "(best of 9 rounds each)")
    work = [("matmul", matmul_func, MATMUL_FLOP), ("conv2d", conv2d_relu_func, CONV_FLOP)]
    results = {}
    for name, make, flop in work:
        if args.only and args.only != name:
            continue
        with _fresh_compile_cache() if args.tvm_python else contextlib.nullcontext():
            r = results[name] = tune(name, make(), args.trials, flop, not args.no_post_opt)
        r["tvm"] = (tvm_anchor(args.tvm_python, name, args.trials, PER_ITER)
                    if args.tvm_python else None)
        r["turns"] = [(r["default_call"], r["tvm"]["tune_s"])] if r["tvm"] else []
        for turn in range(1, args.turns if r["tvm"] else 1):
            # in turns with TVM (the host has slow and fast phases); another seed and a
            # fresh compile cache, so that this turn builds its candidates as TVM's does
            with _fresh_compile_cache():
                ours = tune(name, make(), args.trials, flop, False, seed=turn)
            tvm = tvm_anchor(args.tvm_python, name, args.trials, PER_ITER)
            if tvm is not None:
                r["turns"].append((ours["default_call"], tvm["tune_s"]))
        np_mm = MATMUL_FLOP / r["ref_s"]["numpy_matmul"] / 1e9
        print(f"\n=== {name}: {args.trials} trials, tuning wall time {r['wall']:.1f} s "
              f"(the search; {r['end_to_end']:.1f} s end to end with the confirmation"
              f"{' and post-optimization' if r['post'] is not None else ''}; "
              f"{_vs_tvm(r)}) ===")
        for i, (ours, tvm) in enumerate(r["turns"]):
            print(f"{name}: turn {i + 1}: ours {ours:.1f} s, TVM 0.27 {tvm:.1f} s end to end: "
                  f"{ours / tvm:.2f}x")
        if len(r["turns"]) > 1:
            print(f"{name}: median of the turns' ratios {_median_ratio(r):.2f}x (target <= 0.5)")
        print(f"{name}: the first batch went to the builder {r['first_batch_s']:.1f} s after "
              "the call (target <= 5 s)")
        print(r["prof"].table())
        print(f"{name}: {_own_work(r['prof'])}")
        g = r["gflops_rebuilt"] if np.isfinite(r["gflops_rebuilt"]) else r["gflops_rec"]
        r["gflops"], r["np_mm"] = g, np_mm
        print(f"{name}: best record {r['best_rec_s'] * 1e3:.3f} ms = {r['gflops_rec']:.2f} "
              f"GFLOPS; rebuilt {r['rebuilt_s'] * 1e3:.3f} ms = {r['gflops_rebuilt']:.2f} "
              f"GFLOPS; valid records {r['n_valid']}")
        post = r["post"]
        if post is not None:
            retimed = (f"rebuilt and timed in turns: before / after = "
                       f"{r['before_post_opt_s'] / r['rebuilt_s']:.3f}"
                       if post.best_after < post.best_before else "the best is unchanged")
            print(f"{name}: post-optimization: best record {post.best_before * 1e3:.3f} ms -> "
                  f"{post.best_after * 1e3:.3f} ms ({post.recorded_gain:.3f}x recorded; "
                  f"result {'confirmed' if post.confirmed else 'not confirmed'} side by side"
                  f"{'' if post.side_by_side_gain is None else f' ({post.side_by_side_gain:.3f}x, medians of 3)'}; "
                  f"{post.held_back} unconfirmed faster-looking records dropped), "
                  f"{post.trials} extra trials, {post.seconds:.1f} s; {retimed}")
        if r["packs"]:
            print(f"{name}: with the weight packing on every call (compile_tir's module, no "
                  f"pre-packing): {r['gflops_packing']:.2f} GFLOPS")
        print(f"{name}: ratio to numpy matmul ({np_mm:.2f} GFLOPS): {g / np_mm:.3f} "
              f"(target >= 0.6)")
        for ref, secs in r["ref_s"].items():
            if ref == "numpy_matmul":
                continue
            rg = CONV_FLOP / secs / 1e9
            print(f"{name}: ratio to {ref} ({rg:.2f} GFLOPS): {g / rg:.3f}")
    print("\nsummary (tuning = the search; post-opt = the Droplet search after it):")
    for name, r in results.items():
        vs_tvm = f" ({_median_ratio(r):.2f}x TVM's end to end, median of " \
            f"{len(r['turns'])} turn(s))" if r["turns"] else ""
        post = r["post"]
        extra = "" if post is None else (
            f"  post-opt {r['before_post_opt_s'] / r['rebuilt_s']:.3f}x (re-timed) in "
            f"{post.trials} trials / {post.seconds:.1f} s")
        print(f"  {name:7s} {r['gflops']:8.2f} GFLOPS  {r['gflops'] / r['np_mm']:6.3f} x "
              f"numpy-matmul  tuning {r['wall']:6.1f} s{vs_tvm}{extra}")


def _median_ratio(r: dict) -> float:
    """Ours / TVM's end-to-end time, the median over the turns."""
    return float(np.median([ours / tvm for ours, tvm in r["turns"]]))


@contextlib.contextmanager
def _fresh_compile_cache():
    """The option ``cache_dir`` (the compile cache's root) pointed at a new empty directory
    for the block, through the environment, which the tuner's builder workers inherit."""
    saved = os.environ.get("WORKBENCH_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="bench_tuning_cache_") as fresh:
        os.environ["WORKBENCH_CACHE_DIR"] = fresh
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop("WORKBENCH_CACHE_DIR", None)
            else:
                os.environ["WORKBENCH_CACHE_DIR"] = saved


def _vs_tvm(r: dict) -> str:
    tvm = r["tvm"]
    if tvm is None:
        return "TVM not run here: --tvm-python"
    flop = r["gflops_rebuilt"] * r["rebuilt_s"] * 1e9
    return (f"TVM 0.27 in this run: {tvm['tune_s']:.1f} s end to end, ours "
            f"{r['default_call'] / tvm['tune_s']:.2f}x of it (search + confirmation, "
            f"{r['default_call']:.1f} s; target <= 0.5); its kernel "
            f"{flop / tvm['kernel_s'] / 1e9:.1f} GFLOPS")


def _own_work(prof) -> str:
    """The tuner's own share of the wall time: everything but building and running
    candidates (SendToBuilder / SendToRunner include the confirmation's and the
    post-optimization's measurements)."""
    stats = prof.get()
    total = stats.get("Total", 0.0)
    own = total - stats.get("SendToBuilder", 0.0) - stats.get("SendToRunner", 0.0)
    share = own / total if total > 0 else math.nan
    return (f"the tuner's own work (all but building and running candidates) "
            f"{own:.1f} s of {total:.1f} s = {share:.0%} (target < 20%)")


TARGET = "llvm"
PER_ITER = 64

if __name__ == "__main__":
    main()
