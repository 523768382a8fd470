"""Replaying candidate traces in worker processes (TVM's ThreadedTraceApply, as processes):
same schedules as in-process replays, usable handles, failure counts, and recovery from
workers that die."""
from __future__ import annotations

import itertools
import os
import signal
import threading
import time
import types

import pytest
from ms_tuning_workloads import matmul_relu

from workbench.ir.structural import structural_equal
from workbench.meta_schedule.search_strategy import base as strategy_base
from workbench.meta_schedule.search_strategy import replay_pool
from workbench.meta_schedule.search_strategy.base import TraceApplier
from workbench.meta_schedule.search_strategy.replay_pool import ReplayPool
from workbench.meta_schedule.tune_context import TuneContext
from workbench.tir.schedule import Schedule

TARGET = "llvm -num-cores=2"


@pytest.fixture(scope="module")
def setup():
    ctx = TuneContext(matmul_relu(32), target=TARGET, space_generator="post-order-apply",
                      search_strategy="evolutionary", rand_state=3)
    spaces = ctx.generate_design_space()
    traces = [s.trace.simplified(remove_postproc=True) for s in spaces]
    pool = ReplayPool(2)
    yield ctx, traces, pool
    pool.shutdown()


def _force_pool(monkeypatch):
    """Every batch goes to the pool, whether its workers are up or not."""
    monkeypatch.setattr(strategy_base, "_POOL_WORTH_SECONDS", 0.0)
    monkeypatch.setattr(strategy_base, "_POOL_WORTH_READY", 0.0)


def _jobs(traces, n=24, keep=False):
    return [(traces[i % len(traces)], 1000 + i, keep) for i in range(n)]


def _same(a: Schedule | None, b: Schedule | None) -> bool:
    if a is None or b is None:
        return a is b
    return structural_equal(a.mod, b.mod) and str(a.trace) == str(b.trace)


def test_pool_replays_match_in_process(setup, monkeypatch):
    ctx, traces, pool = setup
    _force_pool(monkeypatch)
    jobs = _jobs(traces)
    here = TraceApplier(ctx.mod, ctx.space_generator.postprocs)
    there = TraceApplier(ctx.mod, ctx.space_generator.postprocs, pool)
    expected = here.apply_many(jobs)
    got = there.apply_many(jobs)
    assert pool.worker_pids, "the batch should have gone to the pool"
    assert len(got) == len(jobs)
    assert all(_same(a, b) for a, b in zip(expected, got))
    assert here.summary() == there.summary()
    # a restored schedule is a full schedule: handles resolve and its trace replays
    sch = next(s for s in got[strategy_base._TIMING_SAMPLE:] if s is not None)
    block = sch.get_sblock("D")
    assert sch.get_loops(block)
    again = Schedule(ctx.mod)
    sch.trace.apply_to_schedule(again, remove_postproc=False)
    assert structural_equal(again.mod, sch.mod)
    # and it keeps scheduling
    sch.annotate(block, "note", 1)
    assert sch.get(block).annotations["note"] == 1


def test_pool_counts_failures_like_in_process(setup, monkeypatch):
    ctx, traces, pool = setup
    _force_pool(monkeypatch)

    procs = list(ctx.space_generator.postprocs) + [RefuseAll()]
    here = TraceApplier(ctx.mod, procs)
    there = TraceApplier(ctx.mod, procs, pool)
    jobs = _jobs(traces, n=20)
    assert here.apply_many(jobs) == [None] * 20
    assert there.apply_many(jobs) == [None] * 20
    assert there.postproc_failures[-1] == 20
    assert here.summary() == there.summary()


def test_dead_workers_fall_back_and_the_pool_restarts(setup, monkeypatch):
    ctx, traces, pool = setup
    _force_pool(monkeypatch)
    here = TraceApplier(ctx.mod, ctx.space_generator.postprocs)
    jobs = _jobs(traces, n=20, keep=False)
    expected = here.apply_many(jobs)
    there = TraceApplier(ctx.mod, ctx.space_generator.postprocs, pool)
    there.apply_many(jobs)  # starts the workers
    victims = pool.worker_pids
    assert victims
    # A worker dying in the middle of a chunk: that chunk is replayed here, nothing is lost.
    monkeypatch.setattr(replay_pool, "_worker_replay", _replay_dies_on_first_chunk)
    again = TraceApplier(ctx.mod, ctx.space_generator.postprocs, pool)
    got = again.apply_many(jobs)
    assert all(_same(a, b) for a, b in zip(expected, got))
    monkeypatch.undo()
    _force_pool(monkeypatch)
    # Workers killed while idle are replaced before they get work.
    for pid in pool.worker_pids:
        os.kill(pid, signal.SIGKILL)
    third = TraceApplier(ctx.mod, ctx.space_generator.postprocs, pool)
    got = third.apply_many(jobs)
    assert pool.worker_pids and not set(pool.worker_pids) & set(victims)
    assert all(_same(a, b) for a, b in zip(expected, got))
    assert pool.disabled is None


def test_light_batches_stay_in_process(setup, monkeypatch):
    ctx, traces, pool = setup
    # The decision, not this machine's speed: every replay is timed at 1 ms (a small
    # matmul's take a few ms; a full run on a loaded host once timed its first ones slow
    # enough to start the workers, which is right for replays that slow).
    ticks = itertools.count()
    monkeypatch.setattr(strategy_base, "time",
                        types.SimpleNamespace(perf_counter=lambda: next(ticks) * 0.001))
    fresh = ReplayPool(2)
    applier = TraceApplier(ctx.mod, ctx.space_generator.postprocs, fresh)
    applier.apply_many(_jobs(traces, n=12))  # a small matmul replays in milliseconds
    assert fresh.worker_pids == []


def test_a_heavy_batch_starts_the_workers_for_the_next(setup, monkeypatch):
    """A batch too light to wait for the workers' start-up, but heavy enough
    (_PRESTART_SECONDS), is replayed here while the workers start in the background; once
    they are up, smaller batches (from _POOL_WORTH_READY) go to them."""
    ctx, traces, _ = setup
    monkeypatch.setattr(strategy_base, "_PRESTART_SECONDS", 0.0)
    fresh = ReplayPool(2)
    shipped = []
    real = ReplayPool.replay

    def counting(self, applier, jobs):
        shipped.append(len(jobs))
        return real(self, applier, jobs)

    monkeypatch.setattr(ReplayPool, "replay", counting)
    # The workers' start-up outlasts the first batch, whatever the machine's load: their
    # readiness is held back until it is replayed. (Unheld, a loaded machine's slow replays
    # let workers that came up first take the batch's last 4 jobs: correct, and what this
    # step does not test.)
    holding = [True]
    up = ReplayPool.ready
    monkeypatch.setattr(ReplayPool, "ready", property(lambda self: not holding[0] and up.fget(self)))
    try:
        first = TraceApplier(ctx.mod, ctx.space_generator.postprocs, fresh)
        expected = first.apply_many(_jobs(traces, n=12))
        assert shipped == [] and len(fresh.worker_pids) == 2    # replayed here; starting
        holding[0] = False
        deadline = time.monotonic() + 60
        while not fresh.ready and time.monotonic() < deadline:   # up without a job
            time.sleep(0.05)
        assert fresh.ready
        monkeypatch.setattr(strategy_base, "_POOL_WORTH_READY", 0.0)
        second = TraceApplier(ctx.mod, ctx.space_generator.postprocs, fresh,
                              timing=first.timing)              # a strategy's next applier
        got = second.apply_many(_jobs(traces, n=12))
        assert shipped == [12]                                  # no new timing sample here
        assert all(_same(a, b) for a, b in zip(expected, got))
    finally:
        fresh.shutdown()


def test_appliers_of_a_strategy_share_one_timing_sample(setup):
    """Only a search's first _TIMING_SAMPLE replays are timed in this process, not each new
    applier's (a round makes several)."""
    ctx, traces, _ = setup
    strategy = ctx.search_strategy
    strategy.pre_tuning(8, 4, ctx.generate_design_space())
    try:
        a, b = strategy._applier(), strategy._applier()
        assert a.timing is b.timing is strategy.replay_timing
        a.apply_many(_jobs(traces, n=strategy_base._TIMING_SAMPLE + 2))
        assert strategy.replay_timing.count == strategy_base._TIMING_SAMPLE
        b.apply_many(_jobs(traces, n=4))
        assert strategy.replay_timing.count == strategy_base._TIMING_SAMPLE
    finally:
        strategy.post_tuning()
    strategy.pre_tuning(8, 4, ctx.generate_design_space())   # a new run times again
    assert strategy.replay_timing.count == 0
    strategy.post_tuning()


def _replay_dies_on_first_chunk(key, setup, jobs):
    """A replay job whose worker dies on the batch's first chunk (seed 1000, see _jobs)."""
    if jobs[0][1] == 1000:
        os._exit(3)
    return replay_pool._worker_replay(key, setup, jobs)


class RefuseAll:
    """A postproc that rejects every schedule."""

    def apply(self, sch) -> bool:
        return False

    def __repr__(self) -> str:
        return "RefuseAll"


def test_workloads_workers_cannot_take_replay_in_process(setup, monkeypatch):
    ctx, traces, pool = setup
    _force_pool(monkeypatch)
    jobs = _jobs(traces, n=16)
    expected = TraceApplier(ctx.mod, ctx.space_generator.postprocs).apply_many(jobs)
    # a postproc that cannot be pickled at all (holds a lock)
    unpicklable = PassThrough(threading.Lock())
    procs = list(ctx.space_generator.postprocs) + [unpicklable]
    got = TraceApplier(ctx.mod, procs, pool).apply_many(jobs)
    assert all(_same(a, b) for a, b in zip(expected, got))
    # a postproc class the workers cannot import (as if defined in a notebook's __main__)
    procs = list(ctx.space_generator.postprocs) + [_main_only_class()()]
    applier = TraceApplier(ctx.mod, procs, pool)
    got = applier.apply_many(jobs)
    assert all(_same(a, b) for a, b in zip(expected, got))
    assert applier.shipping_form()[0] in pool._unshippable


class PassThrough:
    def __init__(self, lock) -> None:
        self.lock = lock

    def apply(self, sch) -> bool:
        with self.lock:
            return True


def _main_only_class():
    """A postproc class importable here but not in the workers (as one defined in a
    notebook's ``__main__`` is): its module exists only in this process's sys.modules."""
    import sys
    import types
    mod = types.ModuleType("replay_pool_test_main_only")

    class NotImportable:
        def apply(self, sch) -> bool:
            return True

    NotImportable.__module__ = mod.__name__
    NotImportable.__qualname__ = "NotImportable"
    mod.NotImportable = NotImportable
    sys.modules[mod.__name__] = mod
    return NotImportable


def test_pool_ships_the_feature_rows_of_what_it_replays(setup, monkeypatch):
    """With ``features`` set, the workers compute the per-store rows of each schedule they
    replay and the tuning process adopts them: equal to its own extraction, and scoring
    them then needs no lowering here."""
    import numpy as np

    from workbench.meta_schedule.feature_extractor import PerStoreFeature
    from workbench.meta_schedule.feature_extractor.per_store import extractor as per_store
    from workbench.meta_schedule.feature_extractor.per_store import preprocess
    from workbench.meta_schedule.search_strategy import MeasureCandidate

    ctx, traces, pool = setup
    _force_pool(monkeypatch)
    monkeypatch.setattr(per_store, "_FEATURES", preprocess._LRU(8192))  # start empty
    fx = PerStoreFeature()
    there = TraceApplier(ctx.mod, ctx.space_generator.postprocs, pool)
    there.features = fx.shipping_config(ctx)
    jobs = _jobs(traces, n=24, keep=False)
    got = there.apply_many(jobs)
    shipped = [s for s in got[strategy_base._TIMING_SAMPLE:] if s is not None]
    assert shipped and len(per_store._FEATURES.data) == len(shipped)
    lowered = []
    monkeypatch.setattr(per_store, "lower_for_features",
                        lambda mod, key=None: lowered.append(key) or preprocess.lower_for_features(
                            mod, key=key))
    cands = [MeasureCandidate(s, []) for s in shipped]
    rows = fx.extract_from(ctx, cands)
    assert lowered == []  # every row came from a worker
    monkeypatch.setattr(per_store, "_FEATURES", preprocess._LRU(8192))
    again = fx.extract_from(ctx, cands)  # this process's own extraction
    assert len(lowered) == len(shipped)
    for a, b in zip(rows, again):
        np.testing.assert_array_equal(a, b)


def test_features_of_schedules_replayed_here_can_be_computed_in_the_pool(setup, monkeypatch):
    import numpy as np

    from workbench.meta_schedule.feature_extractor import PerStoreFeature
    from workbench.meta_schedule.feature_extractor.per_store import extractor as per_store
    from workbench.meta_schedule.feature_extractor.per_store import preprocess
    from workbench.meta_schedule.search_strategy import MeasureCandidate

    ctx, traces, pool = setup
    _force_pool(monkeypatch)
    TraceApplier(ctx.mod, ctx.space_generator.postprocs, pool).apply_many(_jobs(traces, 12))
    assert pool.worker_pids  # started by the heavy batch above
    here = TraceApplier(ctx.mod, ctx.space_generator.postprocs)
    schs = [s for s in here.apply_many(_jobs(traces, 10)) if s is not None]
    fx = PerStoreFeature()
    config = fx.shipping_config(ctx)
    monkeypatch.setattr(per_store, "_FEATURES", preprocess._LRU(8192))
    mods = [s.mod for s in schs]
    assert per_store.uncached(mods, config) == list(range(len(mods)))
    assert replay_pool.extract_features_ahead(pool, config, mods) == len(mods)
    assert per_store.uncached(mods, config) == []
    cands = [MeasureCandidate(s, []) for s in schs]
    shipped = fx.extract_from(ctx, cands)
    monkeypatch.setattr(per_store, "_FEATURES", preprocess._LRU(8192))
    for a, b in zip(shipped, fx.extract_from(ctx, cands)):
        np.testing.assert_array_equal(a, b)
    # a pool that never started is not started for features
    idle = ReplayPool(2)
    assert replay_pool.extract_features_ahead(idle, config, mods) == 0
    assert idle.worker_pids == []


def test_a_replayed_schedule_comes_back_with_its_structural_hash(setup, monkeypatch):
    """Workers hash what they replay and the memo travels in the module's pickle: the search
    deduplicates and looks up features of every candidate without hashing it here."""
    from workbench.ir.module import IRModule
    from workbench.ir.structural import structural_hash

    ctx, traces, pool = setup
    _force_pool(monkeypatch)
    got = TraceApplier(ctx.mod, ctx.space_generator.postprocs, pool).apply_many(
        _jobs(traces, 12))
    shipped = [s for s in got[strategy_base._TIMING_SAMPLE:] if s is not None]
    assert shipped and pool.worker_pids
    for sch in shipped:
        memo = sch.mod._shash.get(False)
        assert memo is not None
        assert memo == structural_hash(IRModule(dict(sch.mod.items())))  # hashed afresh


class _StartingPool:
    """A stand-in for a ReplayPool whose workers come up once ``up_after`` replays were
    timed in the tuning process (after a prestart)."""

    def __init__(self, timing, up_after: int) -> None:
        self.timing, self.up_after = timing, up_after
        self.prestarts, self.shipped = 0, []

    @property
    def ready(self) -> bool:
        return self.prestarts > 0 and self.timing.count >= self.up_after

    @property
    def starting(self) -> bool:
        return self.prestarts > 0 and not self.ready

    def prestart(self) -> None:
        self.prestarts += 1

    def replay(self, applier, jobs):
        self.shipped.append(len(jobs))
        return [applier.apply(t, s, keep_decisions=k) for t, s, k in jobs]


@pytest.mark.parametrize("heavy", [True, False])
def test_a_batch_replays_here_until_the_workers_are_up_then_ships_the_rest(
        setup, monkeypatch, heavy):
    """A batch worth starting workers for starts them and keeps replaying here, one by one,
    until they are up; what is left then goes to them. A light one never starts them."""
    ctx, traces, _ = setup
    monkeypatch.setattr(strategy_base, "_PRESTART_SECONDS", 0.0 if heavy else 1e9)
    monkeypatch.setattr(strategy_base, "_POOL_WORTH_SECONDS", 1e9)  # never waits for them
    monkeypatch.setattr(strategy_base, "_POOL_WORTH_READY", 0.0)
    applier = TraceApplier(ctx.mod, ctx.space_generator.postprocs)
    stub = _StartingPool(applier.timing, up_after=strategy_base._TIMING_SAMPLE + 3)
    applier.pool = stub
    jobs = _jobs(traces, 24)
    got = applier.apply_many(jobs)
    expected = TraceApplier(ctx.mod, ctx.space_generator.postprocs).apply_many(jobs)
    assert all(_same(a, b) for a, b in zip(expected, got))
    if heavy:
        assert stub.prestarts >= 1 and stub.shipped == [24 - stub.up_after]
        assert applier.timing.count == stub.up_after
    else:
        assert stub.prestarts == 0 and stub.shipped == []
        assert applier.timing.count == strategy_base._TIMING_SAMPLE


def test_prepare_starts_the_workers_for_a_heavy_next_round_only(setup, monkeypatch):
    ctx, traces, _ = setup
    applier = TraceApplier(ctx.mod, ctx.space_generator.postprocs)
    stub = _StartingPool(applier.timing, up_after=10 ** 6)
    applier.pool = stub
    applier.prepare(10 ** 6)
    assert stub.prestarts == 0            # nothing timed yet: no estimate
    monkeypatch.setattr(strategy_base, "_PRESTART_SECONDS", 1e9)
    applier.apply_many(_jobs(traces, 4))
    assert applier.timing.count == 4 and stub.prestarts == 0
    per = applier.timing.seconds / applier.timing.count
    monkeypatch.setattr(strategy_base, "_PRESTART_SECONDS", per * 50)
    applier.prepare(10)
    assert stub.prestarts == 0            # ten replays here take less than that
    applier.prepare(100)
    assert stub.prestarts == 1
