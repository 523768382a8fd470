"""Pretrained cost models (issue 27): records of a real tuning run turned into training groups
(traces replayed, features extracted as the tuner does), a booster trained and saved, an
XGBModel that ranks with it from its first round and fine-tunes it on its own measurements,
the shipped model's file, and the switches (option off, a model of another feature width)."""
from __future__ import annotations

import logging
import os

import numpy as np
import pytest
from ms_tuning_workloads import fast_runner, matmul

from workbench import options
from workbench.meta_schedule import tune_tir
from workbench.meta_schedule.arg_info import ArgInfo
from workbench.meta_schedule.cost_model import XGBModel
from workbench.meta_schedule.cost_model import pretrained as pre
from workbench.meta_schedule.database import JSONDatabase
from workbench.meta_schedule.feature_extractor.per_store import PerStoreFeature
from workbench.meta_schedule.profiler import Profiler
from workbench.meta_schedule.runner import RunnerResult
from workbench.meta_schedule.search_strategy import EvolutionarySearch, MeasureCandidate
from workbench.meta_schedule.tune_context import TuneContext
from workbench.meta_schedule.utils import median
from workbench.target import Target
from workbench.tir.schedule import Schedule

TARGET = "llvm -num-cores=2"


@pytest.fixture(scope="module")
def records(tmp_path_factory):
    """16 random samples of a 64 x 96 x 80 matmul, measured (no confirmation rounds)."""
    work = str(tmp_path_factory.mktemp("pretrain"))
    with options.override(ms_confirm_rounds=0):
        tune_tir(matmul(64, 80, 96), TARGET, work, max_trials_global=16, num_trials_per_iter=8,
                 cost_model="random", runner=fast_runner(), seed=0)
    db = JSONDatabase(work_dir=work)
    (workload,) = {id(r.workload): r.workload for r in db.get_all_tuning_records()}.values()
    ok = [r for r in db.get_all_tuning_records() if r.run_secs and max(r.run_secs) < 1e9]
    cands = []
    for r in ok:
        sch = Schedule(workload.mod)
        r.trace.apply_to_schedule(sch, remove_postproc=False)
        cands.append(MeasureCandidate(sch, ArgInfo.from_entry_func(sch.mod,
                                                                    remove_preproc=True)))
    costs = np.array([median(r.run_secs) for r in ok])
    return db, workload.mod, cands, costs


def _trained(records, tmp_path, **meta):
    db, _, _, _ = records
    groups = pre.groups_from_database(db, Target(TARGET))
    booster = pre.train_booster(groups, max_rounds=200)
    path = str(tmp_path / "model.ubj")
    meta.setdefault("num_features", str(pre.feature_count(groups)))
    pre.save_booster(booster, path, meta)
    return groups, booster, path


def test_records_become_training_groups_with_the_tuners_features(records):
    db, mod, cands, costs = records
    groups = pre.groups_from_database(db, Target(TARGET))
    (group,) = groups.values()
    assert len(group.costs) == len(cands) >= 10
    np.testing.assert_allclose(sorted(group.costs), sorted(costs))
    # the features are those the tuner's extractor computes for the same schedules
    ctx = TuneContext(mod, target=TARGET)
    want = PerStoreFeature().extract_from(ctx, cands)
    got = sorted(group.features, key=lambda f: (f.shape, f.sum()))
    for a, b in zip(got, sorted(want, key=lambda f: (f.shape, f.sum()))):
        np.testing.assert_allclose(a, b)
    assert pre.feature_count(groups) == PerStoreFeature().feature_vector_length


def test_a_pretrained_model_ranks_from_the_first_round_and_fine_tunes(records, tmp_path):
    _, mod, cands, costs = records
    _, booster, path = _trained(records, tmp_path)
    ctx = TuneContext(mod, target=TARGET)
    # (the default warm-up of 100 samples: a fine-tuned model ranks long before it)
    model = XGBModel(pretrained=path, num_tuning_cores=1)
    assert model.num_warmup_samples == 100 > len(cands)
    assert not model.informed()            # no task yet: the target is not known
    assert model.informed(ctx)             # from the first round, without a measurement
    pred = model.predict(ctx, cands)
    # trained on these very samples, it ranks the fastest near the top (a wrong feature replay
    # or a label inversion would not): labels are min_cost / cost, weighted by themselves, so
    # the model ranks the fast ones and leaves the order of the 100x slower ones loose (TVM's);
    # near-ties among the fastest (single measurements on a shared machine) may swap
    fastest = set(np.argsort(costs)[:3])
    assert np.argmin(costs) in set(np.argsort(-pred)[:3]) and np.argmax(pred) in fastest
    # fine-tuning: the model's own training continues from the pretrained trees
    model.update(ctx, cands, [RunnerResult([float(c)], None) for c in costs])
    assert model.booster is not None
    assert model.booster.num_boosted_rounds() > booster.num_boosted_rounds()
    tuned = model.predict(ctx, cands)
    assert not np.allclose(tuned, pred) and np.argmax(tuned) in fastest
    np.testing.assert_allclose(tuned, model._predict_raw(
        model.extractor.extract_from(ctx, cands), model.booster))
    # a cold model still waits for its warm-up before its trees rank
    cold = XGBModel(pretrained=None, num_tuning_cores=1)
    cold.update(ctx, cands, [RunnerResult([float(c)], None) for c in costs])
    assert cold.booster is not None and not cold.informed(ctx)


def test_training_continues_from_a_base_model(records, tmp_path):
    """``train --base``: new groups add trees to the shipped model's, which stay as they were."""
    groups, booster, _ = _trained(records, tmp_path)
    more = pre.train_booster(groups, max_rounds=50, base=booster)
    assert more.num_boosted_rounds() > booster.num_boosted_rounds()
    n = booster.num_boosted_rounds()
    assert more.get_dump()[:n] == booster.get_dump()      # the base's trees, unchanged
    # and it did not modify the booster it was given
    assert len(booster.get_dump()) == n


def test_the_search_evolves_from_its_first_round_with_a_pretrained_model(records, tmp_path):
    _, _, _, _ = records
    _, _, path = _trained(records, tmp_path)
    strategy = EvolutionarySearch(population_size=16, init_min_unmeasured=4,
                                  genetic_num_iters=2, seconds_per_candidate=None)
    ctx = TuneContext(matmul(48, 64, 32), target=TARGET, space_generator="post-order-apply",
                      search_strategy=strategy, rand_state=3)
    model = XGBModel(pretrained=path, num_tuning_cores=1)
    scored = []
    predict = model.predict
    model.predict = lambda c, cands: scored.append(len(cands)) or predict(c, cands)
    ctx.pre_tuning(max_trials=8, num_trials_per_iter=4, cost_model=model)
    cands = ctx.generate_measure_candidates()
    assert len(cands) == 4
    assert sum(scored) >= 16                # the population was scored: evolution, not noise


def test_switches_off_and_a_model_of_another_width_is_not_used(records, tmp_path, caplog):
    _, mod, _, _ = records
    ctx = TuneContext(mod, target=TARGET)
    _, _, path = _trained(records, tmp_path, num_features="7")
    log = logging.getLogger("workbench.meta_schedule")
    log.addHandler(caplog.handler)
    try:
        assert not XGBModel(pretrained=path, num_tuning_cores=1).informed(ctx)
    finally:
        log.removeHandler(caplog.handler)
    assert "7 feature columns, the extractor 164: not used" in caplog.text
    with options.override(ms_pretrained_cost_model=False):
        assert not XGBModel(num_tuning_cores=1).informed(ctx)
    assert not XGBModel(pretrained=None, num_tuning_cores=1).informed(ctx)
    with pytest.raises(ValueError, match="does not exist"):
        XGBModel(pretrained=str(tmp_path / "nope.ubj"))
    with pytest.raises(TypeError, match="pretrained must be 'auto', a path or None"):
        XGBModel(pretrained=3)
    with pytest.raises(ValueError, match="must hold num_features"):
        pre.save_booster(None, str(tmp_path / "x.ubj"), {})


def test_the_shipped_models_load_for_their_targets():
    assert pre.isa_of(Target("llvm -mcpu=skylake-avx512")) == "avx512"
    assert pre.isa_of(Target("llvm -mcpu=haswell")) == "avx2"
    path = pre.pretrained_path("avx512")
    assert os.path.exists(path), "the AVX-512 model is shipped with the package"
    assert os.path.getsize(path) < 5e6
    booster = pre.load_pretrained("avx512")
    assert int(booster.attr("num_features")) == PerStoreFeature().feature_vector_length
    assert int(booster.attr("samples")) > 1000 and booster.attr("host")
    ctx = TuneContext(matmul(64), target="llvm -mcpu=skylake-avx512")
    with options.override(ms_pretrained_cost_model=True):   # the default (the suite's is off)
        assert XGBModel(num_tuning_cores=1).informed(ctx)     # pretrained="auto"


def test_a_default_tuning_run_ranks_with_the_shipped_model_from_its_first_round(tmp_path):
    """tune_tir as users call it: with the shipped model the first rounds evolve a population
    scored by it; with the option off (a cold model) they measure random samples."""
    isa = pre.isa_of(Target(TARGET))
    if pre.load_pretrained(isa) is None:
        pytest.skip(f"no pretrained model is shipped for this host's kind ({isa})")
    evolved = {}
    for on in (True, False):
        with options.override(ms_pretrained_cost_model=on), Profiler() as prof:
            db = tune_tir(matmul(64, 48, 80), TARGET, str(tmp_path / str(on)),
                          max_trials_global=8, num_trials_per_iter=4, runner=fast_runner(),
                          seed=1)
        assert len(db) == 8 and all(r.run_secs for r in db.get_all_tuning_records())
        evolved[on] = prof.stats_sec.get("EvoSearch/Evolve/Mutation", 0) > 0
    assert evolved == {True: True, False: False}
