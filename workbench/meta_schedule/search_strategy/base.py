"""What the built-in strategies share: the captured context, the lifecycle checks, the trial
window ``[st, ed)``, and replaying a trace with postprocessing (TVM's ThreadedTraceApply)."""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Callable

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
    from workbench.meta_schedule.tune_context import TuneContext


def _drop_decision(inst: Any, inputs: Any, attrs: Any, decision: Any) -> Any:
    return None


class TraceApplier:
    """Replays traces onto fresh schedules of one workload and runs the postprocessors,
    counting why candidates fail (replay errors, then the first postproc that refused)."""

    def __init__(self, mod: IRModule, postprocs: list["Postproc"]) -> None:
        self.mod = mod
        self.postprocs = postprocs
        self.replay_failures = 0
        self.postproc_failures = [0] * len(postprocs)

    def apply(self, trace: Trace, seed: int, keep_decisions: bool = True) -> Schedule | None:
        sch = Schedule(self.mod, seed=seed)
        try:
            trace.apply_to_schedule(sch, remove_postproc=True,
                                    decision_provider=None if keep_decisions else _drop_decision)
        except Exception:  # noqa: BLE001 - any replay error just rejects this sample
            self.replay_failures += 1
            return None
        sch.enter_postproc()
        for i, proc in enumerate(self.postprocs):
            try:
                ok = proc.apply(sch)
            except Exception:  # noqa: BLE001 - a raising postproc rejects the sample (as TVM)
                ok = False
            if not ok:
                self.postproc_failures[i] += 1
                return None
        return sch

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
        return TraceApplier(self.context.mod, self.postprocs)

    def _config(self) -> dict[str, Any]:
        raise NotImplementedError

    def clone(self) -> "SearchStrategy":
        return type(self)(**self._config())


DecisionProvider = Callable[..., Any]
