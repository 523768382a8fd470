"""RandomModel: uniform random scores in ``[0, max_range)``; ``update`` learns nothing. The
default model of a search started without one."""
from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

import numpy as np

from workbench.meta_schedule.cost_model.cost_model import CostModel

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.tune_context import TuneContext


class RandomModel(CostModel):
    def __init__(self, *, seed: int | None = None, path: str | None = None,
                 max_range: int = 100) -> None:
        self.random_state = np.random.RandomState(seed)
        self.max_range = max_range
        if path is not None:
            self.load(path)

    def load(self, path: str) -> None:
        with open(path, "rb") as f:
            self.random_state.set_state(pickle.load(f))

    def save(self, path: str) -> None:
        with open(path, "wb") as f:
            pickle.dump(self.random_state.get_state(), f)

    def update(self, context: Any, candidates: list, results: list) -> None:
        pass

    def informed(self, context: "TuneContext | None" = None) -> bool:
        return False

    def predict(self, context: Any, candidates: list) -> np.ndarray:
        return self.random_state.uniform(size=len(candidates)) * self.max_range
