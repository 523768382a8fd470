"""Search strategies: lifecycle errors, ReplayTrace/ReplayFunc/EvolutionarySearch behaviour
(budget, postprocessing, deduplication, skipping measured modules, no-mutator degeneration)."""
from __future__ import annotations

import numpy as np
import pytest
from ms_tuning_workloads import LLVM_SPACE_TARGET, matmul

from workbench.ir.structural import structural_hash
from workbench.meta_schedule.cost_model import PyCostModel, RandomModel
from workbench.meta_schedule.profiler import Profiler
from workbench.meta_schedule.database import MemoryDatabase, TuningRecord
from workbench.meta_schedule.runner import RunnerResult
from workbench.meta_schedule.search_strategy import (
    EvolutionarySearch, MeasureCandidate, ReplayFunc, ReplayTrace, SearchStrategy,
)
from workbench.meta_schedule.search_strategy.evolutionary_search import FIRST_EVOLVED_BOOST
from workbench.meta_schedule.space_generator import ScheduleFn
from workbench.meta_schedule.tune_context import TuneContext

TARGET = LLVM_SPACE_TARGET


def _ctx(strategy, space="post-order-apply", n=32, seed=11):
    return TuneContext(matmul(n), target=TARGET, space_generator=space,
                       search_strategy=strategy, rand_state=seed)


def _ok(cands):
    return [RunnerResult([1e-3], None) for _ in cands]


def _tile_fn(sch):
    """A tiny space: 2-way split of i; perfect tiles of 8 give 4 distinct schedules."""
    b = sch.get_block("C")
    i, _, _ = sch.get_loops(b)
    sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=8))


@pytest.mark.parametrize("strategy", [ReplayTrace(), ReplayFunc(), EvolutionarySearch()])
def test_lifecycle_errors(strategy):
    with pytest.raises(RuntimeError, match="not initialized"):
        strategy.pre_tuning(4, 2, [])
    ctx = _ctx(strategy.clone())
    s = ctx.search_strategy
    with pytest.raises(RuntimeError, match="pre_tuning has not been called"):
        s.generate_measure_candidates()
    with pytest.raises(RuntimeError, match="pre_tuning has not been called"):
        s.notify_runner_results([], [])
    with pytest.raises(RuntimeError, match="pre_tuning has not been called"):
        s.post_tuning()
    spaces = ctx.generate_design_space()
    with pytest.raises(ValueError, match="design_spaces is empty"):
        s.pre_tuning(4, 2, [])
    s.pre_tuning(4, 2, spaces)
    with pytest.raises(RuntimeError, match="already tuning"):
        s.pre_tuning(4, 2, spaces)
    s.post_tuning()
    with pytest.raises(RuntimeError, match="pre_tuning has not been called"):
        s.generate_measure_candidates()


def test_context_forwarding_errors():
    ctx = TuneContext(matmul(16), target=TARGET)
    with pytest.raises(ValueError, match="no space_generator"):
        ctx.generate_design_space()
    with pytest.raises(ValueError, match="no search_strategy"):
        ctx.generate_measure_candidates()


def test_replay_trace_budget_and_postprocessing():
    ctx = _ctx("replay-trace")
    ctx.pre_tuning(max_trials=5, num_trials_per_iter=2)
    sizes = []
    while (cands := ctx.generate_measure_candidates()) is not None:
        sizes.append(len(cands))
        for c in cands:
            assert isinstance(c, MeasureCandidate)
            kinds = [i.kind.name for i in c.sch.trace.insts]
            assert "EnterPostproc" in kinds and "DecomposeReduction" in kinds
            assert [a.shape for a in c.args_info] == [(32, 32)] * 3
        ctx.notify_runner_results(cands, _ok(cands))
    assert sizes == [2, 2, 1]
    ctx.post_tuning()


def test_replay_func_resamples_the_space():
    ctx = _ctx("replay-func", space=_tile_fn)
    ctx.pre_tuning(max_trials=8, num_trials_per_iter=8)
    cands = ctx.generate_measure_candidates()
    assert len(cands) == 8
    decisions = {tuple(d) for c in cands for i, d in c.sch.trace.decisions.items()
                 if i.kind.name == "SamplePerfectTile"}
    assert len(decisions) > 1 and all(a * b == 32 for a, b in decisions)


def test_evolutionary_dedups_and_skips_measured():
    strategy = EvolutionarySearch(population_size=16, init_min_unmeasured=4,
                                  genetic_num_iters=2)
    ctx = _ctx(strategy, space=ScheduleFn(_tile_fn, sch_rules=[], mutator_probs={}), n=8)
    db = MemoryDatabase()
    ctx.pre_tuning(max_trials=20, num_trials_per_iter=3, database=db,
                   cost_model=RandomModel(seed=0))
    seen = []
    rounds = 0
    while (cands := ctx.generate_measure_candidates()) is not None:
        rounds += 1
        for c in cands:
            seen.append(structural_hash(c.sch.mod))
            db.commit_tuning_record(TuningRecord(c.sch.trace, db.commit_workload(ctx.mod),
                                                 [1e-3], None, c.args_info))
        ctx.notify_runner_results(cands, _ok(cands))
        assert rounds < 20
    # perfect 2-tilings of 8 with the inner factor <= 8: 4 distinct modules, each measured
    # once; then 5 empty rounds end the search (no mutators: plain scored sampling).
    assert len(seen) == len(set(seen)) == 4
    ctx.post_tuning()


class _HashModel(PyCostModel):
    """An informed model that scores a schedule by its module's hash (deterministic), and
    counts the candidates it scored."""

    def __init__(self) -> None:
        self.scored = 0

    def update(self, context, candidates, results):
        pass

    def predict(self, context, candidates):
        self.scored += len(candidates)
        return np.array([structural_hash(c.sch.mod) % 1000 / 1000 for c in candidates])


def test_evolutionary_with_mutators_finds_new_modules():
    strategy = EvolutionarySearch(population_size=12, init_min_unmeasured=3,
                                  genetic_num_iters=3, genetic_mutate_prob=1.0,
                                  first_batch_share=1.0)  # the whole first window evolved
    ctx = _ctx(strategy, n=64)
    model = _HashModel()
    with Profiler() as prof:
        ctx.pre_tuning(max_trials=6, num_trials_per_iter=6, cost_model=model)
        cands = ctx.generate_measure_candidates()
    hashes = [structural_hash(c.sch.mod) for c in cands]
    assert len(cands) == 6 and len(set(hashes)) == 6
    # an informed model: the population evolved and was scored every generation
    assert model.scored >= 12 and prof.stats_sec.get("EvoSearch/Evolve/Mutation", 0) > 0


def test_evolutionary_samples_at_random_while_the_model_is_not_informed():
    """Before the cost model can rank (RandomModel; XGB before its warm-up samples) a round
    measures random samples: no population, no generations, no predictions."""
    class Counting(RandomModel):
        scored = 0

        def predict(self, context, candidates):
            Counting.scored += len(candidates)
            return super().predict(context, candidates)

    strategy = EvolutionarySearch(population_size=64, genetic_num_iters=4,
                                  genetic_mutate_prob=1.0)
    ctx = _ctx(strategy, n=64)
    model = Counting(seed=0)
    assert not model.informed() and _HashModel().informed()
    with Profiler() as prof:
        ctx.pre_tuning(max_trials=8, num_trials_per_iter=4, cost_model=model)
        cands = ctx.generate_measure_candidates()
    assert len(cands) == 4 and len({structural_hash(c.sch.mod) for c in cands}) == 4
    assert Counting.scored == 0 and "EvoSearch/Evolve/Mutation" not in prof.stats_sec
    from workbench.meta_schedule.cost_model import XGBModel
    xgb = XGBModel(num_warmup_samples=100)
    assert not xgb.informed()


def test_a_resumed_search_warms_the_cost_model_with_the_database():
    class Learning(RandomModel):
        learnt = 0

        def update(self, context, candidates, results):
            Learning.learnt += len(candidates)
            assert all(r.run_secs for r in results)

    db = MemoryDatabase()
    first = _ctx(EvolutionarySearch(population_size=16, init_min_unmeasured=2), n=64)
    first.pre_tuning(max_trials=4, num_trials_per_iter=4, database=db,
                     cost_model=RandomModel(seed=0))
    for c in first.generate_measure_candidates():
        db.commit_tuning_record(TuningRecord(c.sch.trace, db.commit_workload(first.mod),
                                             [1e-3], None, c.args_info))
    first.post_tuning()
    again = _ctx(EvolutionarySearch(population_size=16, init_min_unmeasured=2), n=64)
    again.pre_tuning(max_trials=4, num_trials_per_iter=4, database=db, cost_model=Learning())
    assert Learning.learnt == 4


def test_evolutionary_fails_without_enough_samples():
    def broken(sch):
        sch.get_block("C")

    class Reject:
        def _initialize_with_tune_context(self, ctx):
            pass

        def apply(self, sch):
            return False

    strategy = EvolutionarySearch(population_size=8, init_min_unmeasured=2, max_fail_count=2)
    ctx = _ctx(strategy, space=ScheduleFn(broken, sch_rules=[], postprocs=[Reject()],
                                           mutator_probs={}))
    ctx.pre_tuning(max_trials=4, num_trials_per_iter=2)
    assert ctx.generate_measure_candidates() is None


def test_create_and_clone():
    assert isinstance(SearchStrategy.create(), EvolutionarySearch)
    assert isinstance(SearchStrategy.create("replay-trace", max_fail_count=3), ReplayTrace)
    with pytest.raises(ValueError, match="replay-func"):
        SearchStrategy.create("beam")
    evo = EvolutionarySearch(population_size=7)
    copy = evo.clone()
    assert copy is not evo and copy.population_size == 7 and copy.max_fail_count == 5
    with pytest.raises(TypeError):
        MeasureCandidate("not a schedule", [])


def test_an_informed_round_sizes_its_population_by_the_replay_time():
    """seconds_per_candidate bounds the replays of a round: 0 leaves the least population
    (twice the batch, no generations), None TVM's fixed population and generations."""
    def run(seconds):
        strategy = EvolutionarySearch(population_size=24, init_min_unmeasured=4,
                                      genetic_num_iters=2, genetic_mutate_prob=1.0,
                                      seconds_per_candidate=seconds)
        ctx = _ctx(strategy, n=64)
        model = _HashModel()
        with Profiler() as prof:
            ctx.pre_tuning(max_trials=8, num_trials_per_iter=4, cost_model=model)
            strategy._replay_wall = 0.05   # as if measured on earlier replays
            cands = ctx.generate_measure_candidates()
        assert len(cands) == 4
        return model.scored, prof.stats_sec

    scored, stats = run(0.0)    # the batch as population, one generation: 4 + 4 scored
    assert scored == 8 and stats["EvoSearch/Evolve/Mutation"] > 0

    scored, stats = run(None)
    assert scored > 24 and stats["EvoSearch/Evolve/Mutation"] > 0
    strategy = EvolutionarySearch(population_size=512, seconds_per_candidate=0.15)
    strategy._replay_wall = 0.025                # a matmul: 0.15 * 64 / 0.025 = 384 replays
    assert strategy._plan(64) == (128, 2)        # 128 * (2 + 1) <= 384
    strategy._replay_wall = 0.005
    assert strategy._plan(64) == (384, 4)        # 1920 replays: 384 x 5
    strategy._replay_wall = 1.0                  # a Winograd conv: 9.6 replays; at least
    assert strategy._plan(64) == (64, 1) and strategy._plan(8) == (8, 1)   # one generation
    # the round after a quick first batch: FIRST_EVOLVED_BOOST times the budget
    strategy._replay_wall = 0.025
    assert strategy._round_seconds(64, 4.0) == pytest.approx(4.0 * strategy._round_seconds(64))
    assert strategy._plan(8, 4.0) == (38, 4)    # 192 replays, not 48: (16, 2)
    assert strategy._plan(8) == (16, 2)
    # boosted as far as 128 replays need (1.2 s: 48 replays), at most FIRST_EVOLVED_BOOST;
    # a round of 64 candidates has them already (384 replays)
    assert strategy._first_evolved_boost(8) == pytest.approx(128 / 48)
    strategy._replay_wall = 1.0
    assert strategy._first_evolved_boost(8) == FIRST_EVOLVED_BOOST
    strategy._replay_wall = 0.025
    assert strategy._first_evolved_boost(64) == 1.0
    # that round spends its replays on breadth: half of them (at most 128) as the population,
    # one generation -- where the plan of later rounds breeds generations from fewer samples
    strategy._replay_wall = 0.094                # a ResNet-50 3x3 convolution, in process
    assert strategy._plan(9, 4.0) == (18, 2)                           # 57 replays
    assert strategy._wide_plan(9, 4.0) == (28, 1)
    assert strategy._wide_plan(9, FIRST_EVOLVED_BOOST) == (64, 1)      # 229: at most 128
    strategy._replay_wall = 1.0                  # a Winograd conv: the batch, at least
    assert strategy._wide_plan(9, 4.0) == (9, 1)
    # a round of 64 within its budget (a 512^3 matmul: 3.1 s, 19 ms a replay): 64 x 2 replays,
    # not a floor of twice the batch (256 replays, ~5 s)
    strategy._replay_wall, strategy._measure_wall = 0.019, 0.33
    assert strategy._wide_plan(64, 1.0) == (64, 1)
    strategy._replay_wall = 0.025
    # once a candidate's measurement is timed, the search_share bound is part of the budget
    # the boost scales: 0.12 / 0.88 x 0.3 s a candidate = 0.041 s, 0.33 s for 8, so 128
    # replays (3.2 s) need a factor of 9.8 rather than 2.7
    strategy._measure_wall = 0.3
    assert strategy._first_evolved_boost(8) == pytest.approx(128 * 0.025 / (8 * 0.12 / 0.88 * 0.3))
    with pytest.raises(ValueError, match="seconds_per_candidate"):
        EvolutionarySearch(seconds_per_candidate=-1)


def test_search_share_bounds_a_round_by_the_time_measuring_takes():
    """search_share: a round's own time is at most share / (1 - share) of what measuring its
    candidates takes (timed from hand-out to results), and the smaller bound wins."""
    strategy = EvolutionarySearch(population_size=512, seconds_per_candidate=None,
                                  search_share=0.2)
    strategy._replay_wall = 0.025
    assert strategy._round_seconds(64) is None and strategy._plan(64) == (512, 4)
    strategy._measure_wall = 0.3                 # 0.25 * 0.3 * 64 = 4.8 s: 192 replays
    assert strategy._round_seconds(64) == pytest.approx(4.8)
    assert strategy._plan(64) == (96, 1)         # 96 x 2: one generation over more samples
    assert EvolutionarySearch(genetic_num_iters=0, seconds_per_candidate=None,
                              search_share=0.2)._plan(64) == (512, 0)
    strategy._measure_wall = 3.0                 # a heavy kernel: 48 s, 1920 replays
    assert strategy._plan(64) == (384, 4)
    both = EvolutionarySearch(seconds_per_candidate=0.15, search_share=0.2)
    both._measure_wall = 3.0
    assert both._round_seconds(64) == pytest.approx(0.15 * 64)
    for bad in (0, 1.0, True, "0.2"):
        with pytest.raises(ValueError, match="search_share"):
            EvolutionarySearch(search_share=bad)


def test_measuring_a_batch_is_timed_and_generations_stop_at_the_deadline(caplog):
    """notify_runner_results times the batch from its hand-out; a round's generations stop
    when the next would end past its deadline (whatever the plan said)."""
    import logging
    import time

    strategy = EvolutionarySearch(population_size=16, init_min_unmeasured=4,
                                  genetic_num_iters=3, genetic_mutate_prob=1.0,
                                  seconds_per_candidate=None, search_share=None,
                                  first_batch_share=1.0)
    ctx = _ctx(strategy, n=64)
    model = _HashModel()
    ctx.pre_tuning(max_trials=8, num_trials_per_iter=4, cost_model=model)
    cands = ctx.generate_measure_candidates()
    time.sleep(0.05)                             # "building and running" them
    ctx.notify_runner_results(cands, _ok(cands))
    assert strategy._measure_wall >= 0.05 / len(cands)
    population = strategy._sample_init_population(8)
    with Profiler() as prof, caplog.at_level(logging.INFO, logger="workbench.meta_schedule"):
        bests = strategy._evolve_with_cost_model(population, 4, 3,
                                                 deadline=time.perf_counter())
    assert bests and prof.stats_sec["EvoSearch/Evolve/Mutation"] > 0   # the first one runs
    assert "Stopped after 1 generation(s) of 3" in caplog.text
    with Profiler() as prof:
        strategy._evolve_with_cost_model(population, 4, 3, deadline=None)
    assert prof.stats_sec["EvoSearch/Evolve/Mutation"] > 0
    ctx.post_tuning()


def test_a_first_informed_round_times_replays_before_sizing_its_population():
    """A model informed from the first round (pretrained, warm-started) with no replay timed
    yet: with ``first_batch_share=1`` a first sample of the population times the replays, and
    the round is sized by it -- not TVM's fixed population (a 512^3 matmul's first
    measurement came 96 s after the call)."""
    strategy = EvolutionarySearch(population_size=24, init_min_unmeasured=4,
                                  genetic_num_iters=2, genetic_mutate_prob=1.0,
                                  seconds_per_candidate=0.0, first_batch_share=1.0)
    ctx = _ctx(strategy, n=64)
    model = _HashModel()
    with Profiler() as prof:
        ctx.pre_tuning(max_trials=8, num_trials_per_iter=4, cost_model=model)
        assert strategy._replay_wall is None
        cands = ctx.generate_measure_candidates()
    assert len(cands) == 4 and strategy._replay_wall is not None
    # no replay budget: the batch as population and one generation, 4 + 4 scored
    assert model.scored == 8 and prof.stats_sec["EvoSearch/Evolve/Mutation"] > 0


def _hash_score(sch) -> float:
    return structural_hash(sch.mod) % 1000 / 1000


def test_a_first_informed_round_sends_the_models_best_share_at_once():
    """By default that first round sends the model's best quarter of one batch of samples
    at once (no evolution before the first measurement); the next round fills the window
    from an evolved population that starts with the samples not sent."""
    strategy = EvolutionarySearch(population_size=24, init_min_unmeasured=8,
                                  genetic_num_iters=1, genetic_mutate_prob=1.0,
                                  seconds_per_candidate=10.0)
    ctx = _ctx(strategy, n=64)
    model = _HashModel()
    with Profiler() as prof:
        ctx.pre_tuning(max_trials=8, num_trials_per_iter=4, cost_model=model)
        first = ctx.generate_measure_candidates()
        assert "EvoSearch/Evolve/Mutation" not in prof.stats_sec
    assert len(first) == 1 and strategy._replay_wall is not None
    # the next round is boosted (by 1 here: 10 s a candidate covers 128 replays)
    assert strategy._boost_next and strategy._first_evolved_boost(4 + 1) == 1.0
    carried = list(strategy._carry)
    assert strategy._quick_sent == 1  # its share of the replay budget goes to the next round
    # a window of 4 samples 4 (twice its share of 1, at most the window), sends the best one
    assert len(carried) == 3 and model.scored == len(carried) + 1
    assert _hash_score(first[0].sch) == max(_hash_score(s) for s in carried + [first[0].sch])
    ctx.notify_runner_results(first, _ok(first))
    second = ctx.generate_measure_candidates()
    # the window is still 4 wide, filled from an evolved population of the carried samples
    # (scored again in the new round) and new ones; the first pick is never re-sent
    assert len(second) == 4 and strategy._carry == [] and strategy._quick_sent == 0
    assert not strategy._boost_next      # once
    sent = {structural_hash(c.sch.mod) for c in second}
    assert structural_hash(first[0].sch.mod) not in sent
    ctx.notify_runner_results(second, _ok(second))
    third = ctx.generate_measure_candidates()
    assert len(third) == 3          # 8 trials in all
    ctx.notify_runner_results(third, _ok(third))
    assert ctx.generate_measure_candidates() is None
    ctx.post_tuning()
    with pytest.raises(ValueError, match="first_batch_share"):
        EvolutionarySearch(first_batch_share=0)


def test_the_replay_workers_are_readied_for_the_wide_round_after_the_quick_batch(monkeypatch):
    """While the quick first batch is measured, the replay workers are readied for the round
    that follows it: the wide one (half its replays as the population, one generation), not
    the generations of a later round (a population of 200 over 2 here: 600 replays)."""
    from workbench.meta_schedule.search_strategy.base import TraceApplier
    upcoming = []
    monkeypatch.setattr(TraceApplier, "prepare", lambda self, n: upcoming.append(n))
    # The plans, not this machine's speed: every replay counts as 10 ms (a full run on a
    # loaded host timed them slow enough that the later round's budget held a population
    # of 130, not 200).
    apply = EvolutionarySearch._apply

    def timed_at_10_ms(self, applier, jobs):
        out = apply(self, applier, jobs)
        self._replay_wall = 0.01
        return out
    monkeypatch.setattr(EvolutionarySearch, "_apply", timed_at_10_ms)
    strategy = EvolutionarySearch(population_size=200, init_min_unmeasured=8,
                                  genetic_num_iters=2, seconds_per_candidate=10.0)
    ctx = _ctx(strategy, n=64)
    ctx.pre_tuning(max_trials=8, num_trials_per_iter=4, cost_model=_HashModel())
    assert len(ctx.generate_measure_candidates()) == 1
    boost = strategy._first_evolved_boost(4 + 1)
    pop, gens = strategy._wide_plan(4 + 1, boost)
    assert upcoming == [pop * (gens + 1)] and (pop, gens) == (64, 1)   # 128 replays at most
    assert strategy._plan(4 + 1, boost) == (200, 2)
    ctx.post_tuning()


def test_eps_greedy_fills_the_batch_when_a_random_pick_was_picked_already():
    """The random share comes from the population the best were bred from, so a random
    pick may be one of the best picked already: it is passed over, and the batch is still
    ``num`` wide while never-measured schedules are left."""
    strategy = EvolutionarySearch(population_size=16, init_min_unmeasured=4, eps_greedy=0.5)
    ctx = _ctx(strategy, n=64)
    ctx.pre_tuning(max_trials=64, num_trials_per_iter=8, cost_model=RandomModel(seed=0))
    population = strategy._sample_init_population(12)
    unique = {structural_hash(s.mod) for s in population}
    assert len(unique) >= 8
    for seed in range(5):
        strategy._measured = type(strategy._measured)()
        strategy.rand.seed(seed)
        # the best are the population's first 6: every random pick may repeat one
        picks = strategy._pick_with_eps_greedy(population, population[:6], 6)
        assert len(picks) == 6
        assert len({structural_hash(s.mod) for s in picks}) == 6
    ctx.post_tuning()


def test_the_wide_round_is_sized_by_replays_timed_in_it():
    """The probe's replays are the process's first (and may run beside replay workers
    starting up): new processes' first tuning calls timed them at 2-4x the later ones and
    got wide rounds of 18-47 schedules instead of 64. The wide round times its own first
    samples and is sized by those."""
    strategy = EvolutionarySearch(population_size=24, init_min_unmeasured=8,
                                  genetic_num_iters=1, genetic_mutate_prob=1.0,
                                  seconds_per_candidate=0.05, search_share=None)
    ctx = _ctx(strategy, n=64)
    ctx.pre_tuning(max_trials=16, num_trials_per_iter=4, cost_model=_HashModel())
    first = ctx.generate_measure_candidates()
    assert len(first) == 1 and strategy._boost_next
    ctx.notify_runner_results(first, _ok(first))
    strategy._replay_wall = 10.0      # as if the probe had been slow: 10 s a replay
    assert strategy._wide_plan(5, strategy._first_evolved_boost(5))[0] == 5
    plans = []
    wide_plan = strategy._wide_plan
    strategy._wide_plan = lambda num, boost: plans.append(wide_plan(num, boost)) or plans[-1]
    second = ctx.generate_measure_candidates()
    assert len(second) == 4 and strategy._replay_wall < 1.0
    assert plans == [(24, 1)]         # the whole population the budget allows, not 10
    ctx.post_tuning()
