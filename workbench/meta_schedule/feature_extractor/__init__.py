"""Feature extractors (TVM's ``meta_schedule.feature_extractor``)."""
from workbench.meta_schedule.feature_extractor.feature_extractor import (
    FeatureExtractor, PyFeatureExtractor,
)
from workbench.meta_schedule.feature_extractor.per_store import PerStoreFeature

__all__ = ["FeatureExtractor", "PyFeatureExtractor", "PerStoreFeature"]
