"""Post-optimization (``tune_tir(..., post_optimization=True)``, the Droplet search).

The search itself is checked on synthetic costs of the decisions (no builds); the wiring with
a builder whose "artifact" carries a synthetic latency of the scheduled loop nest and a runner
whose timings the test controls (per-batch load, injected build and run failures); and one
real small tuning run, checked against numpy.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
import sys

import numpy as np
import pytest

from workbench import meta_schedule as ms
from workbench import options
from workbench.meta_schedule.builder import BuilderResult, PyBuilder
from workbench.meta_schedule.database.database import FAILED_RUN_SECS
from workbench.meta_schedule.measure_callback import AddToDatabase, MeasureCallback
from workbench.meta_schedule.post_optimization import DropletSearch, knobs_of, neighbours
from workbench.meta_schedule.post_optimization.space import decision_key
from workbench.meta_schedule.runner import PyRunner, RunnerFuture, RunnerResult
from workbench.meta_schedule.utils import derived_object
from workbench.tir.schedule import Schedule

sys.path.insert(0, os.path.dirname(__file__))
from ms_tuning_workloads import (  # noqa: E402
    LLVM_SPACE_TARGET, fast_runner, matmul, random_args, run)
from test_ms_search_quality import synthetic_latency  # noqa: E402

pytestmark = pytest.mark.tuning
# a fixed ISA: on an AVX-512 host the tensorize rules would replace the tiles searched here
TARGET = LLVM_SPACE_TARGET


def _design_trace(n: int = 256, seed: int = 3):
    """A sampled design-space trace of an n x n x n matmul (decisions drawn at random)."""
    mod = ms.tir_integration.task_module(matmul(n))
    ctx = ms.TuneContext(mod, target=TARGET, space_generator="post-order-apply",
                         search_strategy="replay-trace", rand_state=seed)
    sch = ctx.space_generator.generate_design_space(mod)[0]
    return mod, sch.trace


# ---- the space ------------------------------------------------------------------------------

def test_neighbours_move_one_knob_and_keep_perfect_tiles():
    mod, trace = _design_trace()
    knobs = knobs_of(trace)
    kinds = {k.kind for k in knobs}
    assert kinds == {"tile", "categorical"}
    tiles = {k.inst for k in knobs if k.kind == "tile"}
    extents = {inst: math.prod(trace.decisions[inst]) for inst in tiles}
    for step in (1, 2):
        moves = neighbours(trace, step)
        assert moves, "a sampled matmul trace has neighbours"
        for new, move in moves:
            changed = [k for k in knobs
                       if k.current(new.decisions[k.inst]) != k.current(trace.decisions[k.inst])]
            # one knob moved (a tile move also changes the absorbing outer factor, pos 0)
            assert len(changed) == 1, move
            for inst in tiles:
                d = [int(x) for x in new.decisions[inst]]
                assert math.prod(d) == extents[inst] and min(d) >= 1, (move, d)
                assert d[-1] <= int(inst.attrs[1]), (move, d)
            sch = Schedule(mod)
            new.apply_to_schedule(sch, remove_postproc=True)  # every point replays


# ---- the search on synthetic costs ----------------------------------------------------------

def _cost(trace) -> float:
    """A smooth synthetic cost of the decisions: tile factors near 8, unroll index near 2."""
    cost = 1.0
    for inst, d in trace.decisions.items():
        if inst.kind.name == "SamplePerfectTile":
            cost += sum((math.log2(int(x)) - 3) ** 2 for x in d[1:])
        elif inst.kind.name == "SampleCategorical":
            cost += 0.5 * (int(d) - 2) ** 2
    return 1e-3 * cost


class _Measure:
    """Synthetic ``measure``: cost times a per-batch load; records what was asked."""

    def __init__(self, load=lambda batch: 1.0, fail=lambda trace: False):
        self.batches: list[list] = []
        self.load = load
        self.fail = fail

    def __call__(self, traces):
        self.batches.append(list(traces))
        k = self.load(len(self.batches) - 1)
        return [None if self.fail(t) else _cost(t) * k for t in traces]


def test_droplet_descends_to_a_local_minimum_within_budget():
    _, start = _design_trace()
    measure = _Measure()
    result = DropletSearch(max_trials=400, min_gain=0.0).run(start, measure)
    assert result.improved and _cost(result.best_trace) < _cost(start)
    assert result.trials == sum(len(b) for b in measure.batches) <= 400
    seen = [decision_key(t) for b in measure.batches for t in b[1:]]
    assert len(seen) == len(set(seen)), "a point was measured twice"
    # each batch re-measures the incumbent first: the start, then each accepted move
    assert decision_key(measure.batches[0][0]) == decision_key(start)
    accepted = [b for b in result.batches if b.accepted]
    assert len(accepted) == len(measure.batches) - 1  # the last batch found nothing better
    # the result is a local minimum: no neighbour one step away is cheaper
    best = _cost(result.best_trace)
    assert all(_cost(t) >= best for t, _ in neighbours(result.best_trace, 1))
    assert result.best_secs == pytest.approx(best)
    assert result.speedup == pytest.approx(_cost(start) / best)


def test_droplet_budget_and_stop():
    _, start = _design_trace()
    measure = _Measure()
    result = DropletSearch(max_trials=5, min_gain=0.0).run(start, measure)
    assert result.trials <= 5 and all(len(b) <= 5 for b in measure.batches)
    calls = []
    stopped = DropletSearch(max_trials=400).run(
        start, _Measure(), should_stop=lambda: calls.append(1) or len(calls) > 1)
    assert len(stopped.batches) == 1


def test_droplet_compares_within_a_batch_not_with_the_stored_time():
    _, start = _design_trace()
    # The stored time was taken in a quiet moment (10x faster than now), every batch runs
    # under the same 3x load: the better neighbours must still win.
    result = DropletSearch(max_trials=200, min_gain=0.0).run(
        start, _Measure(load=lambda b: 3.0), recorded_secs=_cost(start) / 10)
    assert result.improved
    # The stored time was taken under load (10x slower): a neighbour that is only faster than
    # that stale number, not than the incumbent measured beside it, must not win.
    _, local_min = _design_trace()
    best = DropletSearch(max_trials=400, min_gain=0.0).run(local_min, _Measure()).best_trace
    again = DropletSearch(max_trials=400, min_gain=0.0).run(
        best, _Measure(), recorded_secs=_cost(best) * 10)
    assert not again.improved and again.best_trace is best


def test_droplet_skips_failures_and_looks_further():
    _, start = _design_trace()
    # every step-1 neighbour fails (odd distance in some knob): the search tries step 2
    first = {decision_key(t) for t, _ in neighbours(start, 1)}
    measure = _Measure(fail=lambda t: decision_key(t) in first)
    result = DropletSearch(max_trials=400, min_gain=0.0).run(start, measure)
    assert result.batches[0].step == 1 and all(s is None for _, s in result.batches[0].moves)
    assert result.batches[1].step == 2
    assert result.improved
    assert decision_key(result.best_trace) not in first


def test_droplet_checks_its_arguments():
    with pytest.raises(ValueError, match="max_trials"):
        DropletSearch(max_trials=1)
    with pytest.raises(ValueError, match="min_gain"):
        DropletSearch(max_trials=8, min_gain=1.5)


# ---- wiring: synthetic builds, timings the test controls ------------------------------------

_PREFIX = "synthetic:"


@derived_object
class _FlakyBuilder(PyBuilder):
    """"Builds" a candidate into its synthetic latency; fails every 5th build."""

    def __init__(self):
        self.count = 0

    def build(self, build_inputs):
        out = []
        for b in build_inputs:
            self.count += 1
            if self.count % 5 == 0:
                out.append(BuilderResult(None, "injected build failure"))
            else:
                out.append(BuilderResult(f"{_PREFIX}{synthetic_latency(b.mod)!r}", None))
        return out


@derived_object
class _LoadedRunner(PyRunner):
    """Reports the synthetic latency times ``load(batch number)``; every 7th run fails (as a
    wrong result would)."""

    def __init__(self, load):
        self.load = load
        self.batch = 0
        self.count = 0
        self.factors = set()

    def run(self, runner_inputs):
        load = self.load(self.batch)
        self.factors.add(load)
        self.batch += 1
        out = []
        for r in runner_inputs:
            self.count += 1
            if self.count % 7 == 0:
                res = RunnerResult(None, "LocalRunner: wrong result: injected")
            else:
                res = RunnerResult([float(r.artifact_path[len(_PREFIX):]) * load], None)
            out.append(RunnerFuture(lambda: True, lambda res=res: res))
        return out


class _Stop(MeasureCallback):
    """Behaves like a dashboard whose Stop was pressed once the search ended."""

    stop_requested = False

    def apply(self, task_scheduler, task_id, cands, built, results):
        pass


def _tune_synthetic(work_dir, post_optimization, callbacks=(), load=lambda batch: 1.0,
                    trials=16):
    scheduler = ms.TaskScheduler.create("round-robin")
    scheduler.check_outputs = False  # nothing is really built
    func = matmul(256)
    runner = _LoadedRunner(load)
    with options.override(ms_post_opt_trials=40, ms_post_opt_min_gain=0.0):
        db = ms.tune_tir(func, TARGET, work_dir, max_trials_global=trials,
                         num_trials_per_iter=8, builder=_FlakyBuilder(), runner=runner,
                         database="memory", cost_model="random",
                         measure_callbacks=[AddToDatabase(), *callbacks],
                         task_scheduler=scheduler, strategy="replay-trace", seed=11,
                         post_optimization=post_optimization)
    return func, db, runner


def _true_latency(mod, record) -> float:
    sch = Schedule(mod)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    return synthetic_latency(sch.mod)


@contextlib.contextmanager
def _post_opt_log():
    """The records of the post-optimization logger (the tuner's loggers do not propagate)."""
    got: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = got.append
    lg = logging.getLogger("workbench.meta_schedule.post_optimization")
    old = lg.level
    lg.addHandler(handler)
    lg.setLevel(logging.INFO)
    try:
        yield got
    finally:
        lg.removeHandler(handler)
        lg.setLevel(old)


# The machine's load changes from batch to batch; or one batch (the second of the
# post-optimization) runs 20x faster than any other: a lucky moment.
_LOADS = {"drifting": lambda b: (1.0, 1.7, 0.6, 1.3)[b % 4],
          "lucky batch": lambda b: 0.05 if b == 3 else 1.0}


@pytest.mark.parametrize("load", list(_LOADS))
def test_post_opt_never_records_a_worse_best(tmp_path, load):
    with _post_opt_log() as log:
        func, db, runner = _tune_synthetic(str(tmp_path), True, load=_LOADS[load])
    records = db.get_all_tuning_records()
    search, post = records[:16], records[16:]
    (res,) = [rec.post_opt for rec in log if hasattr(rec, "post_opt")]
    assert post and res.trials <= 40

    def best(recs):
        return min(recs, key=lambda r: r.mean_run_secs if r.is_valid() else math.inf)

    mod = ms.tir_integration.task_module(func)
    # what matters: the database's best schedule is really (by its synthetic latency) at
    # least as fast as the best before post-optimization, whatever the timings looked like
    assert _true_latency(mod, best(records)) <= _true_latency(mod, best(search))
    assert res.best_before == best(search).mean_run_secs
    assert res.best_after == best(records).mean_run_secs <= res.best_before
    # every record holds its own schedule's times (each a latency times a batch's load)
    failures = 0
    for r in post:
        if r.run_secs == [FAILED_RUN_SECS]:
            failures += 1
            continue
        for secs in r.run_secs:
            ratio = secs / _true_latency(mod, r)
            assert any(ratio == pytest.approx(k) for k in runner.factors), ratio
    assert failures > 0, "the injected failures did not reach post-optimization"
    # a record committed below the old best is the search's result, confirmed side by side
    below = [r for r in post if r.is_valid() and r.mean_run_secs < res.best_before]
    if below:
        assert res.confirmed and len(below) == 1
        assert decision_key(below[0].trace) == decision_key(res.search.best_trace)
    else:
        assert not res.confirmed
    if load == "lucky batch":
        # the lucky batch made every candidate in it look 20x faster than the old best:
        # none of them became the best unless it won the side-by-side comparison
        assert res.held_back > 0
    assert res.summary().startswith("post-optimization of 'main': best ")


def test_post_opt_off_and_stopped_add_nothing(tmp_path):
    _, db, _ = _tune_synthetic(str(tmp_path / "off"), False)
    assert len(db.get_all_tuning_records()) == 16
    stop = _Stop()
    stop.stop_requested = True
    _, db, _ = _tune_synthetic(str(tmp_path / "stopped"), True, callbacks=[stop])
    assert len(db.get_all_tuning_records()) == 16


# ---- a real run -----------------------------------------------------------------------------

@pytest.mark.slow
def test_post_opt_real_tuning_run(tmp_path):
    func = matmul(64)
    with options.override(ms_post_opt_trials=8), _post_opt_log() as log:
        db = ms.tune_tir(func, TARGET, str(tmp_path), max_trials_global=4,
                         num_trials_per_iter=4, strategy="replay-trace", runner=fast_runner(),
                         cost_model="random", seed=5, post_optimization=True,
                         default_schedule_first=False)   # a searched record to refine
    records = db.records_in_commit_order()
    (res,) = [rec.post_opt for rec in log if hasattr(rec, "post_opt")]
    # it measured neighbours; a neighbour that only looked faster and lost the side-by-side
    # comparison is not committed (on a loaded machine that can be every one of them)
    assert 0 < res.trials <= 8
    assert 4 <= len(records) <= 4 + res.trials
    valid = [r.mean_run_secs for r in records if r.is_valid()]
    before = min(r.mean_run_secs for r in records[:4] if r.is_valid())
    assert min(valid) <= before
    assert res.best_before == pytest.approx(before) and res.best_after == min(valid)
    # the JSON files hold the new records, and the best schedule computes a matmul
    again = ms.database.JSONDatabase(work_dir=str(tmp_path))
    assert len(again.get_all_tuning_records()) == len(records)
    sch = ms.compile_tir(db, func, TARGET)
    args = random_args(func)
    np.testing.assert_allclose(run(sch.mod, args)[-1], args[0] @ args[1], rtol=1e-4,
                               atol=1e-5)


def test_measure_batch_needs_a_tuned_scheduler():
    with pytest.raises(RuntimeError, match="call tune"):
        ms.TaskScheduler.create("round-robin").measure_batch(0, [])
    from workbench.meta_schedule.post_optimization.post_opt import post_optimize
    with pytest.raises(ValueError, match="max_trials"):
        post_optimize(ms.TaskScheduler.create("round-robin"), max_trials=3)
