"""Regenerate the pretrained cost models (issue 27) and measure what they save.

    python benchmarks/pretrain_cost_model.py collect --out DIR [--target T] [--trials 24]
        [--sets matmul,resnet18,gpt2,mobilenet_v2] [--guided]
    python benchmarks/pretrain_cost_model.py train --data DIR[,DIR...] [--target T]
        [--out FILE] [--base]
    python benchmarks/pretrain_cost_model.py evaluate [--target T] [--cold-trials 512]
        [--trials 128] [--repeats 4] [--work DIR] [--yardstick DIR[,DIR...]]
    python benchmarks/pretrain_cost_model.py rank --work DIR [--model FILE[,FILE]]
    python benchmarks/pretrain_cost_model.py finetune --work DIR [--model FILE] [--at 16,32,64]

``collect`` tunes the kernels of each training set, one work directory per set under DIR:
the JSON databases are the dataset. By default with random sampling (plus each task's default
schedule and its neighbouring tiles, which ``tune_relax`` measures first); with ``--guided``
with the evolutionary search led by the model shipped now, so the data also covers the
candidates that model ranks highest, which random samples seldom reach (a model trained on
random samples alone once stalled at ~92% of the best on a held-out matmul).
``train`` replays every record of one or more collections (a workload's samples from several
merge), extracts its per-store features and fits the pack-sum XGB model, written where the
package loads it (``workbench/meta_schedule/cost_model/pretrained/xgb_<isa>.ubj``); with
``--base`` it continues from the shipped model's trees, so new sets are added to it without
the collections it was trained on.
``evaluate`` tunes workloads held out of every training set (other shapes, another network),
in turns: searches with the pretrained model (``--trials``) and cold ones
(``ms_pretrained_cost_model`` off, ``--cold-trials``: the issue's 512-trial cold search). The
yardstick is the best the cold searches found, their leaders measured again at the end (the
hosts have fast and slow phases), with those of earlier evaluations' cold runs given by
``--yardstick`` (two evaluations made in different phases compare only against one bar); it
prints how many trials each run needed to reach 95% of it, and the ratio of the arms' medians.
``rank`` scores the candidates of ``evaluate``'s cold runs (``--work``) with one or more
models, offline: how well each ranks a held-out workload (rank correlation, and the share of
the best in its top few), so two models compare on the same labels without new searches.
``finetune`` does the same after fine-tuning the model on the first trials of each of
``evaluate``'s pretrained runs, as the tuner does, and with those runs' labels taken against
the cold best instead of the run's own best so far (see :func:`finetune`).

Training sets are the operator families of the models users bring: ResNet-18 (blocked direct
and Winograd convolutions, pooling, the classifier), MobileNetV2 (depthwise, 1x1), a GPT-2
block (dense + bias + GELU, attention, layer norm) and plain matmuls over many shapes;
``--sets`` also takes any torchvision model by name. The shipped models were grown in steps,
each a ``collect`` (random, then ``--guided``) and a ``train --base`` on it; a model's
``sets`` attribute lists every set it has seen. The AVX-512 model's last step added
EfficientNet-B0 and MobileNetV3-Small (3x3 and 5x5 depthwise convolutions, strided, with
squeeze-and-excitation; 124 tasks, 16 random + 16 guided trials each):

    collect --out R --sets efficientnet_b0,mobilenet_v3_small --trials 16
    collect --out G --sets efficientnet_b0,mobilenet_v3_small --trials 16 --guided --seed 1
    train --data R,G --base

The AVX2 model's last step re-collected ResNet-18 once its Winograd transforms had a schedule
rule of their own (their design spaces, and so the candidates' features, changed): ``collect
--sets resnet18 --trials 16`` at random (seed 3) and ``--guided`` (seed 4), then ``train
--base``. Ranked offline against the model before it, on the candidates of other tuning runs'
databases: ResNet-18 (two runs, 14 and 17 workloads) mean Spearman 0.19 / 0.48 -> 0.78 /
0.84, the top-1 pick's share of the best 0.74 / 0.85 -> 0.97 / 0.97; MobileNetV2 (not in
that step: 12 workloads in each of two runs) 0.66 / 0.61 -> 0.67 / 0.73.

The held-out workloads are matmuls of shapes no set has, ResNet-50 bottleneck convolutions (two
1x1, a 3x3 with stride 2) and a MobileNetV3-Large 5x5 depthwise convolution.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import workbench  # noqa: E402,F401 - before torch (its thread pool, see bench_models)

TRAIN_MATMULS = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (128, 768, 768),
                 (128, 768, 3072), (128, 3072, 768), (1, 1280, 1000), (1024, 64, 256),
                 (256, 1024, 128), (200, 300, 500)]
HELD_OUT_MATMULS = [(512, 512, 512), (384, 1024, 256)]


def matmul_module(m: int, k: int, n: int, bias_relu: bool = True) -> Any:
    from workbench import relax
    from workbench.relax import op as R
    a = relax.Var("a", relax.TensorStructInfo((m, k), "float32"))
    b = relax.Var("b", relax.TensorStructInfo((k, n), "float32"))
    c = relax.Var("c", relax.TensorStructInfo((n,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [a, b, c]):
        with bb.dataflow():
            y = R.matmul(a, b)
            out = bb.emit_output(R.nn.relu(R.add(y, c)) if bias_relu else y)
        bb.emit_func_output(out)
    return bb.get()


def model_module(name: str) -> Any:
    from bench_models import export_program, make_model
    from workbench.relax.frontend.torch import from_exported_program
    model, args = make_model(name)
    return from_exported_program(export_program(model, args))


def training_sets(names: list[str]) -> list[tuple[str, Any]]:
    out = []
    for name in names:
        if name == "matmul":
            out += [(f"matmul_{m}x{k}x{n}", matmul_module(m, k, n, bias_relu=i % 2 == 0))
                    for i, (m, k, n) in enumerate(TRAIN_MATMULS)]
        else:
            out.append((name, model_module(name)))
    return out


def collect(args: argparse.Namespace) -> None:
    from workbench import options
    from workbench.meta_schedule.relax_integration import extract_tasks, tune_relax
    os.makedirs(args.out, exist_ok=True)
    for name, mod in training_sets(args.sets.split(",")):
        work = os.path.join(args.out, name)
        n_tasks = len([t for t in extract_tasks(mod, args.target)])
        t0 = time.perf_counter()
        # no confirmation: every trial is a new labelled sample
        if args.guided:
            # the evolutionary search led by the shipped model: labels for the candidates
            # it ranks highest, where its ranking matters and random samples seldom go
            how = dict(num_trials_per_iter=8)
            overrides = dict(ms_confirm_rounds=0, ms_pretrained_cost_model=True)
        else:
            # random samples (the random model is never informed: no evolution against noise)
            how = dict(num_trials_per_iter=args.trials // 2, cost_model="random")
            overrides = dict(ms_confirm_rounds=0)
        with options.override(**overrides):
            tune_relax(mod, None, args.target, work, max_trials_global=args.trials * n_tasks,
                       max_trials_per_task=args.trials, seed=args.seed, **how)
        print(f"{name}: {n_tasks} task(s), {time.perf_counter() - t0:.0f} s", flush=True)


def train(args: argparse.Namespace) -> None:
    from workbench.meta_schedule.cost_model import pretrained as pre
    from workbench.meta_schedule.cost_model.dataset import FeatureGroup
    from workbench.meta_schedule.database import JSONDatabase
    from workbench.target import Target
    from workbench.meta_schedule.utils import shash2hex
    target = Target(args.target)
    # ``evaluate``'s workloads stay out of the training data whatever a set holds (ResNeXt-50's
    # first downsampling convolution is ResNet-50's, structurally)
    held_out = {shash2hex(mod): name for name, mod in _held_out(args.target)}
    groups: dict = {}
    sets = []
    for data in args.data.split(","):
        for sub in sorted(os.listdir(data)):
            work = os.path.join(data, sub)
            if not os.path.exists(os.path.join(work, "database_workload.json")):
                continue
            sets.append(sub)
            got = pre.groups_from_database(JSONDatabase(work_dir=work), target)
            print(f"{work}: {len(got)} workload(s), "
                  f"{sum(len(g.costs) for g in got.values())} sample(s)", flush=True)
            for key, group in got.items():    # one workload's samples from several runs
                if key in held_out:
                    print(f"  left out: {held_out[key]} (held out for evaluate), "
                          f"{len(group.costs)} sample(s)")
                    continue
                groups.setdefault(key, FeatureGroup()).append(group.features, group.costs)
    t0 = time.perf_counter()
    base = pre.load_pretrained(pre.isa_of(target)) if args.base else None
    if base is not None:    # (the file in the package now: a model trained a moment ago too)
        print(f"continuing from {pre.pretrained_path(pre.isa_of(target))}: "
              f"{base.attr('workloads')} workload(s), {base.attr('samples')} sample(s), "
              f"sets {base.attr('sets')}, made {base.attr('made')}")
    booster = pre.train_booster(groups, max_rounds=args.rounds, base=base)
    out = args.out or pre.pretrained_path(pre.isa_of(target))
    os.makedirs(os.path.dirname(out), exist_ok=True)
    cpu = _cpu_name()
    workloads, samples = len(groups), sum(len(g.costs) for g in groups.values())
    if base is not None:    # the saved model's attributes count what its trees were fit on
        sets += (base.attr("sets") or "").split(",")
        workloads += int(base.attr("workloads") or 0)
        samples += int(base.attr("samples") or 0)
    pre.save_booster(booster, out, {
        "num_features": str(pre.feature_count(groups)), "workloads": str(workloads),
        "samples": str(samples), "sets": ",".join(sorted(set(sets) - {""})),
        "target": str(target), "host": cpu, "made": time.strftime("%Y-%m-%d")})
    print(f"trained on {len(groups)} workloads in {time.perf_counter() - t0:.0f} s: "
          f"{booster.num_boosted_rounds()} rounds, {os.path.getsize(out) / 1e6:.2f} MB -> {out}")


def _cpu_name() -> str:
    import platform
    try:
        with open("/proc/cpuinfo") as f:
            return next((line.split(":", 1)[1].strip() for line in f
                         if line.startswith("model name")), platform.processor())
    except OSError:
        return platform.processor()


def _held_out(target: str) -> list[tuple[str, Any]]:
    """Task modules (one kernel each, as the tuner sees them for ``target``: the channel
    block follows its vector width) of shapes no training set has."""
    from workbench.meta_schedule.relax_integration import extract_tasks
    out = []
    for m, k, n in HELD_OUT_MATMULS:
        (task,) = [t for t in extract_tasks(matmul_module(m, k, n), target)
                   if "matmul" in t.task_name]
        out.append((f"matmul_{m}x{k}x{n}", task.dispatched[0]))
    tasks = [t for t in extract_tasks(model_module("resnet50"), target)
             if "conv2d" in t.task_name and "winograd" not in t.task_name]
    # two bottleneck convolutions no training set has (ResNet-18 has no 1x1 over 256 channels)
    for t in tasks[1:3]:
        out.append((f"resnet50.{t.task_name}", t.dispatched[0]))
    # a 3x3 stride-2 convolution (ResNet-18's go from 64 channels to 128, ResNeXt-50's are
    # grouped) and a 5x5 stride-2 depthwise one over 72 channels (EfficientNet-B0's has 144,
    # with SiLU; MobileNetV2's are 3x3)
    t = next(t for t in tasks if _conv_kind(t.dispatched[0]) == (3, True))
    out.append((f"resnet50.{t.task_name}", t.dispatched[0]))
    t = next(t for t in extract_tasks(model_module("mobilenet_v3_large"), target)
             if "depthwise" in t.task_name and _conv_kind(t.dispatched[0]) == (5, True))
    out.append((f"mobilenet_v3_large.{t.task_name}", t.dispatched[0]))
    return out


def _conv_kind(mod: Any) -> tuple[int, bool]:
    """(kernel height, strided) of a convolution task's module, from its buffers: the data
    (N, C, H, W[, c]), the weight (O, I, kh, kw, ...) and the output last."""
    bufs = list(mod["main"].buffer_map.values())
    data, weight, out = (tuple(int(x.value) for x in b.shape) for b in (bufs[0], bufs[1],
                                                                        bufs[-1]))
    return weight[2], out[2] < data[2]


def _selected(args: argparse.Namespace, name: str) -> bool:
    """``--only``: comma-separated parts of workload names (any one selects)."""
    return not args.only or any(part in name for part in args.only.split(","))


def _tune_one(mod: Any, target: str, work: str, trials: int, pretrained: bool,
              seed: int, batch: int = 8, strategy: Any = "evolutionary") -> list[float]:
    """Best-so-far run time (s) after each trial of one tuning run."""
    from workbench import options
    from workbench.meta_schedule import tune_tir
    from workbench.meta_schedule.database import JSONDatabase
    done = len(JSONDatabase(work_dir=work)) if os.path.isdir(work) else 0
    if done < trials:     # a finished run in ``work`` is read back, not repeated
        with options.override(ms_pretrained_cost_model=pretrained, ms_confirm_rounds=0):
            # the search alone: the default schedule first would hide the cost model
            tune_tir(mod, target, work, max_trials_global=trials - done,
                     num_trials_per_iter=batch, seed=seed, strategy=strategy,
                     default_schedule_first=False)
    db = JSONDatabase(work_dir=work)
    costs = []
    for record in db.records_in_commit_order():      # in the order they were measured
        ok = record.run_secs and all(s < 1e9 for s in record.run_secs)
        costs.append(float(np.median(record.run_secs)) if ok else np.inf)
    return list(np.minimum.accumulate(costs))


def _remeasured_best(mod: Any, target: str, work: str, top: int = 3, times: int = 3) -> float:
    """A search's best, measured again now: the median of ``times`` runner-like
    measurements of each of its ``top`` records, the fastest of those. The machines here
    have fast and slow phases (1.5x apart), so a best timed in another phase is no
    yardstick for runs timed in this one."""
    from workbench import build, cpu
    from workbench.meta_schedule.arg_info import ArgInfo
    from workbench.meta_schedule.database import JSONDatabase
    from workbench.meta_schedule.runner.config import EvaluatorConfig
    from workbench.meta_schedule.runner.utils import default_alloc_argument, \
        default_run_evaluator
    from workbench.tir.transform.remove_weight_layout_rewrite_block import (
        RemoveWeightLayoutRewriteBlock,
    )
    db = JSONDatabase(work_dir=work)
    out = []
    for record in db.get_top_k(db.commit_workload(mod), top):
        sch = record.as_measure_candidate().sch
        # as the builder does: a weight the layout rewrite packs is a packed argument
        rt = build(RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(sch.mod), target)
        args = default_alloc_argument(cpu(), ArgInfo.from_entry_func(sch.mod, True), 1)
        secs = [default_run_evaluator(rt, cpu(), EvaluatorConfig(), args)[0]
                for _ in range(times)]
        out.append(float(np.median(secs)))
    return min(out)


def _yardstick_runs(args: argparse.Namespace, root: str, name: str,
                    earlier: list[str]) -> list[str]:
    """The work directories of the cold runs whose best is ``name``'s yardstick: this
    evaluation's, and the ``cold*`` runs of ``name`` under each ``earlier`` directory
    (``--yardstick``), each once.
    A bar from one evaluation's cold runs alone moves with the host's phase: cold runs made
    in a slow phase found bests at 0.66-0.97 of earlier ones, and a search change that
    gained nothing read 3.7x fewer trials to 95% against 2.6x."""
    import glob
    runs = [os.path.join(root, name, f"cold{rep}") for rep in range(args.repeats)]
    for extra in earlier:
        runs += sorted(d for d in glob.glob(os.path.join(extra, name, "cold*"))
                       if os.path.isdir(d))
    return list(dict.fromkeys(os.path.realpath(d) for d in runs))


def evaluate(args: argparse.Namespace) -> None:
    import tempfile
    logging.getLogger("workbench.meta_schedule").setLevel(logging.WARNING)
    earlier = args.yardstick.split(",") if args.yardstick else []
    missing = [d for d in earlier if not os.path.isdir(d)]
    if missing:
        raise SystemExit(f"evaluate --yardstick: no such directory: {', '.join(missing)}")
    root = args.work or tempfile.mkdtemp(prefix="wb_pretrain_eval_")
    print(f"host {_cpu_name()}, target {args.target}; records in {root}")
    rows = []
    budget = {True: args.trials, False: args.cold_trials}     # trials of a pretrained / cold arm
    for name, mod in _held_out(args.target):
        if not _selected(args, name):
            continue
        # Each cold arm is the long cold search itself (``--cold-trials``, 512), so a
        # cold run's count is measured, not capped at the short budget of the pretrained arm
        # (a cap would credit the cold search with reaching the bar the moment it stops).
        # Arms run in turns; a finished run in its work directory is read back, not repeated.
        curves: dict[bool, list[list[float]]] = {True: [], False: []}
        for rep in range(args.repeats):
            for pre in (True, False):
                trials = budget[pre]
                work = os.path.join(root, name, f"{'pre' if pre else 'cold'}{rep}")
                t0 = time.perf_counter()
                curves[pre].append(_tune_one(mod, args.target, work, trials, pre, rep,
                                             args.batch, _strategy(args)))
                print(f"{name}: {'pretrained' if pre else 'cold'} run {rep}, {trials} trials, "
                      f"{time.perf_counter() - t0:.0f} s", flush=True)
        # the yardstick: the best the cold searches found, their leaders measured again now
        # (the hosts have fast and slow phases); a run that finds better counts as reaching it
        colds = _yardstick_runs(args, root, name, earlier)
        best = min(_remeasured_best(mod, args.target, work) for work in colds)
        if len(colds) > args.repeats:
            print(f"{name}: the yardstick also holds {len(colds) - args.repeats} earlier "
                  f"cold run(s) (--yardstick), measured again now", flush=True)
        counts = {pre: [_trials_to(c, best, 0.95) for c in cs] for pre, cs in curves.items()}
        rows.append((name, best, counts))
        print(f"{name}: best of the cold searches {best * 1e6:.1f} us (measured again now); "
              f"trials to 95%: pretrained {counts[True]} (None: not within {args.trials}), "
              f"cold {counts[False]} (None: not within {args.cold_trials})", flush=True)
        for pre, cs in curves.items():
            print(f"  {'pretrained' if pre else 'cold':10s} median share of the best after "
                  + ", ".join(f"{n}: {np.median([best / c[min(n, len(c)) - 1] for c in cs]):.2f}"
                              for n in SHARE_AT if n <= budget[pre]), flush=True)
    print("\nworkload | best (us) | pretrained: trials to 95% (median) | cold (median) | "
          "cold / pretrained")
    ratios, hard = [], []
    for name, best, counts in rows:
        med = {pre: _median_trials(c, budget[pre]) for pre, c in counts.items()}
        ratio = med[False] / med[True]
        ratios.append(ratio)
        if med[False] > HARD_TRIALS:
            hard.append(ratio)
        print(f"{name} | {best * 1e6:.1f} | {counts[True]} ({med[True]:g}) | "
              f"{counts[False]} ({med[False]:g}) | {ratio:.1f}x")
    if ratios:
        print(f"geometric mean: the pretrained model needs {np.exp(np.mean(np.log(ratios))):.1f}x "
              f"fewer trials (a pretrained run that never got there counts as "
              f"{args.trials + 1}, a cold one as {args.cold_trials + 1})")
    if hard:
        # where cold searches get there within a few trials, one trial is the floor and
        # the ratio cannot exceed their count: the workloads with room for it, apart
        print(f"over the {len(hard)} workload(s) whose cold searches need more than "
              f"{HARD_TRIALS} trials: {np.exp(np.mean(np.log(hard))):.1f}x")


def rank(args: argparse.Namespace) -> None:
    """How well models rank the candidates ``evaluate``'s cold searches measured (a wide
    spread: random samples, then evolved ones), workload by workload: Spearman's rank
    correlation of score and throughput, and the share of the best that the model's top
    1 / 4 / 8 hold. Offline: no measurement, only trace replays and feature extraction, so
    it compares models (``--model A,B``; default the shipped one) on the same labels."""
    import pandas as pd
    import xgboost as xgb

    from workbench.meta_schedule.cost_model import pretrained as pre
    from workbench.target import Target
    target = Target(args.target)
    paths = args.model.split(",") if args.model else [pre.pretrained_path(pre.isa_of(target))]
    boosters = {}
    for path in paths:
        boosters[path] = xgb.Booster()
        boosters[path].load_model(path)
        print(f"model {path}: {boosters[path].attr('workloads')} workload(s), "
              f"{boosters[path].attr('samples')} sample(s), made {boosters[path].attr('made')}")
    print("\nworkload | candidates | model | Spearman | best share in top 1 / 4 / 8")
    for name, mod in _held_out(args.target):
        if not _selected(args, name):
            continue
        cold = _cold_matrix(args.work, name, mod, target)
        if cold is None:
            continue
        costs, matrix, ids = cold
        for path, booster in boosters.items():
            scores = _scores(booster, matrix, ids, len(costs))
            rho = pd.Series(scores).corr(pd.Series(1.0 / costs), method="spearman")
            tops = " / ".join(f"{v:.2f}" for v in _top_shares(scores, costs, (1, 4, 8)))
            print(f"{name} | {len(costs)} | {os.path.basename(path)} | {rho:.2f} | {tops}",
                  flush=True)


def _measured(work: str, mod: Any, target: Any, in_order: bool = False) -> Any:
    """The successful measurements of ``mod`` in the run ``work`` as a FeatureGroup (traces
    replayed, features extracted as the tuner does); ``in_order``: oldest first, else
    fastest first (``JSONDatabase.get_all_tuning_records``)."""
    from workbench.meta_schedule.cost_model import pretrained as pre
    from workbench.meta_schedule.cost_model.dataset import FeatureGroup
    from workbench.meta_schedule.database import JSONDatabase
    from workbench.meta_schedule.utils import shash2hex
    database = JSONDatabase(work_dir=work)
    groups = pre.groups_from_database(_InCommitOrder(database) if in_order else database,
                                      target)
    return groups.get(shash2hex(mod)) or FeatureGroup()


def _cold_pool(root: str, name: str, mod: Any, target: Any) -> Any:
    """Every candidate the cold runs of ``name`` under ``root`` (``evaluate``'s --work)
    measured, one FeatureGroup."""
    import glob

    from workbench.meta_schedule.cost_model.dataset import FeatureGroup
    pool = FeatureGroup()
    for work in sorted(glob.glob(os.path.join(root, name, "cold*"))):
        one = _measured(work, mod, target)
        pool.append(one.features, one.costs)
    return pool


def _cold_matrix(root: str, name: str, mod: Any, target: Any) -> Any:
    """``(costs, matrix, ids)`` of :func:`_cold_pool`'s candidates: their costs, their
    packed feature rows as an ``xgb.DMatrix`` and the rows' candidate ids; None when there
    are fewer than two to rank."""
    import xgboost as xgb

    from workbench.meta_schedule.cost_model.dataset import pack
    pool = _cold_pool(root, name, mod, target)
    costs = np.asarray(pool.costs)
    if len(costs) < 2:
        return None
    rows, ids = pack(pool.features)
    return costs, xgb.DMatrix(rows), ids


def _scores(booster: Any, matrix: Any, ids: np.ndarray, n: int) -> np.ndarray:
    """``booster``'s score of each of ``n`` candidates (packed rows ``matrix``, ids ``ids``)."""
    from workbench.meta_schedule.cost_model.dataset import pack_sum
    return pack_sum(booster.predict(matrix, output_margin=True), ids, n)


def _top_shares(scores: np.ndarray, costs: np.ndarray, ks: tuple[int, ...]
                ) -> tuple[float, ...]:
    """The share of the best (``costs.min()``) that the top k by ``scores`` hold, per k."""
    order = np.argsort(-scores)
    return tuple(costs.min() / costs[order[:k]].min() for k in ks)


class _InCommitOrder:
    """A JSON database whose records are listed oldest first (``groups_from_database`` reads
    ``get_all_tuning_records``, which lists them fastest first)."""

    def __init__(self, database: Any) -> None:
        self.database = database

    def get_all_tuning_records(self) -> list:
        return self.database.records_in_commit_order()


def _against(best: float) -> Any:
    """An empty FeatureGroup whose labels are relative to ``best`` instead of its own
    fastest cost (``labels`` divides ``min_cost`` by each cost)."""
    from workbench.meta_schedule.cost_model.dataset import FeatureGroup

    class Against(FeatureGroup):
        @property
        def min_cost(self) -> float:
            return best
    return Against()


def finetune(args: argparse.Namespace) -> None:
    """How a model ranks a held-out workload once fine-tuned on the first ``--at`` trials of
    each of ``evaluate``'s pretrained runs, as the tuner fine-tunes (the shipped trees, then
    trees of the residual): the share of the best that its top 1 / 8 of the cold runs'
    candidates hold, against the pretrained trees alone and against the same fine-tuning
    with the run's labels taken relative to the cold runs' best instead of the run's own best
    so far (an oracle: how much of the loss comes from labelling early measurements against
    a best that is not yet the best). Offline, like ``rank``: trace replays and training only.
    A proxy, not a search: a model that ranks this pool better need not find more in a run."""
    import glob

    import xgboost as xgb

    from workbench.meta_schedule.cost_model import pretrained as pre
    from workbench.meta_schedule.cost_model.dataset import FeatureGroup
    from workbench.target import Target
    if not os.path.isdir(args.work):
        raise SystemExit(f"finetune --work: no such directory: {args.work}")
    try:
        at = [int(t) for t in args.at.split(",")]
    except ValueError:
        at = []
    if not at or min(at) < 2:
        raise SystemExit(f"finetune --at: expected trial counts >= 2, comma-separated, got "
                         f"{args.at!r}")
    target = Target(args.target)
    path = args.model or pre.pretrained_path(pre.isa_of(target))
    base = xgb.Booster()
    base.load_model(path)

    def fit(group: FeatureGroup) -> Any:
        return pre.train_booster({"task": group}, max_rounds=10000, base=base)

    print(f"model {path}; fine-tuned on the first {args.at} trials of each pretrained run "
          f"(failures left out); top 1 / 8 of the cold runs' candidates, median over runs")
    print("workload | trials | pretrained | fine-tuned | fine-tuned, labels against the "
          "cold best")
    for name, mod in _held_out(args.target):
        runs = sorted(glob.glob(os.path.join(args.work, name, "pre*")))
        if not _selected(args, name) or not runs:
            continue
        cold = _cold_matrix(args.work, name, mod, target)
        if cold is None:
            continue
        costs, matrix, ids = cold

        def tops(booster: Any, matrix: Any = matrix, ids: np.ndarray = ids,
                 costs: np.ndarray = costs) -> tuple[float, ...]:
            return _top_shares(_scores(booster, matrix, ids, len(costs)), costs, (1, 8))
        first = [_measured(work, mod, target, in_order=True) for work in runs]
        for t in at:
            cells = [[tops(base)] * len(first), [], []]
            for run in first:
                own, against = FeatureGroup(), _against(float(costs.min()))
                for g in (own, against):
                    g.append(run.features[:t], run.costs[:t])
                cells[1].append(tops(fit(own)))
                cells[2].append(tops(fit(against)))
            print(f"{name} | {t} | " + " | ".join(
                " / ".join(f"{np.median([c[k] for c in cell]):.2f}" for k in (0, 1))
                for cell in cells), flush=True)


def _strategy(args: argparse.Namespace) -> Any:
    """The arms' search: the default, or with ``--search-share`` another share of the wall
    time for the search (``none``: rounds sized by ``--population`` alone)."""
    if args.search_share is None:
        return "evolutionary"
    from workbench.meta_schedule.search_strategy import EvolutionarySearch
    share = None if args.search_share == "none" else float(args.search_share)
    return EvolutionarySearch(population_size=args.population, search_share=share,
                              seconds_per_candidate=None if share is None else 0.15)


#: Cold searches needing more trials than this (median) leave room for a large ratio;
#: ``evaluate`` summarises those workloads apart (a matmul's cold search gets within 95% of
#: its best in 2-3 trials: a ratio of at most 2-3 whatever the model).
HARD_TRIALS = 16
#: Trial counts at which ``evaluate`` prints the arms' median share of the best.
SHARE_AT = (1, 4, 8, 16, 32, 64, 128, 256, 512)


def _trials_to(curve: list[float], best: float, share: float) -> int | None:
    """The first trial (1-based) whose best-so-far reaches ``share`` of ``best``."""
    return next((i + 1 for i, c in enumerate(curve) if best / c >= share), None)


def _median_trials(counts: list[int | None], trials: int) -> float:
    return float(np.median([trials + 1 if c is None else c for c in counts]))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect")
    c.add_argument("--out", required=True)
    c.add_argument("--sets", default="matmul,resnet18,gpt2,mobilenet_v2")
    c.add_argument("--trials", type=int, default=24)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--guided", action="store_true",
                   help="evolutionary search led by the shipped model instead of random "
                        "samples")
    t = sub.add_parser("train")
    t.add_argument("--data", required=True, help="collect's --out (comma-separated: several)")
    t.add_argument("--out", default=None)
    t.add_argument("--rounds", type=int, default=300)
    t.add_argument("--base", action="store_true",
                   help="continue from the shipped model's trees (new sets added to it)")
    e = sub.add_parser("evaluate")
    e.add_argument("--cold-trials", type=int, default=512,
                   help="the cold arm: the long cold search whose best is the yardstick")
    e.add_argument("--trials", type=int, default=128, help="the pretrained arm's budget")
    e.add_argument("--repeats", type=int, default=4,
                   help="runs an arm: with 2, one run moved a median by 2-4x (the 95%% "
                        "line is a cliff: a 2%% move of the yardstick moves a count from "
                        "26 trials to none within 128)")
    e.add_argument("--only", default=None, help="parts of workload names, comma-separated")
    e.add_argument("--work", default=None, help="keep (and reuse) the runs' records here")
    e.add_argument("--batch", type=int, default=8, help="candidates per round")
    e.add_argument("--yardstick", default=None,
                   help="earlier evaluations' --work directories, comma-separated: their cold "
                        "runs of the same workloads join the yardstick (measured again now), "
                        "so evaluations made in different phases of the host compare")
    e.add_argument("--search-share", default=None,
                   help="the arms' EvolutionarySearch(search_share=...): a number, or none")
    e.add_argument("--population", type=int, default=512,
                   help="with --search-share: the population (TVM's 512)")
    r = sub.add_parser("rank")
    r.add_argument("--work", required=True, help="evaluate's --work (its cold runs)")
    r.add_argument("--model", default=None,
                   help="booster file(s), comma-separated (default: the shipped one)")
    r.add_argument("--only", default=None, help="parts of workload names, comma-separated")
    f = sub.add_parser("finetune")
    f.add_argument("--work", required=True, help="evaluate's --work (its cold and pretrained "
                                                 "runs)")
    f.add_argument("--model", default=None, help="booster file (default: the shipped one)")
    f.add_argument("--at", default="16,32,64", help="trial counts, comma-separated")
    f.add_argument("--only", default=None, help="parts of workload names, comma-separated")
    for q in (c, t, e, r, f):
        q.add_argument("--target", default="llvm -num-cores=2")
    args = p.parse_args()
    {"collect": collect, "train": train, "evaluate": evaluate, "rank": rank,
     "finetune": finetune}[args.cmd](args)


main()
