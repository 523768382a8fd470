"""CostModel: predicts how fast candidates will run (higher = faster, a normalised score).

``update(context, candidates, results)`` learns from measurements; ``predict(context,
candidates) -> np.ndarray`` scores unmeasured ones; ``save(path)`` / ``load(path)`` persist.
``CostModel.create(kind)``: ``"xgb"`` (:class:`XGBModel`), ``"mlp"`` (:class:`MLPModel`),
``"random"`` (:class:`RandomModel`), ``"none"`` (returns None: no model, as TVM).
"""
from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.runner import RunnerResult
    from workbench.meta_schedule.search_strategy import MeasureCandidate
    from workbench.meta_schedule.tune_context import TuneContext

__all__ = ["CostModel", "PyCostModel"]


class CostModel(abc.ABC):
    def load(self, path: str) -> None:
        """Load the model from ``path``."""
        raise NotImplementedError(f"{type(self).__name__}.load")

    def save(self, path: str) -> None:
        """Save the model to ``path``."""
        raise NotImplementedError(f"{type(self).__name__}.save")

    @abc.abstractmethod
    def update(self, context: "TuneContext", candidates: list["MeasureCandidate"],
               results: list["RunnerResult"]) -> None:
        """Learn from measured candidates."""

    @abc.abstractmethod
    def predict(self, context: "TuneContext",
                candidates: list["MeasureCandidate"]) -> np.ndarray:
        """One float64 score per candidate (higher means faster)."""

    def informed(self, context: "TuneContext | None" = None) -> bool:
        """Whether ``predict`` ranks candidates by what the model learnt. False while its
        scores are noise (the random model; XGB / MLP before ``num_warmup_samples``
        measurements): a search then samples at random instead of evolving against noise.
        ``context`` (the task being searched) lets a model answer per target (XGB's
        pretrained models are per vector ISA)."""
        return True

    def __str__(self) -> str:
        return type(self).__name__

    @staticmethod
    def create(kind: Any, *args: Any, **kwargs: Any) -> "CostModel | None":
        if isinstance(kind, CostModel):
            return kind
        if kind == "xgb":
            from workbench.meta_schedule.cost_model.xgb_model import XGBModel
            return XGBModel(*args, **kwargs)
        kwargs.pop("num_tuning_cores", None)
        if kind == "random":
            from workbench.meta_schedule.cost_model.random_model import RandomModel
            return RandomModel(*args, **kwargs)
        if kind == "mlp":
            from workbench.meta_schedule.cost_model.mlp_model import MLPModel
            return MLPModel(*args, **kwargs)
        if kind == "none":
            return None
        raise ValueError(f"CostModel.create: unknown kind {kind!r}; expected 'xgb', 'mlp', "
                         "'random' or 'none'")


class PyCostModel(CostModel):
    """Base for user cost models (decorate with ``@derived_object``): implement ``update``,
    ``predict``, ``load`` and ``save``."""

    _tvm_metadata = {"cls": CostModel,
                     "methods": ["load", "save", "update", "predict", "__str__"]}
