"""Training data shared by the learned cost models (reference section 8.1).

Samples are grouped per task workload (``shash2hex(ctx.mod)``). A sample's cost is the
**median** of its run_secs, or 1e10 for a failed run; its label is the group's
``min_cost / cost``: throughput relative to the best seen so far, in (0, 1], recomputed at
every retrain so the normalisation follows the current best.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from workbench.meta_schedule.utils import median

FAILED_COST = 1e10


def cost_of(result: Any) -> float:
    if getattr(result, "error_msg", None) is not None or not getattr(result, "run_secs", None):
        return FAILED_COST
    return median(result.run_secs)


@dataclass
class FeatureGroup:
    features: list[np.ndarray] = field(default_factory=list)
    costs: list[float] = field(default_factory=list)

    def append(self, feats: Sequence[np.ndarray], costs: Sequence[float]) -> None:
        self.features.extend(feats)
        self.costs.extend(float(c) for c in costs)

    @property
    def min_cost(self) -> float:
        return min(self.costs) if self.costs else FAILED_COST

    def labels(self) -> np.ndarray:
        costs = np.asarray(self.costs, dtype="float64")
        with np.errstate(divide="ignore"):
            out = np.where(costs > 0, self.min_cost / np.where(costs > 0, costs, 1.0), 0.0)
        return out


def pack(features: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Stack per-candidate matrices into rows; ``ids[row]`` is the candidate index."""
    if not features:
        return np.zeros((0, 0), "float32"), np.zeros(0, "int64")
    rows = np.concatenate([f for f in features], axis=0).astype("float32")
    ids = np.concatenate([np.full(len(f), i, "int64") for i, f in enumerate(features)])
    return rows, ids


def pack_sum(pred_rows: np.ndarray, ids: np.ndarray, n: int) -> np.ndarray:
    """A candidate's score is the sum of its rows' predictions."""
    return np.bincount(ids, weights=pred_rows, minlength=n)
