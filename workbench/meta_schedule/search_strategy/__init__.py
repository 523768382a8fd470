"""Search strategies (TVM's ``meta_schedule.search_strategy``). See :mod:`.search_strategy`."""
from workbench.meta_schedule.search_strategy.evolutionary_search import EvolutionarySearch
from workbench.meta_schedule.search_strategy.replay_func import ReplayFunc
from workbench.meta_schedule.search_strategy.replay_trace import ReplayTrace
from workbench.meta_schedule.search_strategy.search_strategy import (
    MeasureCandidate, PySearchStrategy, SearchStrategy,
)

__all__ = ["MeasureCandidate", "SearchStrategy", "PySearchStrategy", "ReplayTrace",
           "ReplayFunc", "EvolutionarySearch"]
