"""Cost-model accuracy metrics (Workbench; TVM's ``cost_model/metric.py`` has ``max_curve``).

:func:`evaluate_rank_correlation` compares a model's predicted scores (higher = faster) with
measured run times on candidates the model has not been trained on: the Spearman and Kendall
(tau-b) rank correlations of the predicted score against the measured *throughput*
(``1 / cost``), so +1 means the model ranks the candidates exactly as measured, 0 means no
better than chance. Failed runs (cost ``1e10``) are left out.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Sequence

import numpy as np

from workbench.meta_schedule.cost_model.dataset import FAILED_COST, cost_of

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.cost_model.cost_model import CostModel
    from workbench.meta_schedule.runner import RunnerResult
    from workbench.meta_schedule.search_strategy import MeasureCandidate
    from workbench.meta_schedule.tune_context import TuneContext

__all__ = ["RankCorrelation", "evaluate_rank_correlation", "rank_correlation", "max_curve"]


class RankCorrelation(NamedTuple):
    spearman: float
    kendall: float
    n: int

    def __str__(self) -> str:
        return f"spearman={self.spearman:.4f} kendall={self.kendall:.4f} (n={self.n})"


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean rank), 0-based."""
    order = np.argsort(x, kind="mergesort")
    xs = x[order]
    ranks = np.empty(len(x), dtype="float64")
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and xs[j + 1] == xs[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0
        i = j + 1
    return ranks


def rank_correlation(pred: Sequence[float], truth: Sequence[float]) -> RankCorrelation:
    """Spearman's rho and Kendall's tau-b of two equally long sequences (nan when undefined:
    fewer than 2 items or a constant side)."""
    a = np.asarray(pred, dtype="float64").ravel()
    b = np.asarray(truth, dtype="float64").ravel()
    if a.shape != b.shape:
        raise ValueError(f"rank_correlation: {a.size} predictions but {b.size} measurements")
    n = int(a.size)
    if n < 2:
        return RankCorrelation(float("nan"), float("nan"), n)
    ra, rb = _ranks(a), _ranks(b)
    sa, sb = ra.std(), rb.std()
    rho = float(np.mean((ra - ra.mean()) * (rb - rb.mean())) / (sa * sb)) \
        if sa > 0 and sb > 0 else float("nan")
    da = np.sign(a[:, None] - a[None, :])
    db = np.sign(b[:, None] - b[None, :])
    iu = np.triu_indices(n, 1)
    da, db = da[iu], db[iu]
    n0 = da.size
    ta, tb = n0 - np.count_nonzero(da), n0 - np.count_nonzero(db)
    denom = np.sqrt(float(n0 - ta) * float(n0 - tb))
    tau = float(np.sum(da * db) / denom) if denom > 0 else float("nan")
    return RankCorrelation(rho, tau, n)


def evaluate_rank_correlation(model: "CostModel", context: "TuneContext",
                              candidates: Sequence["MeasureCandidate"],
                              results: Sequence["RunnerResult"]) -> RankCorrelation:
    """Rank correlation of ``model.predict(context, candidates)`` with the measured
    throughput of ``results`` (one per candidate). Use held-out candidates (measured but not
    yet passed to ``model.update``) for an honest number. Failed runs are ignored."""
    if len(candidates) != len(results):
        raise ValueError(f"evaluate_rank_correlation: {len(candidates)} candidates but "
                         f"{len(results)} results")
    costs = np.array([cost_of(r) for r in results], dtype="float64")
    ok = np.nonzero((costs < FAILED_COST) & (costs > 0))[0]
    if len(ok) < 2:
        return RankCorrelation(float("nan"), float("nan"), int(len(ok)))
    pred = np.asarray(model.predict(context, [candidates[i] for i in ok]), dtype="float64")
    return rank_correlation(pred, 1.0 / costs[ok])


def max_curve(trial_scores: Any) -> np.ndarray:
    """TVM's ``max_curve``: the running maximum of the scores."""
    return np.maximum.accumulate(np.asarray(trial_scores, dtype="float64"))
