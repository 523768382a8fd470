"""MLPModel: a small numpy "segment-sum" MLP ranked with a pairwise loss.

TVM's MLP (reference section 8.2) needs torch; Workbench keeps the idea in numpy: a per-row
encoder ``relu(x W1 + b1) -> relu(. W2 + b2)``, a **segment sum** over a candidate's rows, a
linear head to one score, trained with a pairwise logistic (RankNet) loss on pairs within a
workload group whose labels (``min_cost / cost``) differ, with Adam. Features are divided by
their per-column maximum over the training data. Until ``num_warmup_samples`` samples exist,
``predict`` returns uniform noise (as the XGB model).
"""
from __future__ import annotations

import pickle
from typing import TYPE_CHECKING, Any

import numpy as np

from workbench.meta_schedule.cost_model.cost_model import CostModel
from workbench.meta_schedule.cost_model.dataset import FeatureGroup, cost_of, pack
from workbench.meta_schedule.feature_extractor import FeatureExtractor
from workbench.meta_schedule.utils import shash2hex

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.runner import RunnerResult
    from workbench.meta_schedule.search_strategy import MeasureCandidate
    from workbench.meta_schedule.tune_context import TuneContext


class _Net:
    """Parameters and the forward/backward pass of the segment-sum MLP."""

    def __init__(self, n_in: int, hidden: int, rng: np.random.RandomState) -> None:
        def init(a: int, b: int) -> np.ndarray:
            return rng.normal(0, np.sqrt(2.0 / a), size=(a, b))
        self.p = {"W1": init(n_in, hidden), "b1": np.zeros(hidden),
                  "W2": init(hidden, hidden), "b2": np.zeros(hidden),
                  "W3": init(hidden, 1), "b3": np.zeros(1)}

    def forward(self, x: np.ndarray, ids: np.ndarray, n: int) -> tuple[np.ndarray, dict]:
        p = self.p
        z1 = x @ p["W1"] + p["b1"]
        h1 = np.maximum(z1, 0)
        z2 = h1 @ p["W2"] + p["b2"]
        h2 = np.maximum(z2, 0)
        seg = np.zeros((n, h2.shape[1]))
        np.add.at(seg, ids, h2)
        out = (seg @ p["W3"] + p["b3"]).ravel()
        return out, {"x": x, "z1": z1, "h1": h1, "z2": z2, "seg": seg}

    def backward(self, dout: np.ndarray, cache: dict, ids: np.ndarray) -> dict:
        p = self.p
        g = {"W3": cache["seg"].T @ dout[:, None], "b3": np.array([dout.sum()])}
        dseg = dout[:, None] @ p["W3"].T
        dh2 = dseg[ids]
        dz2 = dh2 * (cache["z2"] > 0)
        g["W2"] = cache["h1"].T @ dz2
        g["b2"] = dz2.sum(0)
        dz1 = (dz2 @ p["W2"].T) * (cache["z1"] > 0)
        g["W1"] = cache["x"].T @ dz1
        g["b1"] = dz1.sum(0)
        return g


def _pairwise_grad(scores: np.ndarray, labels: np.ndarray, groups: np.ndarray
                   ) -> tuple[float, np.ndarray]:
    """RankNet loss over pairs of one group with label_i > label_j, and d loss / d score."""
    diff_l = labels[:, None] - labels[None, :]
    same = groups[:, None] == groups[None, :]
    mask = (diff_l > 0) & same
    if not mask.any():
        return 0.0, np.zeros_like(scores)
    s = scores[:, None] - scores[None, :]
    sig = 1.0 / (1.0 + np.exp(np.clip(s, -30, 30)))  # d/ds of log(1 + exp(-s)) is -sig
    w = mask / mask.sum()
    loss = float(np.sum(w * np.logaddexp(0, -s)))
    grad = -(w * sig).sum(1) + (w * sig).sum(0)
    return loss, grad


class MLPModel(CostModel):
    def __init__(self, *, extractor: Any = "per-store-feature", hidden: int = 64,
                 epochs: int = 50, learning_rate: float = 3e-3, num_warmup_samples: int = 0,
                 seed: int = 0) -> None:
        self.extractor = FeatureExtractor.create(extractor)
        self.hidden = hidden
        self.epochs = epochs
        self.learning_rate = learning_rate
        self.num_warmup_samples = num_warmup_samples
        self.data: dict[str, FeatureGroup] = {}
        self.data_size = 0
        self.net: _Net | None = None
        self.scale: np.ndarray | None = None
        self._rng = np.random.RandomState(seed)

    def save(self, path: str) -> None:
        with open(path, "wb") as f:
            pickle.dump({"net": None if self.net is None else self.net.p, "scale": self.scale,
                         "data": {k: (g.features, g.costs) for k, g in self.data.items()}}, f)

    def load(self, path: str) -> None:
        with open(path, "rb") as f:
            state = pickle.load(f)
        self.data = {}
        for k, (feats, costs) in state["data"].items():
            g = FeatureGroup()
            g.append(feats, costs)
            self.data[k] = g
        self.data_size = sum(len(g.costs) for g in self.data.values())
        self.scale = state["scale"]
        if state["net"] is not None:
            self.net = _Net(1, 1, self._rng)
            self.net.p = state["net"]

    def update(self, context: "TuneContext", candidates: list["MeasureCandidate"],
               results: list["RunnerResult"]) -> None:
        if not candidates:
            return
        feats = self.extractor.extract_from(context, candidates)
        pairs = [(f, cost_of(r)) for f, r in zip(feats, results) if len(f) > 0]
        if not pairs:
            return
        group = self.data.setdefault(shash2hex(context.mod), FeatureGroup())
        group.append([f for f, _ in pairs], [c for _, c in pairs])
        self.data_size += len(pairs)
        self._train()

    def _train(self) -> None:
        feats, labels, groups = [], [], []
        for gi, group in enumerate(self.data.values()):
            feats.extend(group.features)
            labels.extend(group.labels())
            groups.extend([gi] * len(group.costs))
        rows, ids = pack(feats)
        self.scale = np.maximum(np.abs(rows).max(0), 1e-6)
        x = rows / self.scale
        ys, gs, n = np.asarray(labels), np.asarray(groups), len(feats)
        if self.net is None or self.net.p["W1"].shape[0] != x.shape[1]:
            self.net = _Net(x.shape[1], self.hidden, self._rng)
        m = {k: np.zeros_like(v) for k, v in self.net.p.items()}
        v = {k: np.zeros_like(val) for k, val in self.net.p.items()}
        b1, b2, eps = 0.9, 0.999, 1e-8
        for t in range(1, self.epochs + 1):
            scores, cache = self.net.forward(x, ids, n)
            _, dscore = _pairwise_grad(scores, ys, gs)
            grads = self.net.backward(dscore, cache, ids)
            norm = np.sqrt(sum(float(np.sum(g * g)) for g in grads.values()))
            clip = 0.5 / norm if norm > 0.5 else 1.0  # gradient-norm clip, as TVM's MLP
            for k, g in grads.items():
                g = g * clip
                m[k] = b1 * m[k] + (1 - b1) * g
                v[k] = b2 * v[k] + (1 - b2) * g * g
                mh, vh = m[k] / (1 - b1 ** t), v[k] / (1 - b2 ** t)
                self.net.p[k] -= self.learning_rate * mh / (np.sqrt(vh) + eps)

    def informed(self, context: "TuneContext | None" = None) -> bool:
        return self.net is not None and self.data_size >= self.num_warmup_samples

    def predict(self, context: "TuneContext",
                candidates: list["MeasureCandidate"]) -> np.ndarray:
        n = len(candidates)
        if not self.informed():
            return self._rng.uniform(0, 1, n)
        feats = self.extractor.extract_from(context, candidates)
        rows, ids = pack(feats)
        if len(rows) == 0:
            return np.zeros(n)
        scores, _ = self.net.forward(rows / self.scale, ids, n)
        return scores.astype("float64")
