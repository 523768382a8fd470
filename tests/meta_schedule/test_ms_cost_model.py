"""Cost models on the per-store features: shapes, learning a ranking, save/load."""
from __future__ import annotations

import math

import numpy as np
import pytest
from ms_tuning_workloads import LLVM_SPACE_TARGET, matmul

from workbench.meta_schedule.cost_model import CostModel, MLPModel, RandomModel, XGBModel
from workbench.meta_schedule.feature_extractor import FeatureExtractor, PerStoreFeature
from workbench.meta_schedule.feature_extractor.per_store import FEATURE_NAMES
from workbench.meta_schedule.runner import RunnerResult
from workbench.meta_schedule.search_strategy import MeasureCandidate
from workbench.meta_schedule.search_strategy.base import TraceApplier
from workbench.meta_schedule.tune_context import TuneContext
from workbench.meta_schedule.arg_info import ArgInfo
from workbench.tir.schedule import Schedule

N_FEATURES = len(FEATURE_NAMES)


def _ctx():
    return TuneContext(matmul(64), target=LLVM_SPACE_TARGET,
                       space_generator="post-order-apply", search_strategy="replay-trace",
                       rand_state=9)


def _candidates(ctx, n):
    applier = TraceApplier(ctx.mod, ctx.space_generator.postprocs)
    spaces = ctx.generate_design_space()
    out = []
    seed = 1
    while len(out) < n:
        sch = applier.apply(spaces[seed % 3].trace.simplified(True), seed=seed,
                            keep_decisions=False)
        seed += 1
        if sch is not None:
            out.append(MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod)))
    return out


def _innermost_tile(cand):
    """A synthetic "truth": schedules with a longer vectorized inner tile are faster."""
    ds = [d for i, d in cand.sch.trace.decisions.items() if i.kind.name == "SamplePerfectTile"]
    return ds[1][-1]


def _results(cands):
    return [RunnerResult([1e-3 / _innermost_tile(c)], None) for c in cands]


def test_per_store_feature_unscheduled_matmul():
    ctx = _ctx()
    cand = MeasureCandidate(Schedule(matmul(128)), [])
    (feats,) = FeatureExtractor.create("per-store-feature").extract_from(ctx, [cand])
    assert feats.shape == (1, N_FEATURES) and feats.dtype == np.float32
    col = {name: i for i, name in enumerate(FEATURE_NAMES)}
    # float add and mul: 128^3 each -> slog = log2(2^21 + 1)
    assert feats[0, col["float_add_sub"]] == pytest.approx(math.log2(2**21 + 1), rel=1e-5)
    assert feats[0, col["float_mul"]] == pytest.approx(math.log2(2**21 + 1), rel=1e-5)
    assert feats[0, col["outer_prod"]] == pytest.approx(math.log2(2**21 + 1), rel=1e-5)
    assert feats[0, col["num_loops"]] == pytest.approx(2.0)  # slog(3 loops)


def test_per_store_feature_scheduled_rows():
    ctx = _ctx()
    cands = _candidates(ctx, 4)
    feats = PerStoreFeature().extract_from(ctx, cands)
    for f in feats:
        assert f.ndim == 2 and f.shape[1] == N_FEATURES and 1 <= f.shape[0] <= 2
        assert np.all(np.isfinite(f))


def test_xgb_learns_a_ranking_and_round_trips(tmp_path):
    ctx = _ctx()
    cands = _candidates(ctx, 64)
    model = XGBModel(num_warmup_samples=0, num_tuning_cores=1, seed=0)
    assert model.predict(ctx, cands[:3]).shape == (3,)  # untrained: noise
    model.update(ctx, cands[:40], _results(cands[:40]))
    assert model.booster is not None
    # TVM's objective weights samples by their label, so the model is sharpest at the top:
    # the best measured schedules must come out on top of its ranking.
    train = cands[:40]
    pred_train = model.predict(ctx, train)
    truth = np.array([_innermost_tile(c) for c in train], dtype=float)
    top = truth[np.argsort(-pred_train)[:3]]
    np.testing.assert_array_equal(top, np.sort(truth)[::-1][:3])
    test = cands[40:]
    pred = model.predict(ctx, test)
    path = str(tmp_path / "xgb.tar")
    model.save(path)
    again = XGBModel(num_warmup_samples=0, num_tuning_cores=1)
    again.load(path)
    np.testing.assert_allclose(again.predict(ctx, test), pred, rtol=1e-6)
    assert again.data_size == 40


def test_xgb_warmup_and_failures():
    ctx = _ctx()
    cands = _candidates(ctx, 4)
    model = XGBModel(num_tuning_cores=1)  # 100 warm-up samples
    model.update(ctx, cands, [RunnerResult(None, "boom")] * 4)
    assert model.data_size == 4  # failures are data too (cost 1e10)
    p = model.predict(ctx, cands)
    assert p.shape == (4,) and np.all((0 <= p) & (p < 1))


def test_mlp_model_trains_and_round_trips(tmp_path):
    ctx = _ctx()
    cands = _candidates(ctx, 24)
    model = MLPModel(epochs=60, seed=1)
    model.update(ctx, cands, _results(cands))
    pred = model.predict(ctx, cands)
    assert pred.shape == (24,) and np.all(np.isfinite(pred))
    path = str(tmp_path / "mlp.pkl")
    model.save(path)
    again = MLPModel()
    again.load(path)
    np.testing.assert_allclose(again.predict(ctx, cands), pred)


def test_random_model_and_factory(tmp_path):
    m = RandomModel(seed=3)
    path = str(tmp_path / "rand.pkl")
    m.save(path)
    a = m.predict(None, [None] * 5)
    m.load(path)
    np.testing.assert_array_equal(m.predict(None, [None] * 5), a)
    assert np.all((0 <= a) & (a < 100))
    assert isinstance(CostModel.create("random", num_tuning_cores=2), RandomModel)
    assert isinstance(CostModel.create("xgb", num_tuning_cores=1), XGBModel)
    assert isinstance(CostModel.create("mlp"), MLPModel)
    assert CostModel.create("none") is None
    with pytest.raises(ValueError, match="'none'"):
        CostModel.create("svm")
