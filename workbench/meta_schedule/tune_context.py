"""TuneContext: everything one tuning task needs (TVM's ``meta_schedule.TuneContext``).

Holds the workload ``mod`` (an IRModule with a ``main`` PrimFunc), the ``target``, the
``space_generator`` and ``search_strategy``, the task name, a random state, the thread count
and a logger. Construction *initializes* the generator and strategy with the context (they
fill target defaults and fork their random states from it); ``clone()`` deep-copies both,
forks the seed and initializes the copies, which is how ``tune_tir`` gives every task its own
independent state.

The search lifecycle is forwarded to the strategy: ``pre_tuning`` ->
``generate_measure_candidates`` / ``notify_runner_results`` (repeated) -> ``post_tuning``.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Sequence

from workbench.ir.module import IRModule
from workbench.meta_schedule.search_strategy import SearchStrategy
from workbench.meta_schedule.space_generator import SpaceGenerator
from workbench.meta_schedule.utils import get_num_threads, normalize_mod
from workbench.target import Target
from workbench.tir.schedule import Schedule
from workbench.tir.schedule.handles import RandomEngine

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.cost_model import CostModel
    from workbench.meta_schedule.database import Database
    from workbench.meta_schedule.runner import RunnerResult
    from workbench.meta_schedule.search_strategy import MeasureCandidate

__all__ = ["TuneContext"]


class TuneContext:
    """A tuning task's resources (see the module docstring)."""

    def __init__(self, mod: Any = None, *, target: Target | str | dict | None = None,
                 space_generator: Any = None, search_strategy: Any = None,
                 task_name: str = "main", rand_state: int = -1,
                 num_threads: int | str = "physical",
                 logger: logging.Logger | None = None) -> None:
        self.mod: IRModule | None = None if mod is None else normalize_mod(mod)
        self.target: Target | None = target if target is None or isinstance(target, Target) \
            else Target(target)
        self.space_generator: SpaceGenerator | None = \
            None if space_generator is None else SpaceGenerator.create(space_generator)
        self.search_strategy: SearchStrategy | None = \
            None if search_strategy is None else SearchStrategy.create(search_strategy)
        self.task_name = task_name
        if not isinstance(rand_state, int):
            raise TypeError(f"TuneContext: rand_state must be an int, got {rand_state!r}")
        self._rand = RandomEngine(None if rand_state == -1 else rand_state)
        self.rand_state = self._rand.state
        self.num_threads = get_num_threads(num_threads)
        self.logger = logger if logger is not None else \
            logging.getLogger("workbench.meta_schedule")
        self._initialize()

    def _initialize(self) -> None:
        if self.space_generator is not None:
            self.space_generator._initialize_with_tune_context(self)
        if self.search_strategy is not None:
            self.search_strategy._initialize_with_tune_context(self)

    def fork_seed(self) -> int:
        """A new seed drawn from this context's random state (for its components)."""
        return self._rand.fork_seed()

    # -- forwarding ----------------------------------------------------------------------------
    def generate_design_space(self) -> list[Schedule]:
        """``space_generator.generate_design_space(mod)``."""
        if self.mod is None:
            raise ValueError("TuneContext.generate_design_space: the context has no mod")
        if self.space_generator is None:
            raise ValueError("TuneContext.generate_design_space: the context has no "
                             "space_generator")
        return self.space_generator.generate_design_space(self.mod)

    def pre_tuning(self, max_trials: int, num_trials_per_iter: int = 64,
                   design_spaces: Sequence[Schedule] | None = None,
                   database: "Database | None" = None,
                   cost_model: "CostModel | None" = None) -> None:
        """``search_strategy.pre_tuning(...)``; design spaces default to
        :meth:`generate_design_space`."""
        strategy = self._strategy("pre_tuning")
        if design_spaces is None:
            design_spaces = self.generate_design_space()
        strategy.pre_tuning(max_trials, num_trials_per_iter, list(design_spaces), database,
                            cost_model)

    def post_tuning(self) -> None:
        self._strategy("post_tuning").post_tuning()

    def generate_measure_candidates(self) -> "list[MeasureCandidate] | None":
        return self._strategy("generate_measure_candidates").generate_measure_candidates()

    def notify_runner_results(self, measure_candidates: "Sequence[MeasureCandidate]",
                              results: "Sequence[RunnerResult]") -> None:
        self._strategy("notify_runner_results").notify_runner_results(
            list(measure_candidates), list(results))

    def _strategy(self, what: str) -> "SearchStrategy":
        if self.search_strategy is None:
            raise ValueError(f"TuneContext.{what}: the context has no search_strategy")
        return self.search_strategy

    # -- cloning -------------------------------------------------------------------------------
    def clone(self) -> "TuneContext":
        """Deep-copy the generator and strategy, fork the seed, and initialize the copy."""
        new = object.__new__(TuneContext)
        new.mod = self.mod
        new.target = self.target
        new.space_generator = None if self.space_generator is None else \
            self.space_generator.clone()
        new.search_strategy = None if self.search_strategy is None else \
            self.search_strategy.clone()
        new.task_name = self.task_name
        new._rand = RandomEngine(self.fork_seed())
        new.rand_state = new._rand.state
        new.num_threads = self.num_threads
        new.logger = self.logger
        new._initialize()
        return new

    def __deepcopy__(self, memo: dict) -> "TuneContext":
        # Components keep no back-reference to the context, so a deep copy is a clone.
        return self.clone()

    def __repr__(self) -> str:
        return (f"TuneContext(task_name={self.task_name!r}, target={self.target!r}, "
                f"space_generator={type(self.space_generator).__name__}, "
                f"search_strategy={type(self.search_strategy).__name__})")

