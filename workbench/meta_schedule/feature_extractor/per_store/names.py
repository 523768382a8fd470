"""Names of the per-store feature columns, for debugging and DataFrames.

``FEATURE_NAMES`` (164) is TVM's default layout; :func:`feature_names` builds it for other
settings. Buffer columns are ``B<k>.<name>`` for the k-th buffer in TVM's sort order.
"""
from __future__ import annotations

from workbench.meta_schedule.feature_extractor.per_store.allocation import ALLOCATION_NAMES
from workbench.meta_schedule.feature_extractor.per_store.arith_features import group1_names
from workbench.meta_schedule.feature_extractor.per_store.arith_intensity import group3_names
from workbench.meta_schedule.feature_extractor.per_store.buffer_access import (
    BUFFER_FEATURE_NAMES,
)
from workbench.meta_schedule.feature_extractor.per_store.outer_product import OUTER_NAMES
from workbench.meta_schedule.feature_extractor.per_store.workload import WORKLOAD_NAMES


def feature_names(buffers_per_store: int = 5, arith_intensity_curve_num_samples: int = 10,
                  extract_workload: bool = False) -> list[str]:
    """Column names in export order: groups 1, 2, 3, 4, 5 (and 6 with ``extract_workload``)."""
    names = group1_names()
    for k in range(buffers_per_store):
        names += [f"B{k}.{n}" for n in BUFFER_FEATURE_NAMES]
    names += group3_names(arith_intensity_curve_num_samples)
    names += list(ALLOCATION_NAMES) + list(OUTER_NAMES)
    if extract_workload:
        names += list(WORKLOAD_NAMES)
    return names


FEATURE_NAMES: tuple[str, ...] = tuple(feature_names())
FEATURE_NAMES_WITH_WORKLOAD: tuple[str, ...] = tuple(feature_names(extract_workload=True))

__all__ = ["FEATURE_NAMES", "FEATURE_NAMES_WITH_WORKLOAD", "feature_names"]
