"""ReplayFunc: re-run the space generator for every slot (its schedule function or rules
sample afresh), pick one space, and postprocess it (reference section 7.4)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.meta_schedule.profiler import Profiler
from workbench.meta_schedule.search_strategy.base import BuiltinStrategy
from workbench.meta_schedule.search_strategy.search_strategy import MeasureCandidate
from workbench.tir.schedule import Schedule

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.runner import RunnerResult

# TVM retries a slot forever; a bounded retry keeps a generator that always fails from
# hanging the tuner (the slot is dropped instead).
MAX_ATTEMPTS_PER_SLOT = 100


class ReplayFunc(BuiltinStrategy):
    def __init__(self) -> None:
        super().__init__()

    def _config(self) -> dict[str, Any]:
        return {}

    def pre_tuning(self, max_trials: int, num_trials_per_iter: int,
                   design_spaces: list[Schedule], database: Any = None,
                   cost_model: Any = None) -> None:
        self._start(max_trials, num_trials_per_iter, design_spaces)
        if self.context.space_generator is None:
            raise ValueError("ReplayFunc needs the TuneContext's space_generator")

    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        self._check_tuning("generate_measure_candidates")
        num = self._next_window()
        if num is None:
            return None
        ctx = self.context
        out: list[Schedule] = []
        with Profiler.timeit("ReplayFunc/Sample"):
            for _ in range(num):
                for _attempt in range(MAX_ATTEMPTS_PER_SLOT):
                    spaces = ctx.space_generator.generate_design_space(ctx.mod)
                    sch = spaces[self.rand.randint(0, len(spaces))].copy()
                    sch.enter_postproc()
                    if all(self._safe_apply(p, sch) for p in self.postprocs):
                        out.append(sch)
                        break
        return self._candidates(out)

    @staticmethod
    def _safe_apply(proc: Any, sch: Schedule) -> bool:
        try:
            return bool(proc.apply(sch))
        except Exception:  # noqa: BLE001 - a raising postproc rejects the sample
            return False

    def notify_runner_results(self, measure_candidates: list[MeasureCandidate],
                              results: list["RunnerResult"]) -> None:
        self._check_tuning("notify_runner_results")
        # An empty batch still advances a whole iteration, so a failing space cannot loop.
        step = len(results) or self.num_trials_per_iter
        self.st += step
        self.ed += step
