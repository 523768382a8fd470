"""Pretrained cost models shipped with the package (TenSet's idea, on our own records).

A cold XGB model predicts noise until it has seen ``num_warmup_samples`` measurements, so a
cold search spends its first rounds on random samples. A model pretrained on many tasks of the
operator families models are made of (convolutions blocked and plain, depthwise, pooling,
matmuls and dense layers, attention, norms) ranks a new task's candidates from its first round.

- :func:`isa_of` names the model a target uses: ``"avx512"`` or ``"avx2"`` (vector width);
- :func:`load_pretrained` ``(isa)`` is the shipped booster of that kind, or None
  (``workbench/meta_schedule/cost_model/pretrained/xgb_<isa>.ubj``; its attributes say how
  many feature columns it was trained on, from which records, on which host);
- :func:`groups_from_database` turns a tuning database (a work directory of any run) into
  training groups: each record's trace replayed on its workload, its per-store features,
  its median run time;
- :func:`train_booster` fits TVM's pack-sum XGB objective on such groups (what
  :class:`~workbench.meta_schedule.cost_model.XGBModel` trains online).

``benchmarks/pretrain_cost_model.py`` regenerates the dataset and the models
(``collect``, ``train``) and measures what they save (``evaluate``). The option
``ms_pretrained_cost_model`` (default on) lets ``XGBModel(pretrained="auto")`` use them.
"""
from __future__ import annotations

import functools
import json
import logging
import os
from typing import TYPE_CHECKING, Any

import numpy as np

from workbench import options
from workbench.meta_schedule.cost_model.dataset import FeatureGroup
from workbench.meta_schedule.utils import median, shash2hex

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.database import Database
    from workbench.target import Target

__all__ = ["PRETRAINED_DIR", "isa_of", "pretrained_path", "load_pretrained",
           "groups_from_database", "train_booster", "save_booster", "feature_count"]

logger = logging.getLogger("workbench.meta_schedule")

PRETRAINED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pretrained")

options.register("ms_pretrained_cost_model", bool, True,
                 env="WORKBENCH_MS_PRETRAINED_COST_MODEL",
                 doc="XGBModel(pretrained='auto') (the tuner's default cost model) ranks a "
                     "task's first candidates with the model shipped for the target's vector "
                     "ISA (meta_schedule.cost_model.pretrained) and fine-tunes it on the "
                     "task's own measurements; off: a cold model (random samples until it has "
                     "num_warmup_samples measurements).")


def isa_of(target: "Target") -> str:
    """The pretrained model kind for ``target``: ``"avx512"`` (512-bit vectors) or
    ``"avx2"`` (anything narrower: its features and timings are closest)."""
    return "avx512" if target.vector_width_bits >= 512 else "avx2"


def pretrained_path(isa: str) -> str:
    return os.path.join(PRETRAINED_DIR, f"xgb_{isa}.ubj")


@functools.lru_cache(maxsize=None)
def load_pretrained(isa: str) -> Any:
    """The shipped booster for ``isa`` (an ``xgboost.Booster`` whose attribute
    ``num_features`` holds its feature count), or None when there is none."""
    path = pretrained_path(isa)
    if not os.path.exists(path):
        return None
    import xgboost as xgb
    booster = xgb.Booster()
    booster.load_model(path)
    booster.set_param({"nthread": 1})
    return booster


def save_booster(booster: Any, path: str, meta: dict[str, Any]) -> None:
    """Save ``booster`` at ``path`` with ``meta`` as string attributes (``num_features`` is
    required: a model never predicts rows of another width)."""
    if "num_features" not in meta:
        raise ValueError("save_booster: meta must hold num_features")
    booster.set_attr(**{k: v if isinstance(v, str) else json.dumps(v) for k, v in meta.items()})
    booster.save_model(path)


def groups_from_database(database: "Database", target: "Target", extractor: Any = None
                         ) -> dict[str, FeatureGroup]:
    """Training groups (one per workload, keyed as :class:`XGBModel` keys them) from every
    record of ``database``: the record's trace replayed on its workload, its features as the
    tuner extracts them for ``target``, its median run time (failed records are left out:
    their cost is a placeholder, not a measurement). A record whose trace no longer replays
    is skipped with a log line."""
    from workbench.meta_schedule.arg_info import ArgInfo
    from workbench.meta_schedule.feature_extractor import FeatureExtractor
    from workbench.meta_schedule.search_strategy import MeasureCandidate
    from workbench.meta_schedule.tune_context import TuneContext
    from workbench.tir.schedule import Schedule

    extractor = FeatureExtractor.create(extractor or "per-store-feature")
    by_workload: dict[int, tuple[Any, list]] = {}
    for record in database.get_all_tuning_records():
        if not record.run_secs or any(s >= 1e9 for s in record.run_secs):
            continue
        by_workload.setdefault(id(record.workload), (record.workload, []))[1].append(record)
    groups: dict[str, FeatureGroup] = {}
    for workload, records in by_workload.values():
        ctx = TuneContext(workload.mod, target=target)
        cands, costs = [], []
        for record in records:
            sch = Schedule(workload.mod)
            try:
                record.trace.apply_to_schedule(sch, remove_postproc=False)
            except Exception as err:  # noqa: BLE001 - an old trace costs one sample
                logger.info("pretrained: a record of %s does not replay: %s",
                            shash2hex(workload.mod), err)
                continue
            cands.append(MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod,
                                                                        remove_preproc=True)))
            costs.append(median(record.run_secs))
        if len(cands) < 2:
            continue
        feats = extractor.extract_from(ctx, cands)
        keep = [i for i, f in enumerate(feats) if len(f) > 0]
        group = groups.setdefault(shash2hex(workload.mod), FeatureGroup())
        group.append([feats[i] for i in keep], [costs[i] for i in keep])
    return groups


def train_booster(groups: dict[str, FeatureGroup], *, max_rounds: int = 400,
                  seed: int = 43, base: Any = None) -> Any:
    """An XGB booster fitted on ``groups`` with the online model's objective and settings
    (labels ``min_cost / cost`` within each group; rounds capped to keep the file small).
    With ``base`` (a booster of the same feature width) training continues from its trees,
    as the tuner fine-tunes: new data added without the data ``base`` was trained on."""
    from workbench.meta_schedule.cost_model.xgb_model import XGBModel
    if not groups:
        raise ValueError("train_booster: no training groups")
    model = XGBModel(pretrained=None, max_num_boost_round=max_rounds, seed=seed)
    model._base = base
    model.data = dict(groups)
    model.data_size = sum(len(g.costs) for g in groups.values())
    model._train()
    if model.booster is None:
        raise ValueError("train_booster: the groups hold no successful measurement")
    return model.booster


def feature_count(groups: dict[str, FeatureGroup]) -> int:
    for g in groups.values():
        for f in g.features:
            return int(np.asarray(f).shape[1])
    return 0
