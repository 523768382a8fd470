"""TVM's full per-store feature set (164 columns; 172 with the workload embedding).

Modules, one job each: :mod:`.preprocess` (lowering for feature extraction),
:mod:`.loop_context` (the loop nest walk), :mod:`.index_analysis` (affine indices and bounds),
:mod:`.arith_features` (group 1), :mod:`.buffer_access` (group 2), :mod:`.arith_intensity`
(group 3), :mod:`.allocation` (group 4), :mod:`.outer_product` (group 5), :mod:`.workload`
(group 6), :mod:`.collector` (the walk), :mod:`.extractor` (the public extractor),
:mod:`.names` (column names).
"""
from workbench.meta_schedule.feature_extractor.per_store.extractor import (
    PerStoreFeature, RowInfo, describe_rows, extract_features,
)
from workbench.meta_schedule.feature_extractor.per_store.names import (
    FEATURE_NAMES, FEATURE_NAMES_WITH_WORKLOAD, feature_names,
)
from workbench.meta_schedule.feature_extractor.per_store.preprocess import (
    FEATURE_PASSES, lower_for_features,
)

__all__ = ["FEATURE_NAMES", "FEATURE_NAMES_WITH_WORKLOAD", "FEATURE_PASSES",
           "PerStoreFeature", "RowInfo", "describe_rows", "extract_features", "feature_names",
           "lower_for_features"]
