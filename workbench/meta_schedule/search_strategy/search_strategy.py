"""SearchStrategy: proposes batches of schedules to measure (TVM's ``SearchStrategy``).

Lifecycle, enforced by the built-in strategies (a violation raises ``RuntimeError`` naming the
step that is missing)::

    strategy._initialize_with_tune_context(ctx)   # done by TuneContext
    strategy.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)
    while (cands := strategy.generate_measure_candidates()) is not None:
        ...measure...
        strategy.notify_runner_results(cands, runner_results)
    strategy.post_tuning()

``SearchStrategy.create(kind)``: ``"evolutionary"`` (default), ``"replay-trace"``,
``"replay-func"``; extra arguments go to the class.
"""
from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, Sequence, Union

from workbench.meta_schedule.arg_info import ArgInfo
from workbench.tir.schedule import Schedule

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.cost_model import CostModel
    from workbench.meta_schedule.database import Database
    from workbench.meta_schedule.runner import RunnerResult
    from workbench.meta_schedule.tune_context import TuneContext

__all__ = ["MeasureCandidate", "SearchStrategy", "PySearchStrategy", "SearchStrategyType"]


class MeasureCandidate:
    """A schedule to measure and the arguments its function takes."""

    __slots__ = ("sch", "args_info")

    def __init__(self, sch: Schedule, args_info: Sequence[ArgInfo]) -> None:
        if not isinstance(sch, Schedule):
            raise TypeError(f"MeasureCandidate: sch must be a Schedule, got {sch!r}")
        self.sch = sch
        self.args_info = list(args_info)

    def __repr__(self) -> str:
        return f"MeasureCandidate({self.sch!r}, args_info={self.args_info})"


SearchStrategyType = Union["SearchStrategy", str]


class SearchStrategy(abc.ABC):
    """Abstract search strategy (see the module docstring)."""

    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        """Take what the strategy needs from the context (postprocs, mutators, seed)."""

    @abc.abstractmethod
    def pre_tuning(self, max_trials: int, num_trials_per_iter: int,
                   design_spaces: list[Schedule], database: "Database | None" = None,
                   cost_model: "CostModel | None" = None) -> None:
        """Prepare a search over ``design_spaces`` for at most ``max_trials`` trials."""

    @abc.abstractmethod
    def post_tuning(self) -> None:
        """Drop the search state."""

    @abc.abstractmethod
    def generate_measure_candidates(self) -> list[MeasureCandidate] | None:
        """The next batch (possibly empty), or None when the search is finished."""

    @abc.abstractmethod
    def notify_runner_results(self, measure_candidates: list[MeasureCandidate],
                              results: list["RunnerResult"]) -> None:
        """Tell the strategy how a batch ran."""

    @abc.abstractmethod
    def clone(self) -> "SearchStrategy":
        """A fresh strategy with the same configuration."""

    @staticmethod
    def create(kind: Any = "evolutionary", *args: Any, **kwargs: Any) -> "SearchStrategy":
        """"evolutionary" | "replay-trace" | "replay-func" (module docstring)."""
        from workbench.meta_schedule.search_strategy.evolutionary_search import (
            EvolutionarySearch,
        )
        from workbench.meta_schedule.search_strategy.replay_func import ReplayFunc
        from workbench.meta_schedule.search_strategy.replay_trace import ReplayTrace
        if isinstance(kind, SearchStrategy):
            return kind
        makers = {"evolutionary": EvolutionarySearch, "replay-trace": ReplayTrace,
                  "replay-func": ReplayFunc}
        if kind not in makers:
            raise ValueError(f"SearchStrategy.create: unknown kind {kind!r}; expected one of "
                             f"{', '.join(makers)}")
        return makers[kind](*args, **kwargs)


class PySearchStrategy(SearchStrategy):
    """Base for user strategies (decorate with ``@derived_object``): implement the lifecycle
    methods and ``clone``."""

    _tvm_metadata = {"cls": SearchStrategy,
                     "methods": ["_initialize_with_tune_context", "pre_tuning", "post_tuning",
                                 "generate_measure_candidates", "notify_runner_results",
                                 "clone"]}
