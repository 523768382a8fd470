"""Group 5 (3 features): the loop nest around a store as a whole (TVM's group 5).

``[slog(product of the constant loop extents), slog(number of loops),
slog(pragma_auto_unroll_max_step of the innermost enclosing loop carrying one, else 0)]``.
"""
from __future__ import annotations

from workbench.meta_schedule.feature_extractor.per_store.loop_context import LoopNest, slog

OUTER_NAMES = ("outer_prod", "num_loops", "auto_unroll_max_step")


def group5_features(nest: LoopNest) -> list[float]:
    step = nest.auto_unroll[-1] if nest.auto_unroll else 0
    return [slog(nest.prod), slog(len(nest.frames)), slog(step)]


__all__ = ["OUTER_NAMES", "group5_features"]
