"""ReplayTrace: random search by replaying a random design space's trace with every decision
dropped (so samplers draw afresh), then postprocessing (reference section 7.3)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.meta_schedule.profiler import Profiler
from workbench.meta_schedule.search_strategy.base import BuiltinStrategy, TraceApplier
from workbench.meta_schedule.search_strategy.search_strategy import MeasureCandidate
from workbench.tir.schedule import Schedule

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.runner import RunnerResult


class ReplayTrace(BuiltinStrategy):
    """No cost model, no deduplication; ``max_fail_count`` attempts per slot."""

    def __init__(self, max_fail_count: int = 100) -> None:
        super().__init__()
        self.max_fail_count = max_fail_count
        self._traces: list = []
        self._applier_obj: TraceApplier | None = None

    def _config(self) -> dict[str, Any]:
        return {"max_fail_count": self.max_fail_count}

    def pre_tuning(self, max_trials: int, num_trials_per_iter: int,
                   design_spaces: list[Schedule], database: Any = None,
                   cost_model: Any = None) -> None:
        self._start(max_trials, num_trials_per_iter, design_spaces)
        self._traces = [s.trace.simplified(remove_postproc=True) for s in design_spaces]
        self._applier_obj = self._applier()

    def post_tuning(self) -> None:
        super().post_tuning()
        self._traces = []

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        self._check_tuning("generate_measure_candidates")
        num = self._next_window()
        if num is None:
            return None
        out: list[Schedule] = []
        with Profiler.timeit("ReplayTrace/Sample"):
            for _ in range(num):
                for _attempt in range(self.max_fail_count):
                    trace = self._traces[self.rand.randint(0, len(self._traces))]
                    sch = self._applier_obj.apply(trace, self.rand.fork_seed(),
                                                  keep_decisions=False)
                    if sch is not None:
                        out.append(sch)
                        break
        return self._candidates(out)

    def notify_runner_results(self, measure_candidates: list[MeasureCandidate],
                              results: list["RunnerResult"]) -> None:
        self._check_tuning("notify_runner_results")
        # TVM advances by a whole iteration, so failed slots still use up the budget.
        self.st += self.num_trials_per_iter
        self.ed += self.num_trials_per_iter
