"""What the built-in strategies share: the captured context, the lifecycle checks, the trial
window ``[st, ed)``, and replaying a trace with postprocessing (TVM's ThreadedTraceApply)."""
from __future__ import annotations

import hashlib
import logging
import pickle
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Sequence

from workbench.ir.module import IRModule
from workbench.meta_schedule.arg_info import ArgInfo
from workbench.meta_schedule.search_strategy.search_strategy import (
    MeasureCandidate, SearchStrategy,
)
from workbench.tir.schedule import Schedule, Trace
from workbench.tir.schedule.handles import RandomEngine

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.mutator import Mutator
    from workbench.meta_schedule.postproc import Postproc
    from workbench.meta_schedule.search_strategy.replay_pool import ReplayPool
    from workbench.meta_schedule.tune_context import TuneContext


def _drop_decision(inst: Any, inputs: Any, attrs: Any, decision: Any) -> Any:
    return None


# A batch goes to the replay pool only when replaying it here would take longer than this
# (seconds, estimated from the replays timed so far): below it, starting the workers (~1 s
# each, imports) and shipping cost more than they save. Once the workers are up, what is left
# of a batch is worth shipping from _POOL_WORTH_READY on (a schedule comes back in ~2 ms). A
# batch that would take _PRESTART_SECONDS here starts the workers in the background once
# _PRESTART_AFTER replays are timed, and is replayed here meanwhile, one by one, until they
# are up: the rest then goes to them. A strategy whose next round will be heavy starts them
# ahead (``prepare``: EvolutionarySearch's 512^3 matmul gets them while its first batch is
# measured), while a small kernel's light batches never start them.
_POOL_WORTH_SECONDS = 2.0
_POOL_WORTH_READY = 0.25
_PRESTART_SECONDS = 0.5
_PRESTART_AFTER = 2
_TIMING_SAMPLE = 8


@dataclass
class SampleFailures:
    """Why a search's samples never became candidates, over its whole run: trace replays that
    raised, refusals per postprocessor (by name), and the first failure's message -- what a
    task that found no valid candidate reports (``TaskScheduler``)."""

    replay: int = 0
    postproc: dict[str, int] = field(default_factory=dict)
    first: str | None = None

    def note(self, message: str) -> None:
        if self.first is None:
            self.first = message

    @property
    def refused(self) -> int:
        return sum(self.postproc.values())


@dataclass
class ReplayTiming:
    """Replays timed in the tuning process, over a search's whole run: shared by its
    appliers, so once the workers are up only the run's first ``_TIMING_SAMPLE`` replays are
    done here to decide whether batches go to the replay pool (each new applier used to time
    its own eight, ~60 ms each in this process, three appliers a round)."""

    count: int = 0
    seconds: float = 0.0


def refusal_message(proc: "Postproc", err: BaseException | None = None) -> str:
    """What a postproc's refusal says: the exception it raised, or the reason it left in
    ``last_refusal`` before returning False."""
    if err is not None:
        return f"{proc}: {type(err).__name__}: {err}"
    return f"{proc}: {getattr(proc, 'last_refusal', None) or 'refused the schedule'}"


class TraceApplier:
    """Replays traces onto fresh schedules of one workload and runs the postprocessors,
    counting why candidates fail (replay errors, then the first postproc that refused), here
    and in ``failures`` (a :class:`SampleFailures` a strategy shares across its appliers).

    ``apply_many`` replays a batch, in the worker processes of ``pool`` when one is given and
    the batch is heavy enough to pay for shipping (see :mod:`.replay_pool`). ``features``: a
    per-store feature config (``PerStoreFeature.shipping_config``) whose rows the workers
    compute for every schedule they replay, into this process's feature cache; None: none.
    ``timing``: the :class:`ReplayTiming` it shares with the strategy's other appliers."""

    def __init__(self, mod: IRModule, postprocs: list["Postproc"],
                 pool: "ReplayPool | None" = None,
                 failures: SampleFailures | None = None,
                 timing: ReplayTiming | None = None) -> None:
        self.mod = mod
        self.postprocs = postprocs
        self.pool = pool
        self.replay_failures = 0
        self.postproc_failures = [0] * len(postprocs)
        self.failures = failures if failures is not None else SampleFailures()
        self._shipping: tuple[str, bytes] | None = None
        self.features: Any = None
        self.timing = timing if timing is not None else ReplayTiming()

    def apply(self, trace: Trace, seed: int, keep_decisions: bool = True) -> Schedule | None:
        sch = Schedule(self.mod, seed=seed)
        try:
            trace.apply_to_schedule(sch, remove_postproc=True,
                                    decision_provider=None if keep_decisions else _drop_decision)
        except Exception as err:  # noqa: BLE001 - any replay error just rejects this sample
            self.count_replay_failure(f"trace replay: {type(err).__name__}: {err}")
            return None
        sch.enter_postproc()
        for i, proc in enumerate(self.postprocs):
            error = None
            try:
                ok = proc.apply(sch)
            except Exception as err:  # noqa: BLE001 - a raising postproc rejects it (as TVM)
                ok, error = False, err
            if not ok:
                self.count_postproc_failure(i, refusal_message(proc, error))
                return None
        return sch

    def count_replay_failure(self, message: str) -> None:
        self.replay_failures += 1
        self.failures.replay += 1
        self.failures.note(message)

    def count_postproc_failure(self, index: int, message: str) -> None:
        self.postproc_failures[index] += 1
        name = str(self.postprocs[index])
        self.failures.postproc[name] = self.failures.postproc.get(name, 0) + 1
        self.failures.note(message)

    def _timed_apply(self, trace: Trace, seed: int, keep: bool) -> Schedule | None:
        t0 = time.perf_counter()
        sch = self.apply(trace, seed, keep_decisions=keep)
        self.timing.seconds += time.perf_counter() - t0
        self.timing.count += 1
        return sch

    def apply_many(self, jobs: Sequence[tuple[Trace, int, bool]]) -> list[Schedule | None]:
        """``apply(trace, seed, keep_decisions)`` for every job, results in job order."""
        jobs = list(jobs)
        out: list[Schedule | None] = []
        pool = self.pool
        while pool is not None and len(out) < len(jobs):
            # replay here (timing the run's first replays) until the rest is worth shipping
            timing = self.timing
            if timing.count >= _PRESTART_AFTER:
                left = self._seconds_here(len(jobs) - len(out))
                ready = pool.ready
                if not ready and left >= _PRESTART_SECONDS:
                    pool.prestart()
                if timing.count >= _TIMING_SAMPLE:
                    if left > (_POOL_WORTH_READY if ready else _POOL_WORTH_SECONDS):
                        return out + pool.replay(self, jobs[len(out):])  # may wait for them
                    if ready or not pool.starting:
                        break   # a light batch: not worth shipping, or starting workers for
            out.append(self._timed_apply(*jobs[len(out)]))
        out.extend(self.apply(t, s, keep_decisions=k) for t, s, k in jobs[len(out):])
        return out

    def prepare(self, upcoming: int) -> None:
        """Start the replay workers in the background now if ``upcoming`` replays (a
        strategy's next round) would take ``_PRESTART_SECONDS`` here by the replays timed so
        far: they start while candidates are measured, and are up when that round comes."""
        if self.pool is not None and self.timing.count >= _PRESTART_AFTER and \
                self._seconds_here(upcoming) >= _PRESTART_SECONDS:
            self.pool.prestart()

    def _seconds_here(self, n: int) -> float:
        """Seconds ``n`` replays would take in this process, by the replays timed so far."""
        return self.timing.seconds / max(1, self.timing.count) * n

    # -- what the replay pool needs ----------------------------------------------------------
    def shipping_form(self) -> tuple[str, bytes]:
        """``(key, pickle of (mod, postprocs))`` that workers rebuild this applier from."""
        if self._shipping is None:
            from workbench.workers import dumps  # notebook-defined postprocs travel by value
            data = dumps((self.mod, self.postprocs))
            self._shipping = (hashlib.sha1(data).hexdigest(), data)
        return self._shipping

    def adopt(self, item: tuple) -> Schedule | None:
        """Turn one worker result back into a Schedule (or count its failure)."""
        if item[0] == "ok":
            if len(item) > 2 and item[2] is not None and self.features is not None:
                from workbench.meta_schedule.feature_extractor.per_store.extractor import (
                    adopt_shipped_rows,
                )
                adopt_shipped_rows(self.features, item[2])
            return Schedule.from_snapshot(pickle.loads(item[1]))
        if item[0] == "replay":
            self.count_replay_failure(item[1])
        else:
            self.count_postproc_failure(item[1], item[2])
        return None

    def summary(self) -> str:
        lines = [f"Trace replay failures: {self.replay_failures}"]
        for i, (proc, n) in enumerate(zip(self.postprocs, self.postproc_failures)):
            lines.append(f"Postproc #{i} [{proc}]: {n} failure(s)")
        return "\n".join(lines)


class BuiltinStrategy(SearchStrategy):
    """Shared state handling for ReplayTrace / ReplayFunc / EvolutionarySearch."""

    def __init__(self) -> None:
        self.context: "TuneContext | None" = None
        self.postprocs: list["Postproc"] = []
        self.mutator_probs: dict["Mutator", float] = {}
        self.rand = RandomEngine(None)
        self.logger = logging.getLogger("workbench.meta_schedule")
        self.sample_failures = SampleFailures()
        self.replay_timing = ReplayTiming()
        self._tuning = False
        self.st = 0
        self.ed = 0
        self.max_trials = 0
        self.num_trials_per_iter = 0

    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        self.context = context
        gen = context.space_generator
        if gen is not None:
            self.postprocs = list(gen.postprocs or [])
            self.mutator_probs = dict(gen.mutator_probs or {})
        self.rand = RandomEngine(context.fork_seed())
        self.logger = context.logger

    def _check_initialized(self, what: str) -> "TuneContext":
        if self.context is None or self.context.mod is None:
            raise RuntimeError(f"{type(self).__name__}.{what}: the strategy is not initialized "
                               "with a TuneContext that has a mod; create it through "
                               "TuneContext(mod, ..., search_strategy=...)")
        return self.context

    def _start(self, max_trials: int, num_trials_per_iter: int, design_spaces: list) -> None:
        self._check_initialized("pre_tuning")
        if self._tuning:
            raise RuntimeError(f"{type(self).__name__}.pre_tuning: already tuning; call "
                               "post_tuning first")
        if max_trials < 0 or num_trials_per_iter <= 0:
            raise ValueError(f"pre_tuning: need max_trials >= 0 and num_trials_per_iter > 0, "
                             f"got {max_trials} and {num_trials_per_iter}")
        if not design_spaces:
            raise ValueError("pre_tuning: design_spaces is empty")
        self._tuning = True
        self.sample_failures = SampleFailures()
        self.replay_timing = ReplayTiming()
        self.st, self.ed = 0, num_trials_per_iter
        self.max_trials = max_trials
        self.num_trials_per_iter = num_trials_per_iter

    def _check_tuning(self, what: str) -> None:
        if not self._tuning:
            raise RuntimeError(f"{type(self).__name__}.{what}: pre_tuning has not been called "
                               "(or post_tuning already ended the search)")

    def post_tuning(self) -> None:
        self._check_tuning("post_tuning")
        self._tuning = False

    def _next_window(self) -> int | None:
        """How many candidates this round may propose, or None when the budget is spent."""
        if self.st >= self.max_trials:
            return None
        if self.ed > self.max_trials:
            self.ed = self.max_trials
        return self.ed - self.st

    def _candidates(self, schs: list[Schedule]) -> list[MeasureCandidate]:
        return [MeasureCandidate(s, ArgInfo.from_entry_func(s.mod, remove_preproc=True))
                for s in schs]

    def _applier(self) -> TraceApplier:
        """A TraceApplier for the task; with ``num_threads > 1`` in the context it may replay
        heavy batches in the shared replay pool (TVM replays on that many threads)."""
        pool = None
        n = getattr(self.context, "num_threads", 1) or 1
        if n > 1:
            from workbench.meta_schedule.search_strategy.replay_pool import get_replay_pool
            pool = get_replay_pool(n)
        return TraceApplier(self.context.mod, self.postprocs, pool, self.sample_failures,
                            self.replay_timing)

    def _config(self) -> dict[str, Any]:
        raise NotImplementedError

    def clone(self) -> "SearchStrategy":
        return type(self)(**self._config())


DecisionProvider = Callable[..., Any]
