"""FeatureExtractor: turns measure candidates into feature matrices for the cost model.

``extract_from(context, candidates) -> list[np.ndarray]``: one 2-D float32 array per
candidate (one row per feature "store", columns fixed by the extractor).
``FeatureExtractor.create("per-store-feature", **kwargs)`` makes :class:`PerStoreFeature`.
"""
from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.search_strategy import MeasureCandidate
    from workbench.meta_schedule.tune_context import TuneContext

__all__ = ["FeatureExtractor", "PyFeatureExtractor"]


class FeatureExtractor(abc.ABC):
    @abc.abstractmethod
    def extract_from(self, context: "TuneContext",
                     candidates: list["MeasureCandidate"]) -> list[np.ndarray]:
        """One (rows x features) array per candidate."""

    def __str__(self) -> str:
        return type(self).__name__

    @staticmethod
    def create(kind: str = "per-store-feature", *args: Any, **kwargs: Any) -> "FeatureExtractor":
        if isinstance(kind, FeatureExtractor):
            return kind
        if kind == "per-store-feature":
            from workbench.meta_schedule.feature_extractor.per_store import PerStoreFeature
            return PerStoreFeature(*args, **kwargs)
        raise ValueError(f"FeatureExtractor.create: unknown kind {kind!r}; expected "
                         "'per-store-feature'")


class PyFeatureExtractor(FeatureExtractor):
    """Base for user extractors (decorate with ``@derived_object``): implement
    ``extract_from``."""

    _tvm_metadata = {"cls": FeatureExtractor, "methods": ["extract_from", "__str__"]}
