"""XGBModel: gradient-boosted trees over per-store features (reference section 8.1).

TVM's "pack-sum" regression: every store row of a candidate gets a tree prediction, the
candidate's score is their sum, and the custom objective is the label-weighted squared error
of that sum, ``grad_row = (sum_pred[c] - y_c) * y_c``, with labels ``y = min_cost / cost``
per workload group; the hessian is ``y_c * sqrt(k_c)`` for a candidate of ``k_c`` rows
(TVM's is ``y_c``, which overshoots on kernels with many stores: see ``_train``). So fast
schedules dominate the loss and failures (y ~ 0) barely count. Training restarts from scratch on all data whenever the data grew by a
fifth since the last training (adaptive training), with early stopping on the training
p-rmse. Until ``num_warmup_samples`` samples exist ``predict`` returns uniform noise --
unless a pretrained model is at hand (``pretrained="auto"``: the one shipped for the target's
vector ISA, :mod:`~workbench.meta_schedule.cost_model.pretrained`; or a path): it then ranks
from the first round, and the model's own training continues from its trees (fine-tuning on
the task's measurements, which then ranks from the next round on) instead of starting from
nothing.
"""
from __future__ import annotations

import io
import logging
import os
import pickle
import tarfile
import tempfile
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from workbench.meta_schedule.cost_model import pretrained as _pretrained  # its option
from workbench.meta_schedule.cost_model.cost_model import CostModel
from workbench.meta_schedule.cost_model.dataset import (
    FAILED_COST, FeatureGroup, cost_of, pack, pack_sum,
)
from workbench.meta_schedule.feature_extractor import FeatureExtractor
from workbench.meta_schedule.utils import cpu_count, shash2hex

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.runner import RunnerResult
    from workbench.meta_schedule.search_strategy import MeasureCandidate
    from workbench.meta_schedule.tune_context import TuneContext

logger = logging.getLogger("workbench.meta_schedule")


class XGBConfig(NamedTuple):
    max_depth: int = 10
    gamma: float = 0.001
    min_child_weight: float = 0
    eta: float = 0.2
    seed: int = 43
    nthread: int | None = None
    tree_method: str = "auto"

    def to_dict(self) -> dict[str, Any]:
        d = {"max_depth": self.max_depth, "gamma": self.gamma,
             "min_child_weight": self.min_child_weight, "eta": self.eta, "seed": self.seed,
             "tree_method": self.tree_method, "verbosity": 0,
             # Sums of row predictions are the score: no per-row offset.
             "base_score": 0.0, "disable_default_eval_metric": 1}
        if self.nthread is not None:
            d["nthread"] = self.nthread
        return d


class XGBModel(CostModel):
    def __init__(self, *, extractor: Any = "per-store-feature",
                 config: XGBConfig = XGBConfig(),  # noqa: B008 - an immutable NamedTuple
                 num_warmup_samples: int = 100,
                 early_stopping_rounds: int = 50, verbose_eval: int = 25,
                 average_peak_n: int = 32, adaptive_training: bool = True,
                 num_tuning_cores: int | None = None, tree_method: str | None = None,
                 max_num_boost_round: int = 10000, seed: int | None = None,
                 pretrained: str | None = "auto") -> None:
        import xgboost  # noqa: F401 - fail at construction, not mid-tuning, if it is missing
        if pretrained is not None and not isinstance(pretrained, str):
            raise TypeError(f"XGBModel: pretrained must be 'auto', a path or None, got "
                            f"{pretrained!r}")
        if pretrained not in (None, "auto") and not os.path.exists(pretrained):
            raise ValueError(f"XGBModel: pretrained model {pretrained!r} does not exist")
        self.extractor = FeatureExtractor.create(extractor)
        nthread = config.nthread if config.nthread is not None else \
            (num_tuning_cores or cpu_count(logical=False))
        self.config = config._replace(nthread=nthread,
                                      tree_method=tree_method or config.tree_method)
        self.num_warmup_samples = num_warmup_samples
        self.early_stopping_rounds = early_stopping_rounds
        self.verbose_eval = verbose_eval
        self.average_peak_n = average_peak_n
        self.adaptive_training = adaptive_training
        self.max_num_boost_round = max_num_boost_round
        self.data: dict[str, FeatureGroup] = {}
        self.data_size = 0
        self.last_train_size = 0
        self.booster: Any = None
        # RankCorrelation of each update's batch, measured before training on it.
        self.rank_correlations: list = []
        self._rng = np.random.RandomState(seed)
        self.pretrained = pretrained
        self._base: Any = None          # the pretrained booster in use, once resolved
        self._base_resolved = pretrained is None

    # -- persistence ---------------------------------------------------------------------------
    def save(self, path: str) -> None:
        """A tar of ``model.bin`` (the booster, if any) and ``data.npy`` (the samples)."""
        with tempfile.TemporaryDirectory() as tmp:
            names = []
            if self.booster is not None:
                self.booster.save_model(os.path.join(tmp, "model.bin"))
                names.append("model.bin")
            payload = [(k, g.features, np.asarray(g.costs)) for k, g in self.data.items()]
            with open(os.path.join(tmp, "data.npy"), "wb") as f:
                pickle.dump({"groups": payload, "last_train_size": self.last_train_size}, f)
            names.append("data.npy")
            with tarfile.open(path, "w") as tar:
                for n in names:
                    tar.add(os.path.join(tmp, n), arcname=n)

    def load(self, path: str) -> None:
        import xgboost as xgb
        with tarfile.open(path, "r") as tar:
            members = {m.name: m for m in tar.getmembers()}
            raw = tar.extractfile(members["data.npy"]).read()
            state = pickle.load(io.BytesIO(raw))
            self.data = {}
            for key, feats, costs in state["groups"]:
                g = FeatureGroup()
                g.append(list(feats), list(costs))
                self.data[key] = g
            self.data_size = sum(len(g.costs) for g in self.data.values())
            self.last_train_size = state.get("last_train_size", self.data_size)
            if "model.bin" in members:
                with tempfile.TemporaryDirectory() as tmp:
                    p = os.path.join(tmp, "model.bin")
                    with open(p, "wb") as f:
                        f.write(tar.extractfile(members["model.bin"]).read())
                    self.booster = xgb.Booster()
                    self.booster.load_model(p)

    # -- learning ------------------------------------------------------------------------------
    def update(self, context: "TuneContext", candidates: list["MeasureCandidate"],
               results: list["RunnerResult"]) -> None:
        if not candidates:
            return
        feats = self.extractor.extract_from(context, candidates)
        costs = [cost_of(r) for r in results]
        keep = [i for i, f in enumerate(feats) if len(f) > 0]
        feats = [feats[i] for i in keep]
        costs = [costs[i] for i in keep]
        if not feats:
            return
        key = shash2hex(context.mod)
        group = self.data.get(key)
        self._resolve_pretrained(context)
        if self.booster is not None:
            # Accuracy on the newest batch, before training on it (held-out data).
            self._log_rank_correlation(context, feats, costs)
        if group is not None and self.booster is not None:
            self._log_validation(group, feats, costs)
        if group is None:
            group = self.data[key] = FeatureGroup()
        group.append(feats, costs)
        self.data_size += len(feats)
        if self.adaptive_training and \
                self.data_size - self.last_train_size < self.last_train_size / 5:
            return
        self.last_train_size = self.data_size
        self._train()

    def _log_rank_correlation(self, context: "TuneContext", feats: list,
                              costs: list[float]) -> None:
        from workbench.meta_schedule.cost_model.metric import rank_correlation
        c = np.asarray(costs, dtype="float64")
        ok = np.nonzero((c < FAILED_COST) & (c > 0))[0]
        if len(ok) < 2:
            return
        pred = self._predict_raw([feats[i] for i in ok])
        corr = rank_correlation(pred, 1.0 / c[ok])
        self.rank_correlations.append(corr)
        log = getattr(context, "logger", None) or logger
        log.info("XGB cost model accuracy on the newest %d measured candidates (before "
                 "training on them): %s", len(ok), corr)

    def _log_validation(self, group: FeatureGroup, feats: list, costs: list[float]) -> None:
        min_cost = min(group.min_cost, min(costs))
        ys = np.array([min_cost / c if c > 0 else 0.0 for c in costs])
        pred = self._predict_raw(feats)
        rmse = float(np.sqrt(np.mean((pred - ys) ** 2)))
        logger.debug("XGB validation: p-rmse: %.6f a-peak@%d: %.6f", rmse,
                     self.average_peak_n, _a_peak(pred, ys, self.average_peak_n))

    def _train(self) -> None:
        import xgboost as xgb
        feats: list[np.ndarray] = []
        labels: list[float] = []
        for group in self.data.values():
            feats.extend(group.features)
            labels.extend(group.labels())
        ys = np.asarray(labels, dtype="float64")
        if not feats or float(ys.max(initial=0.0)) <= 0:
            return  # only failures: nothing to rank yet
        rows, ids = pack(feats)
        y_rows = ys[ids]
        dtrain = xgb.DMatrix(rows, label=y_rows, weight=y_rows)
        n = len(feats)

        # A candidate's score is the sum of its rows: a step of r on each of its k rows moves
        # the sum by k * r. TVM's hessian (y per row) lets a tree step every row by the whole
        # residual, which overshoots up to k-fold when the rows share leaves -- kernels with
        # dozens of stores (Winograd, MobileNet's fused blocks) made training diverge (p-rmse
        # 0.46 -> 5e5 in 50 rounds); a hessian of y * k under-steps rows that fall in
        # different leaves (the in-sample ranking test lost its top 3). y * sqrt(k) sits
        # between: converged on both (p-rmse 0.095 on the pretraining set); k = 1 is TVM's.
        rows_of = np.sqrt(np.bincount(ids, minlength=n)[ids].astype("float64"))
        hess_rows = y_rows * rows_of

        def objective(preds: np.ndarray, _d: Any) -> tuple[np.ndarray, np.ndarray]:
            sums = pack_sum(preds, ids, n)
            grad = (sums[ids] - y_rows) * y_rows
            return grad, hess_rows

        base = self._base
        start = base.num_boosted_rounds() if base is not None else 0
        stopper = _early_stopping(dtrain, ids, ys, self.early_stopping_rounds,
                                 self.verbose_eval, self.average_peak_n)
        booster = xgb.train(self.config.to_dict(), dtrain,
                            num_boost_round=self.max_num_boost_round, obj=objective,
                            callbacks=[stopper], verbose_eval=False,
                            # fine-tuning: the pretrained trees, then trees of the residual
                            xgb_model=base.copy() if base is not None else None)
        # Keep the trees up to the best round, so a saved model predicts the same (epochs
        # count this training's rounds, after a pretrained model's ``start``).
        best = stopper.best_iteration
        self.booster = booster[: start + best + 1] if best is not None else booster
        logger.debug("XGB trained on %d samples: %d rounds, best p-rmse %.6f", n,
                     stopper.rounds, stopper.best_score)

    # -- prediction ----------------------------------------------------------------------------
    def _predict_raw(self, feats: list[np.ndarray], booster: Any = None) -> np.ndarray:
        import xgboost as xgb
        rows, ids = pack(feats)
        if len(rows) == 0:
            return np.zeros(len(feats))
        pred = (booster or self.booster).predict(xgb.DMatrix(rows), output_margin=True)
        return pack_sum(pred, ids, len(feats))

    def _own_informed(self) -> bool:
        return self.data_size >= self.num_warmup_samples and self.booster is not None

    def informed(self, context: "TuneContext | None" = None) -> bool:
        if self._own_informed():
            return True
        self._resolve_pretrained(context)
        return self._base is not None

    def _resolve_pretrained(self, context: "TuneContext | None") -> None:
        """Pick the pretrained booster once a context tells the target (module docstring)."""
        if self._base_resolved or context is None or getattr(context, "target", None) is None:
            return
        self._base_resolved = True
        pre = _pretrained
        if self.pretrained == "auto":
            from workbench import options
            if not options.get("ms_pretrained_cost_model"):
                return
            base = pre.load_pretrained(pre.isa_of(context.target))
        else:
            import xgboost as xgb
            base = xgb.Booster()
            base.load_model(self.pretrained)
        if base is None:
            return
        width = getattr(self.extractor, "feature_vector_length", None)
        trained = int(base.attr("num_features") or -1)
        if width is not None and width != trained:
            logger.warning("XGBModel: the pretrained model has %d feature columns, the "
                           "extractor %d: not used", trained, width)
            return
        self._base = base

    def predict(self, context: "TuneContext",
                candidates: list["MeasureCandidate"]) -> np.ndarray:
        n = len(candidates)
        if not self.informed(context):
            return self._rng.uniform(0, 1, n)
        feats = self.extractor.extract_from(context, candidates)
        # A fine-tuned model (pretrained trees, then the task's residual trees) ranks as soon
        # as it trained: ranking with the pretrained trees alone until num_warmup_samples
        # left a 64-trial search stalled at ~92% of the best, its bias never corrected.
        fine_tuned = self._base is not None and self.booster is not None
        booster = None if fine_tuned or self._own_informed() else self._base
        return self._predict_raw(feats, booster).astype("float64")


def _a_peak(pred: np.ndarray, labels: np.ndarray, k: int) -> float:
    """Average over the top-k predicted of (running max of true label) / (max label)."""
    if len(labels) == 0 or labels.max() <= 0:
        return 0.0
    order = np.argsort(-pred)[:k]
    running = np.maximum.accumulate(labels[order]) / labels.max()
    return float(np.mean(running))


def _early_stopping(dtrain: Any, ids: np.ndarray, ys: np.ndarray, patience: int,
                    verbose_eval: int, peak_n: int) -> Any:
    """A training callback that stops when the training p-rmse has not improved for
    ``patience`` rounds and logs every ``verbose_eval`` rounds at DEBUG (as TVM's). Built
    here so xgboost is imported only when a model trains."""
    import xgboost as xgb

    class EarlyStopping(xgb.callback.TrainingCallback):
        def __init__(self) -> None:
            super().__init__()
            self.best_score = float("inf")
            self.best_iteration: int | None = None
            self.rounds = 0

        def after_iteration(self, model: Any, epoch: int, evals_log: Any) -> bool:
            self.rounds = epoch + 1
            pred = model.predict(dtrain, output_margin=True)  # incremental: cached on dtrain
            sums = pack_sum(pred, ids, len(ys))
            rmse = float(np.sqrt(np.mean((sums[ids] - ys[ids]) ** 2)))
            if verbose_eval and epoch % verbose_eval == 0:
                logger.debug("XGB iter %d: tr-p-rmse: %.6f tr-a-peak@%d: %.6f", epoch, rmse,
                             peak_n, _a_peak(sums, ys, peak_n))
            # Relative tolerance: once the fit is exact, later trees shave ~1e-9 off the
            # rmse each round, which would count as progress forever (1500+ rounds seen).
            if rmse < self.best_score * (1.0 - 1e-6):
                self.best_score, self.best_iteration = rmse, epoch
            return epoch - (self.best_iteration or 0) >= patience

    return EarlyStopping()
