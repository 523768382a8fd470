"""The confirmation that ends a tuning run (``meta_schedule.confirm``): each task's leaders
are measured again, so a lucky single measurement does not decide the best schedule.

Wiring is checked with a builder whose "artifact" carries a synthetic latency of the
scheduled loop nest and a runner that reports it with the noise the test chooses; one real
small run checks the records and the result against numpy.
"""
from __future__ import annotations

import logging
import os
import sys

import numpy as np
import pytest

from workbench import meta_schedule as ms
from workbench import options
from workbench.meta_schedule.confirm import confirm_best, measurements
from workbench.meta_schedule.database.database import trace_key
from workbench.meta_schedule.measure_callback import AddToDatabase
from workbench.meta_schedule.runner import PyRunner, RunnerFuture, RunnerResult
from workbench.meta_schedule.task_budget import trials_done
from workbench.meta_schedule.utils import derived_object
from workbench.tir.schedule import Schedule

sys.path.insert(0, os.path.dirname(__file__))
from ms_tuning_workloads import (  # noqa: E402
    LLVM_SPACE_TARGET, fast_runner, matmul, random_args, run)
from test_ms_post_opt import _Stop  # noqa: E402
from test_ms_search_quality import _PREFIX, SyntheticBuilder, synthetic_latency  # noqa: E402

pytestmark = pytest.mark.tuning
TARGET = LLVM_SPACE_TARGET


@derived_object
class _LuckyRunner(PyRunner):
    """Reports each schedule's synthetic latency, except that the first measurement of the
    schedules in ``lucky`` (synthetic latencies) comes out as ``lucky_secs``."""

    def __init__(self, lucky=(), lucky_secs=0.0):
        self.lucky, self.lucky_secs = set(lucky), lucky_secs
        self.seen: dict[float, int] = {}

    def run(self, runner_inputs):
        out = []
        for r in runner_inputs:
            latency = float(r.artifact_path[len(_PREFIX):])
            n = self.seen[latency] = self.seen.get(latency, 0) + 1
            secs = self.lucky_secs if latency in self.lucky and n == 1 else latency
            res = RunnerResult([secs], None)
            out.append(RunnerFuture(lambda: True, lambda res=res: res))
        return out


def _true_latency(mod, record) -> float:
    sch = Schedule(mod)
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    return synthetic_latency(sch.mod)


def _tune(work_dir, runner, rounds, callbacks=()):
    scheduler = ms.TaskScheduler.create("round-robin")
    scheduler.check_outputs = False  # nothing is really built
    func = matmul(256)
    with options.override(ms_confirm_rounds=rounds, ms_confirm_top_k=3):
        db = ms.tune_tir(func, TARGET, work_dir, max_trials_global=24, num_trials_per_iter=8,
                         builder=SyntheticBuilder(), runner=runner, database="memory",
                         cost_model="random", measure_callbacks=[AddToDatabase(), *callbacks],
                         task_scheduler=scheduler, strategy="replay-trace", seed=3)
    return ms.tir_integration.task_module(func), db


def test_a_lucky_measurement_does_not_decide_the_best(tmp_path):
    # which schedules the search samples (seeded): two of them, over 2x slower than the best,
    # are measured at half the best's time the first time
    probe = _LuckyRunner()
    mod, db = _tune(str(tmp_path / "probe"), probe, rounds=0)
    latencies = sorted(probe.seen)
    truly_best = latencies[0]
    slow = [t for t in latencies if t > 2 * truly_best][:2]
    assert len(slow) == 2
    lucky = _LuckyRunner(slow, truly_best / 2)
    mod, db = _tune(str(tmp_path / "off"), lucky, rounds=0)
    assert _true_latency(mod, db.query_tuning_record(mod)) in lucky.lucky  # fooled
    assert len(db.get_all_tuning_records()) == 24

    lucky = _LuckyRunner(slow, truly_best / 2)
    with _confirm_log() as log:
        mod, db = _tune(str(tmp_path / "on"), lucky, rounds=3)
    best = db.query_tuning_record(mod)
    assert _true_latency(mod, best) == truly_best
    assert measurements(best) == 3 and best.mean_run_secs == pytest.approx(truly_best)
    extra = db.get_all_tuning_records()[24:]
    assert extra and len(extra) <= 2 * 3 * 3  # the default budget: 2 * rounds * top_k
    (res,) = [r.confirm for r in log if hasattr(r, "confirm")]
    assert res.changed and res.trials == len(extra)
    assert res.best_after == pytest.approx(truly_best)
    assert res.best_before == pytest.approx(truly_best / 2)
    assert res.summary().startswith("confirmation of 'main': best ")
    # the re-measurements are not trials: the table and a resumed run count 24 schedules
    (table, *_) = [r.getMessage() for r in reversed(log) if "Total trials" in r.getMessage()]
    assert f"Total trials: 24 + {len(extra)} re-measurements" in table
    first = db.get_all_tuning_records()[:24]
    assert trials_done(db, [mod]) == [len({trace_key(r) for r in first})]
    # the leaders were measured again: every record of the lucky ones is in the database
    for r in db.get_top_k(db.commit_workload(mod), 3):
        assert measurements(r) == 3


def test_confirmation_off_and_stopped_add_nothing(tmp_path):
    stop = _Stop()
    stop.stop_requested = True
    _, db = _tune(str(tmp_path), _LuckyRunner(), rounds=3, callbacks=[stop])
    assert len(db.get_all_tuning_records()) == 24


@derived_object
class _FailingAfter(PyRunner):
    """Reports synthetic latencies for the first ``n`` runs, then only failures."""

    def __init__(self, n):
        self.n, self.count = n, 0

    def run(self, runner_inputs):
        out = []
        for r in runner_inputs:
            self.count += 1
            res = RunnerResult([float(r.artifact_path[len(_PREFIX):])], None) \
                if self.count <= self.n else RunnerResult(None, "LocalRunner: injected")
            out.append(RunnerFuture(lambda: True, lambda res=res: res))
        return out


def test_confirmation_stops_when_nothing_can_be_re_measured(tmp_path):
    _, db = _tune(str(tmp_path), _FailingAfter(24), rounds=3)
    extra = db.get_all_tuning_records()[24:]
    assert len(extra) == 3 and not any(r.is_valid() for r in extra)   # one batch, not 18


def test_confirm_best_checks_its_arguments():
    sched = ms.TaskScheduler.create("round-robin")
    with pytest.raises(ValueError, match="rounds"):
        confirm_best(sched, rounds=-1)
    with pytest.raises(ValueError, match="top_k"):
        confirm_best(sched, rounds=2, top_k=0)
    with pytest.raises(ValueError, match="ms_confirm_rounds"):
        options.set("ms_confirm_rounds", -2)


@pytest.mark.slow
def test_confirmation_in_a_real_run(tmp_path, monkeypatch):
    from workbench.meta_schedule.database import TuningRecord

    replays = []
    real = TuningRecord.as_measure_candidate
    monkeypatch.setattr(TuningRecord, "as_measure_candidate",
                        lambda self: replays.append(self) or real(self))
    func = matmul(64)
    with options.override(ms_confirm_rounds=2, ms_confirm_top_k=2):
        db = ms.tune_tir(func, TARGET, str(tmp_path), max_trials_global=6,
                         num_trials_per_iter=6, strategy="replay-trace", runner=fast_runner(),
                         cost_model="random", seed=5)
    records = db.records_in_commit_order()
    assert 6 < len(records) <= 6 + 8
    best = db.query_tuning_record(ms.tir_integration.task_module(func))
    assert measurements(best) == 2
    assert sum(trace_key(r) == trace_key(best) for r in records) == 2
    assert replays == []   # the leaders measured in this run were kept, not replayed
    sch = ms.compile_tir(db, func, TARGET)
    args = random_args(func)
    np.testing.assert_allclose(run(sch.mod, args)[-1], args[0] @ args[1], rtol=1e-4,
                               atol=1e-5)


class _confirm_log:
    """The records of the tuner's logger that carry a ConfirmResult."""

    def __enter__(self):
        self.got: list[logging.LogRecord] = []
        self.handler = logging.Handler()
        self.handler.emit = self.got.append
        self.logger = logging.getLogger("workbench.meta_schedule")
        self.old = self.logger.level
        self.logger.addHandler(self.handler)
        self.logger.setLevel(logging.INFO)
        return self.got

    def __exit__(self, *exc):
        self.logger.removeHandler(self.handler)
        self.logger.setLevel(self.old)


def test_confirmation_goes_to_the_heaviest_tasks_within_its_share():
    """Three tasks of different weighted latency, 40 search measurements: with a share of 0.25
    (10 re-measurements; each task needs 4: two leaders measured twice more) the heaviest
    task is confirmed first, then the next, and the lightest gets what is left (2)."""
    import types
    from workbench.meta_schedule.database import MemoryDatabase, TuningRecord

    db = MemoryDatabase()
    tasks = []
    for n, (weight, secs) in enumerate([(1, 1e-6), (4, 1e-3), (2, 1e-4)]):
        mod = matmul(8 + 8 * n)
        workload = db.commit_workload(mod)
        for k in range(2):   # two leaders, each measured once
            sch = Schedule(mod)
            sch.get_block("C")
            if k:
                sch.get_loops(sch.get_block("C"))
            db.commit_tuning_record(TuningRecord(sch.trace, workload, [secs * (1 + k)], TARGET))
        ctx = types.SimpleNamespace(mod=mod, task_name=f"t{n}", logger=logging.getLogger("t"))
        tasks.append(types.SimpleNamespace(ctx=ctx, task_weight=weight,
                                           best_latency_ms=secs * 1e3,
                                           trials=40 // 3 + (n == 0)))
    measured: list[int] = []

    def measure_batch(task_id, candidates, callbacks, remeasure=False):
        assert remeasure
        for c in candidates:
            measured.append(task_id)
            db.commit_tuning_record(TuningRecord(
                c.sch.trace, db.commit_workload(tasks[task_id].ctx.mod),
                [tasks[task_id].best_latency_ms * 1e-3], TARGET))

    sched = types.SimpleNamespace(tasks_=tasks, database_=db, measure_callbacks_=[],
                                  measure_batch=measure_batch)
    results = confirm_best(sched, rounds=3, top_k=2, max_trials=4, share=0.25)
    assert [r.task_name for r in results] == ["t1", "t2", "t0"]
    assert measured == [1] * 4 + [2] * 4 + [0] * 2
    measured.clear()
    assert confirm_best(sched, rounds=4, top_k=2, max_trials=4, share=0.0)
    # no share: one task's worth (4) in all, heaviest first (each leader needs one more now)
    assert measured == [1] * 2 + [2] * 2
    with pytest.raises(ValueError, match="share"):
        confirm_best(sched, share=-1)
    # a task its rival implementation outruns (task_scheduler.rivals) is not confirmed: the
    # heaviest here, t1, is the one the build will not call
    measured.clear()
    sched.task_outrun = lambda task_id: task_id == 1
    results = confirm_best(sched, rounds=5, top_k=2, max_trials=4, share=0.25)
    assert [r.task_name for r in results] == ["t2", "t0"] and 1 not in measured


def test_measured_schedules_keep_the_fastest_by_trace_identity():
    """A task keeps its fastest measured schedules; a record's trace object finds its
    schedule, an equal trace that is another object (a record read from a file) does not."""
    from workbench.meta_schedule.measured_schedules import MeasuredSchedules

    ctx = ms.TuneContext(matmul(16), target=TARGET, space_generator="post-order-apply",
                         search_strategy="replay-trace", rand_state=1)
    schs = [Schedule(ctx.mod, seed=i) for i in range(4)]
    kept = MeasuredSchedules(capacity=2)
    for sch, secs in zip(schs, (3.0, 1.0, 2.0, 5.0)):
        kept.put(sch, secs)
    assert len(kept) == 2
    assert kept.get(schs[1].trace) is schs[1] and kept.get(schs[2].trace) is schs[2]
    assert kept.get(schs[0].trace) is None and kept.get(schs[3].trace) is None
    from workbench.tir.schedule import Trace
    assert kept.get(Trace.from_json(schs[1].trace.as_json(), ctx.mod)) is None
