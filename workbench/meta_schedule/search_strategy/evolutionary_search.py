"""EvolutionarySearch: TVM's cost-model-guided genetic search (reference section 7.2).

Each round: take the best measured records from the database and random samples of the design
spaces as the initial population; for ``genetic_num_iters`` generations score the population
with the cost model, keep the best never-measured schedules (deduplicated by the structural
hash of their IRModule), and breed the next generation by mutating parents drawn in
proportion to their scores; finally pick the batch from the best, with an ``eps_greedy``
share of random samples. With no mutators the search degenerates to scored random sampling.

While the cost model's scores are noise (``CostModel.informed()`` is False: the random model,
XGB before its ``num_warmup_samples`` measurements) a round samples the batch at random and
skips the generations (Workbench; TVM evolves a population of 512 against the noise, which
is random search at ~2,500 trace replays a round: most of a short tuning run's wall time).

Once informed, a round's population and generations are sized so that replaying traces takes
about ``seconds_per_candidate`` x the batch (Workbench; None: TVM's fixed population): the
wall time per replay is measured on the run's own replays (a 128^3 matmul trace replays in
~25 ms, a Winograd convolution's in ~1 s: a population of 64 over 4 generations took 3.5 min
a round there, for 8 candidates measured in seconds). The population never drops below twice
the batch (the cost model still chooses), and generations drop before that, but for one:
a budget too small for it shrinks the population toward the batch instead. A model informed
from the first round (pretrained, or warm-started from a database) meets a round before any
replay was timed: that round samples twice the share it sends (at least 16, at most one
batch) and sends the model's best ``first_batch_share`` of the batch at once (the first
measurement starts seconds after the call, not after a whole round of evolution); the rest of
its window comes from the next, evolved and sized, round, whose population starts with the
samples not sent, and whose replays the replay workers (started while the first batch is
measured, if that round is heavy: ``TraceApplier.prepare``) do with their features. The
share is an eighth: the probe is replayed and featurized here, one by one, where the workers
are not up yet; with a quarter (32 samples), a 512^3 matmul's first batch left 3.2 s after
the call instead of 1.2-1.5 s. The round after that quick batch gets up to
``FIRST_EVOLVED_BOOST`` times a round's budget, once, enough for a population of 64 over one
generation: sized
rounds of a few candidates give the model little more than the batch to choose from, and
its first choices are where a pretrained model's ranking pays. That round is sized by the
replays of its own first samples, not by the probe's: those were a new process's first
replays (2-4x the later ones, beside replay workers starting up), and 8 of 12 fresh
processes' first calls got a population of 18-47 instead of 64 by them.

The search's own time is also held to ``search_share`` of the wall time (Workbench): a round
may take at most ``search_share / (1 - search_share)`` x the wall time measuring one candidate
took (building and running it, timed from the batch being handed out to its results) x the
batch. That budget sizes the population with the replay time, as above, and is a deadline:
the generations after the first stop when the next one would not end within it (feature
extraction and the cost model's predictions count too, not only the replays). Measuring a
512^3 matmul takes ~0.3 s a candidate, so a round of 64 gets ~2.6 s instead of ~10 s; with
the fixed costs of a run (its first round, the design spaces, the reference) the tuner's own
work is ~19% of a 64-trial run (4.4 s of 23 s on a Sapphire Rapids host once candidates built
twice as fast, and the round after the quick batch kept to its budget; issue 27's bound is
20%); a kernel that takes longer to build and run gets a longer search in proportion.
"""
from __future__ import annotations

import heapq
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from workbench.ir.structural import StructuralSet
from workbench.meta_schedule.measured_schedules import measured_schedules
from workbench.meta_schedule.profiler import Profiler
from workbench.meta_schedule.search_strategy.base import BuiltinStrategy, TraceApplier
from workbench.meta_schedule.search_strategy.search_strategy import MeasureCandidate
from workbench.tir.schedule import Schedule

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.cost_model import CostModel
    from workbench.meta_schedule.database import Database
    from workbench.meta_schedule.runner import RunnerResult

NUM_EMPTY_ITERS_BEFORE_EARLY_STOP = 5
# Records of earlier runs a cost model that is not informed yet learns from, per task (each is
# one trace replay, ~30 ms).
WARM_START_RECORDS = 64
# Fewer candidates lacking features than this are extracted in the tuning process (shipping
# them to the replay workers would not pay).
MIN_FEATURES_AHEAD = 8
# Samples the quick first batch (module docstring) picks from, at least.
FIRST_PROBE_LEAST = 16
# The round after a quick first batch gets up to this many times a round's search budget,
# as much as FIRST_EVOLVED_REPLAYS replays take (a population of 64 over one generation,
# ``_wide_plan``): a pretrained model ranks well before any measurement, but a sized round
# of 8 candidates gave it 8-11 samples to pick 8 from (a ResNet-50 1x1 convolution, 27 ms a
# replay), where 1-5% of random samples come within 95% of the best -- while its top 4 of
# 512 held 0.95-0.97 of the best. With the search_share bound a round of 9 gets ~0.5 s, so
# 4x still meant a population of 12-18 on a 3x3 convolution (60-150 ms a replay): trials to
# 95% of a 512-trial cold search's best [53, -] and [98, 124]; with up to 16x, a population
# of 31-64: [34, 28]. Once per task; a round of 64 candidates has the population already.
FIRST_EVOLVED_BOOST = 16.0
FIRST_EVOLVED_REPLAYS = 128


class EvolutionarySearch(BuiltinStrategy):
    """TVM's defaults; see the module docstring for the algorithm."""

    def __init__(self, population_size: int = 512, init_measured_ratio: float = 0.2,
                 init_min_unmeasured: int = 50, max_fail_count: int = 5,
                 genetic_num_iters: int = 4, genetic_mutate_prob: float = 0.85,
                 genetic_max_fail_count: int = 10, eps_greedy: float = 0.05,
                 seconds_per_candidate: float | None = 0.15,
                 first_batch_share: float = 0.125,
                 search_share: float | None = 0.12) -> None:
        super().__init__()
        if population_size <= 0 or not 0 <= init_measured_ratio <= 1 or \
                not 0 <= genetic_mutate_prob <= 1 or not 0 <= eps_greedy <= 1:
            raise ValueError("EvolutionarySearch: population_size must be positive and the "
                             "ratios/probabilities within [0, 1]")
        if seconds_per_candidate is not None and (
                isinstance(seconds_per_candidate, bool) or
                not isinstance(seconds_per_candidate, (int, float)) or
                seconds_per_candidate < 0):
            raise ValueError(f"EvolutionarySearch: seconds_per_candidate must be a number >= 0 "
                             f"or None, got {seconds_per_candidate!r}")
        if isinstance(first_batch_share, bool) or \
                not isinstance(first_batch_share, (int, float)) or \
                not 0 < first_batch_share <= 1:
            raise ValueError(f"EvolutionarySearch: first_batch_share must be within (0, 1], "
                             f"got {first_batch_share!r}")
        if search_share is not None and (
                isinstance(search_share, bool) or not isinstance(search_share, (int, float))
                or not 0 < search_share < 1):
            raise ValueError(f"EvolutionarySearch: search_share must be within (0, 1) or "
                             f"None, got {search_share!r}")
        self.search_share = search_share
        self.first_batch_share = float(first_batch_share)
        self.seconds_per_candidate = seconds_per_candidate
        self.population_size = population_size
        self.init_measured_ratio = init_measured_ratio
        self.init_min_unmeasured = init_min_unmeasured
        self.max_fail_count = max_fail_count
        self.genetic_num_iters = genetic_num_iters
        self.genetic_mutate_prob = genetic_mutate_prob
        self.genetic_max_fail_count = genetic_max_fail_count
        self.eps_greedy = eps_greedy
        self._reset_state()

    def _config(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in (
            "population_size", "init_measured_ratio", "init_min_unmeasured", "max_fail_count",
            "genetic_num_iters", "genetic_mutate_prob", "genetic_max_fail_count", "eps_greedy",
            "seconds_per_candidate", "first_batch_share", "search_share")}

    def _reset_state(self) -> None:
        self._traces: list = []
        self._database: "Database | None" = None
        self._cost_model: "CostModel | None" = None
        self._token: Any = None
        self._measured = StructuralSet()  # modules measured or picked to be
        self._num_empty_iters = 0
        self._args_info: list | None = None
        self._replay_wall: float | None = None   # wall seconds per replay, this run's
        self._carry: list[Schedule] = []  # samples of the quick first batch not sent
        self._quick_sent = 0                 # candidates the quick first batch sent
        self._boost_next = False             # the next round follows a quick first batch
        self._measure_wall: float | None = None  # wall seconds measuring one candidate
        self._handed_out: float | None = None    # when the last batch was handed out

    # -- lifecycle -----------------------------------------------------------------------------
    def pre_tuning(self, max_trials: int, num_trials_per_iter: int,
                   design_spaces: list[Schedule], database: "Database | None" = None,
                   cost_model: "CostModel | None" = None) -> None:
        self._start(max_trials, num_trials_per_iter, design_spaces)
        from workbench.meta_schedule.cost_model import RandomModel
        from workbench.meta_schedule.database import MemoryDatabase
        self._reset_state()
        self._traces = [s.trace.simplified(remove_postproc=True) for s in design_spaces]
        self._database = database if database is not None else MemoryDatabase()
        self._cost_model = cost_model if cost_model is not None else RandomModel()
        self._token = self._database.commit_workload(self.context.mod)
        if not self._cost_model.informed(self.context):
            self._learn_from_database()

    def _learn_from_database(self) -> None:
        """A run resuming from a database: the cost model learns from the workload's best
        ``WARM_START_RECORDS`` records of earlier runs (Workbench; TVM's model starts empty
        every run), so it may be informed from the first round."""
        from workbench.meta_schedule.runner import RunnerResult
        records = [r for r in self._database.get_top_k(self._token, WARM_START_RECORDS)
                   if r.run_secs]
        if not records:
            return
        with Profiler.timeit("EvoSearch/LearnFromDatabase"):
            applier = self._applier()
            schs = self._apply(applier, [(r.trace, self.rand.fork_seed(), True)
                                         for r in records])
            pairs = [(s, r) for s, r in zip(schs, records) if s is not None]
            if pairs:
                self._cost_model.update(
                    self.context, self._make_candidates([s for s, _ in pairs]),
                    [RunnerResult(r.run_secs, None) for _, r in pairs])
        self.logger.info("The cost model learnt from %d record(s) of earlier runs", len(pairs))

    def _apply(self, applier: TraceApplier, jobs: list) -> list[Schedule | None]:
        """``applier.apply_many(jobs)``, timed: the wall seconds per replay feed the sizing of
        later rounds (a moving average, so one slow batch on a busy machine weighs half)."""
        if not jobs:
            return []
        t0 = time.perf_counter()
        out = applier.apply_many(jobs)
        per = (time.perf_counter() - t0) / len(jobs)
        self._replay_wall = per if self._replay_wall is None else 0.5 * (self._replay_wall + per)
        return out

    def _round_seconds(self, num: int, boost: float = 1.0) -> float | None:
        """The wall-time budget of an informed round measuring ``num`` candidates: the
        smaller of ``seconds_per_candidate`` and the ``search_share`` bound (module
        docstring) per candidate, times ``num`` (and ``boost``); None: unbounded."""
        per = []
        if self.seconds_per_candidate is not None:
            per.append(self.seconds_per_candidate)
        if self.search_share is not None and self._measure_wall is not None:
            per.append(self.search_share / (1.0 - self.search_share) * self._measure_wall)
        return min(per) * num * boost if per else None

    def _first_evolved_boost(self, num: int) -> float:
        """The budget factor of the round after a quick first batch, measuring ``num``
        candidates (see FIRST_EVOLVED_BOOST): 1 when its budget already covers
        FIRST_EVOLVED_REPLAYS replays, or is unbounded."""
        seconds = self._round_seconds(num)
        if not seconds or self._replay_wall is None:
            return 1.0
        return float(np.clip(FIRST_EVOLVED_REPLAYS * self._replay_wall / seconds, 1.0,
                             FIRST_EVOLVED_BOOST))

    def _plan(self, num: int, boost: float = 1.0) -> tuple[int, int]:
        """(population, generations) of an informed round measuring ``num`` candidates (module
        docstring), its budget times ``boost``."""
        pop, gens = self.population_size, self.genetic_num_iters
        seconds = self._round_seconds(num, boost)
        if seconds is None or self._replay_wall is None:
            return pop, gens
        budget = seconds / self._replay_wall   # replays
        least = min(pop, 2 * num)
        pop = max(least, min(pop, int(budget / (gens + 1) + 1e-6)))
        if pop == least:
            gens = max(0, min(gens, int(budget / max(1, pop) + 1e-6) - 1))
            if gens == 0 and self.genetic_num_iters > 0:
                # One generation bred from the fittest (and the database's best) beats a
                # larger random population for the same replays: the population shrinks
                # toward the batch to keep one.
                pop = max(min(pop, num), min(least, int(budget / 2 + 1e-6)))
                gens = 1
        return pop, gens

    def _wide_plan(self, num: int, boost: float) -> tuple[int, int]:
        """(population, generations) of the round after a quick first batch: its replays
        spent on breadth, half of them (at most FIRST_EVOLVED_REPLAYS) as the population and
        one generation -- a pretrained model that ranks well has seen no measurement of the
        task yet, so more samples to choose from beat generations bred from its first picks
        (``_plan`` gave a ResNet-50 3x3 convolution a population of 12-18 over 1-2
        generations: the model's picks held 0.21 of the best after 8 trials, where its top
        pick of 1,024 measured candidates held 0.98). The population is at least the batch
        (its generation then scores twice the batch to pick from): a floor of twice the
        batch overrode the budget of a 64-candidate round (a 512^3 matmul: 256 replays,
        ~5 s, where the search_share budget gave ~3 s)."""
        seconds = self._round_seconds(num, boost)
        if seconds is None or self._replay_wall is None or self.genetic_num_iters < 1:
            return self._plan(num, boost)
        replays = min(FIRST_EVOLVED_REPLAYS, seconds / self._replay_wall)
        pop = max(min(self.population_size, num), int(replays / 2 + 1e-6))
        return min(self.population_size, pop), 1

    def _time_replays_again(self, num: int) -> list[Schedule]:
        """The first ``num`` samples of the wide round's population (the round after a
        quick first batch, measuring ``num``; at most the population size), with the wall
        time per replay taken from them alone. The probe timed replays in this process: a
        new process's first ones (2-4x the later ones) and, for a heavy probe, beside the
        replay workers starting up; 8 of 12 fresh processes' first tuning calls got a wide
        round of 18-47 schedules instead of 64 by it (55-215 ms a replay, ~25 ms later). These
        are replayed where the rest of the round will be (the workers, up by now if it is
        heavy), and join its population."""
        before, self._replay_wall = self._replay_wall, None
        with Profiler.timeit("EvoSearch/SampleInitPopulation"):
            out = self._samples(self._applier(), min(num, self.population_size))
        if self._replay_wall is None:
            self._replay_wall = before
        return out

    def post_tuning(self) -> None:
        super().post_tuning()
        self._reset_state()

    def notify_runner_results(self, measure_candidates: list[MeasureCandidate],
                              results: list["RunnerResult"]) -> None:
        self._check_tuning("notify_runner_results")
        self.st += len(results)
        self.ed += len(results)
        if self._handed_out is not None and results:
            per = (time.perf_counter() - self._handed_out) / len(results)
            self._measure_wall = per if self._measure_wall is None else \
                0.5 * (self._measure_wall + per)
            self._handed_out = None

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        self._check_tuning("generate_measure_candidates")
        cands = self._generate()
        # measuring starts now: notify_runner_results times it (the search_share budget)
        self._handed_out = time.perf_counter() if cands else None
        return cands

    def _generate(self) -> list[MeasureCandidate] | None:
        round_start = time.perf_counter()
        num = self._next_window()
        if num is None:
            return None
        log = self.logger
        log.info("Generating candidates......")
        if not self._cost_model.informed(self.context):
            picks = self._random_picks(num)
            if picks is None:
                log.warning("Cannot sample any valid candidate, evolutionary search failed.")
                return None
            log.info("The cost model is not informed yet (%s): sending %d random candidate(s) "
                     "for measurement, no evolution", self._cost_model, len(picks))
            if not picks:
                self._num_empty_iters += 1
                if self._num_empty_iters >= NUM_EMPTY_ITERS_BEFORE_EARLY_STOP:
                    return None
            return self._candidates(picks)
        probe, self._carry = self._carry, []
        if self._replay_wall is None and self.seconds_per_candidate is not None:
            # Informed from the first round (a pretrained or warm-started model) and no replay
            # timed yet: TVM's fixed 512 x 4 generations kept a 512^3 matmul's first
            # measurement 96 s away. Sample twice the share it sends (at least
            # FIRST_PROBE_LEAST; this times the replays that size the next rounds) and send
            # the model's best share of it at once; the rest of the window follows from an
            # evolved population, with those results learnt. The probe is sampled here, one
            # by one, before the replay workers are up; the rest of the population is
            # sampled next round, in them.
            k = int(np.ceil(num * self.first_batch_share))
            probe = self._sample_init_population(
                min(self.population_size, num, max(2 * k, FIRST_PROBE_LEAST)))
            quick = self._quick_first_batch(probe, num)
            if quick is not None:
                self._boost_next = True
                # the replay workers start while it is measured, if the next round (the wide
                # one) is heavy: sized by the budget known now, the round itself uses the
                # measured one
                planned = num + self._quick_sent
                pop, gens = self._wide_plan(planned, self._first_evolved_boost(planned))
                self._applier().prepare(pop * (gens + 1))
                return quick
        # the quick first batch's share of the replay budget goes to the round after it
        planned, self._quick_sent = num + self._quick_sent, 0
        # the boost is computed against the budget it scales: by now the quick batch's
        # measurement has timed a candidate, so the search_share bound is part of it
        boosted, self._boost_next = self._boost_next, False
        if boosted:
            probe = probe + self._time_replays_again(planned)
        boost = self._first_evolved_boost(planned) if boosted else 1.0
        pop, gens = self._wide_plan(planned, boost) if boosted else self._plan(planned, boost)
        if (pop, gens) != (self.population_size, self.genetic_num_iters):
            log.info("Population %d, %d generation(s): %.0f ms per trace replay, about %.1f s "
                     "for %d candidate(s)", pop, gens, self._replay_wall * 1e3,
                     self._round_seconds(planned, boost), planned)
        measured = self._pick_best_from_database(int(pop * self.init_measured_ratio))
        rest = pop - len(measured) - len(probe)
        unmeasured = probe[:pop - len(measured)] + (
            self._sample_init_population(rest) if rest > 0 else [])
        if len(unmeasured) < min(self.init_min_unmeasured, pop - len(measured)):
            log.warning("Cannot sample enough initial population, evolutionary search failed.")
            return None
        log.info("Sampled %d candidate(s)", len(unmeasured))
        seconds = self._round_seconds(planned, boost)
        deadline = None if seconds is None else round_start + seconds
        bests = self._evolve_with_cost_model(measured + unmeasured, num, gens, deadline)
        log.info("Got %d candidate(s) with evolutionary search", len(bests))
        picks = self._pick_with_eps_greedy(unmeasured, bests, num)
        log.info("Sending %d candidates(s) for measurement", len(picks))
        if not picks:
            self._num_empty_iters += 1
            if self._num_empty_iters >= NUM_EMPTY_ITERS_BEFORE_EARLY_STOP:
                return None
        # per-candidate argument info: a layout-rewritten candidate takes its own packed shapes
        return self._candidates(picks)

    def _applier(self) -> TraceApplier:
        """The base applier; while the cost model scores candidates by per-store features,
        replay workers compute those of what they replay (in parallel, instead of the
        cost model one by one in this process later)."""
        applier = super()._applier()
        if applier.pool is not None:
            applier.features = self._shipped_features()
        return applier

    def _shipped_features(self) -> Any:
        """The per-store feature config replay workers compute rows for, or None when the
        cost model does not score by them (or is not informed yet)."""
        extractor = getattr(self._cost_model, "extractor", None)
        ship = getattr(extractor, "shipping_config", None)
        if ship is None or not self._cost_model.informed(self.context):
            return None
        return ship(self.context)

    def _features_ahead(self, schs: list[Schedule]) -> None:
        """Per-store rows of the schedules replayed in this process (the timing sample, small
        batches of mutation retries), computed in the replay pool's workers before the cost
        model asks: ~35 ms of lowering each for a 512^3 matmul, here one after the other."""
        if len(schs) < MIN_FEATURES_AHEAD or (getattr(self.context, "num_threads", 1) or 1) <= 1:
            return
        features = self._shipped_features()
        if features is None:
            return
        from workbench.meta_schedule.feature_extractor.per_store.extractor import uncached
        from workbench.meta_schedule.search_strategy.replay_pool import (
            extract_features_ahead, get_replay_pool,
        )
        missing = uncached([s.mod for s in schs], features)
        if len(missing) >= MIN_FEATURES_AHEAD:
            extract_features_ahead(get_replay_pool(self.context.num_threads), features,
                                   [schs[i].mod for i in missing])

    def _quick_first_batch(self, probe: list[Schedule],
                           num: int) -> list[MeasureCandidate] | None:
        """The model's best ``first_batch_share`` of ``probe`` (never-measured random samples)
        as the first batch; the other samples join the next round's population. None: send
        the whole window from this round (share 1, a window of one, or too few samples)."""
        k = int(np.ceil(num * self.first_batch_share))
        if k >= num or len(probe) <= k:
            return None
        with Profiler.timeit("EvoSearch/Evolve/PredictNormalizedScore"):
            scores = self._predict(probe, {})
        order = sorted(range(len(probe)), key=lambda i: -scores[i])
        picks = self._pick_with_eps_greedy(probe, [probe[i] for i in order], k)
        chosen = {id(s) for s in picks}
        self._carry = [s for s in probe if id(s) not in chosen]
        self._quick_sent = len(picks)
        self.logger.info("First batch: the model's best %d of %d sample(s), sent before the "
                         "population evolves", len(picks), len(probe))
        return self._candidates(picks)

    # -- phases --------------------------------------------------------------------------------
    def _make_candidates(self, schs: list[Schedule]) -> list[MeasureCandidate]:
        """Candidates for the cost model, sharing the first one's argument info (features
        read the schedule, not the argument shapes, so this skips a per-candidate analysis)."""
        if self._args_info is None:
            self._args_info = self._candidates(schs[:1])[0].args_info if schs else None
        return [MeasureCandidate(s, self._args_info) for s in schs]

    def _pick_best_from_database(self, num: int) -> list[Schedule]:
        if num <= 0:
            return []
        with Profiler.timeit("EvoSearch/PickBestFromDatabase"):
            applier = self._applier()
            # records measured in this run come back as their schedules, the others replay
            kept = measured_schedules(self.context)
            records = self._database.get_top_k(self._token, num)
            schs = [kept.get(record.trace) for record in records]
            jobs = [(record.trace, self.rand.fork_seed(), True)
                    for record, sch in zip(records, schs) if sch is None]
            replayed = iter(self._apply(applier, jobs))
            out = [sch if sch is not None else next(replayed) for sch in schs]
            out = [sch for sch in out if sch is not None]
        self.logger.info("Pick-Best-From-Database summary:\n%s", applier.summary())
        self.logger.info("Picked top %d candidate(s) from database", len(out))
        return out

    def _samples(self, applier: TraceApplier, num: int) -> list[Schedule]:
        """``num`` random replays of the design spaces; those that replay and pass the
        postprocessors."""
        jobs = [(self._traces[self.rand.randint(0, len(self._traces))], self.rand.fork_seed(),
                 False) for _ in range(num)]
        return [sch for sch in self._apply(applier, jobs) if sch is not None]

    def _sample_init_population(self, num: int) -> list[Schedule]:
        out: list[Schedule] = []
        fail_count = 0
        applier = self._applier()
        # TVM samples until init_min_unmeasured (50) are valid, in batches of num: right for
        # its population of 512, but a sized round of one candidate (population 2) would
        # replay 50 traces two at a time
        least = min(self.init_min_unmeasured, max(1, num))
        with Profiler.timeit("EvoSearch/SampleInitPopulation"):
            while len(out) < least and fail_count < self.max_fail_count:
                # TVM samples num again; topping up to num replays only what is missing
                found = self._samples(applier, num - len(out))
                out.extend(found)
                if not found:
                    fail_count += 1
                if num <= 0:
                    break
        self.logger.info("Sample-Init-Population summary:\n%s", applier.summary())
        return out

    def _random_picks(self, num: int) -> list[Schedule] | None:
        """Up to ``num`` never-measured random samples of the design spaces; None when no
        sample replays and passes the postprocessors at all."""
        out: list[Schedule] = []
        fail_count = 0
        valid = 0
        applier = self._applier()
        with Profiler.timeit("EvoSearch/SampleInitPopulation"):
            while len(out) < num and fail_count < self.max_fail_count:
                samples = self._samples(applier, num - len(out))
                valid += len(samples)
                fresh = [sch for sch in samples if self._measured.add(sch.mod)]
                out.extend(fresh)
                if not fresh:
                    fail_count += 1
        self.logger.info("Sample-Init-Population summary:\n%s", applier.summary())
        return out if valid else None

    def _predict(self, population: list[Schedule], cache: dict[int, float]) -> np.ndarray:
        todo = [s for s in population if id(s) not in cache]
        if todo:
            self._features_ahead(todo)
            scores = self._cost_model.predict(self.context, self._make_candidates(todo))
            for s, v in zip(todo, np.asarray(scores, dtype="float64").ravel()):
                cache[id(s)] = float(v)
        return np.maximum(0.0, np.array([cache[id(s)] for s in population], dtype="float64"))

    def _evolve_with_cost_model(self, population: list[Schedule], num: int, gens: int,
                                deadline: float | None = None) -> list[Schedule]:
        """The best ``num`` never-measured schedules met over ``gens`` generations bred from
        ``population``; fewer generations when the next would end past ``deadline`` (a
        ``perf_counter`` time; None: no limit)."""
        exists = self._measured.copy()
        heap: list[tuple[float, int, Schedule]] = []  # min-heap of the best `num`
        counter = 0
        cache: dict[int, float] = {}
        applier = self._applier()
        mutators, masses = self._mutator_sampler()
        pop_size = len(population)
        gen_start = time.perf_counter()
        for it in range(gens + 1):
            with Profiler.timeit("EvoSearch/Evolve/PredictNormalizedScore"):
                scores = self._predict(population, cache)
            with Profiler.timeit("EvoSearch/Evolve/Misc"):
                for sch, score in zip(population, scores):
                    if exists.add(sch.mod):
                        counter += 1
                        item = (float(score), -counter, sch)
                        if len(heap) < num:
                            heapq.heappush(heap, item)
                        elif item[:2] > heap[0][:2]:
                            heapq.heapreplace(heap, item)
            if it == gens or pop_size == 0:
                break
            now = time.perf_counter()
            # the first generation always runs (the plan keeps one); a later one costs what
            # the last did
            if deadline is not None and it > 0 and now + (now - gen_start) > deadline:
                self.logger.info("Stopped after %d generation(s) of %d: the next would end "
                                 "past the round's time budget", it, gens)
                break
            gen_start = now
            with Profiler.timeit("EvoSearch/Evolve/Mutation"):
                population = self._next_generation(population, scores, mutators, masses,
                                                   applier)
            self.logger.info("Evolve iter #%d done. Summary:\n%s", it, applier.summary())
        bests = [sch for _, _, sch in sorted(heap, key=lambda x: (-x[0], -x[1]))]
        if heap:
            top = sorted((s for s, _, _ in heap), reverse=True)
            lines = []
            for i in range(0, len(top), 16):
                chunk = ", ".join(f"{v:.4f}" for v in top[i:i + 16])
                lines.append(f"[{i + 1} : {min(i + 16, len(top))}]:\t{chunk}")
            self.logger.info("Scores of the best %d candidates:\n%s", len(top),
                             "\n".join(lines))
        return bests

    def _mutator_sampler(self) -> tuple[list[Any], list[float]]:
        """[None, m1, m2, ...] with masses [1-p, p*w1/W, ...] (all on None without mutators)."""
        p = self.genetic_mutate_prob
        mutators: list[Any] = [None]
        masses = [1.0 - p]
        total = sum(float(w) for w in self.mutator_probs.values())
        if p > 0 and total > 0:
            for m, w in self.mutator_probs.items():
                mutators.append(m)
                masses.append(p * float(w) / total)
        else:
            masses = [1.0]
            mutators = [None]
        return mutators, masses

    def _sample(self, masses: list[float] | np.ndarray) -> int:
        total = float(np.sum(masses))
        if total <= 0:
            return self.rand.randint(0, len(masses))
        x = self.rand.uniform() * total
        acc = 0.0
        for i, w in enumerate(masses):
            acc += float(w)
            if x < acc:
                return i
        return len(masses) - 1

    def _next_generation(self, population: list[Schedule], scores: np.ndarray,
                         mutators: list[Any], masses: list[float],
                         applier: TraceApplier) -> list[Schedule]:
        """One generation: per slot, sample a parent by score and a mutator (or none: keep
        the parent, once per parent); a slot whose child fails to replay retries up to
        ``genetic_max_fail_count`` times, then keeps its last parent. All slots' children of
        one attempt are replayed as one batch (in parallel when the applier has a pool)."""
        n = len(population)
        used = [False] * n
        nxt: list[Schedule | None] = [None] * n
        last_parent = [0] * n
        pending = list(range(n))
        for _attempt in range(self.genetic_max_fail_count + 1):
            if not pending:
                break
            jobs: list[tuple] = []
            slots: list[int] = []
            retry: list[int] = []
            for slot in pending:
                parent_idx = self._sample(scores)
                last_parent[slot] = parent_idx
                mutator = mutators[self._sample(masses)]
                if mutator is None:
                    if not used[parent_idx]:
                        used[parent_idx] = True
                        nxt[slot] = population[parent_idx]
                    else:
                        retry.append(slot)
                    continue
                new_trace = mutator.apply(population[parent_idx].trace)
                if new_trace is None:
                    retry.append(slot)
                    continue
                jobs.append((new_trace, self.rand.fork_seed(), True))
                slots.append(slot)
            for slot, child in zip(slots, self._apply(applier, jobs)):
                if child is None:
                    retry.append(slot)
                else:
                    nxt[slot] = child
            pending = sorted(retry)
        return [child if child is not None else population[last_parent[slot]]
                for slot, child in enumerate(nxt)]

    def _pick_with_eps_greedy(self, unmeasured: list[Schedule], bests: list[Schedule],
                              num: int) -> list[Schedule]:
        with Profiler.timeit("EvoSearch/PickWithEpsGreedy"):
            num_rands = int(num * self.eps_greedy)
            num_bests = num - num_rands
            order = list(range(len(unmeasured)))
            for i in range(len(order) - 1, 0, -1):  # Fisher-Yates with the strategy's RNG
                j = self.rand.randint(0, i + 1)
                order[i], order[j] = order[j], order[i]
            rands = [unmeasured[i] for i in order]
            out: list[Schedule] = []
            from_bests, from_rands = iter(bests), iter(rands)
            while len(out) < num:
                # The first num_bests picks prefer the best, the rest the random; either side
                # makes up for the other running out. The random ones come from the population
                # the best were bred from: one picked already is passed over, not counted (it
                # used to take a place, and the batch came out short).
                first, other = (from_bests, from_rands) if len(out) < num_bests else \
                    (from_rands, from_bests)
                sch = next(first, None) or next(other, None)
                if sch is None:
                    break
                if self._measured.add(sch.mod):
                    out.append(sch)
            return out
