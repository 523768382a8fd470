"""Whole-model tuning of an imported model (issue 12): tune_relax on a torch.export-ed ResNet-
style network extracts its kernels, weights them by call count, tunes them with the gradient
scheduler and a dashboard naming their layers; compile_relax builds the model with the best
records and it still matches PyTorch. Records already in the database count: a stopped run
resumes from its work directory, and a kernel shared with an earlier model reuses that model's
records instead of being tuned again."""
from __future__ import annotations

import io
import logging
import os
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import workbench as wb  # noqa: E402
from workbench.meta_schedule.arg_info import ArgInfo  # noqa: E402
from workbench.meta_schedule.database import (  # noqa: E402
    JSONDatabase, MemoryDatabase, TuningRecord,
)
from workbench.meta_schedule.relax_integration import (  # noqa: E402
    _fuse, compile_relax, extract_tasks, tune_relax,
)
from workbench.meta_schedule.search_strategy import ReplayTrace  # noqa: E402
from workbench.meta_schedule.task_budget import (  # noqa: E402
    CappedStrategy, SeededStrategy, default_schedule_candidate, default_schedule_candidates,
    trials_done,
)
from workbench.relax.frontend.torch import from_exported_program  # noqa: E402
from workbench.relax.transform import MetaScheduleApplyDatabase  # noqa: E402
from workbench.ir.structural import structural_equal  # noqa: E402
from workbench.target import Target  # noqa: E402
from workbench.tir.schedule import Schedule  # noqa: E402

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "relax", "frontend"))
from ms_tuning_workloads import fast_runner, xgb_1thread  # noqa: E402
from small_models import tiny_resnet  # noqa: E402

TARGET = "llvm -num-cores=2"
# Batch norm is folded into the convolutions (FoldBatchnormToConv2D): the kernels end in an
# add; their layer labels still name the batch norms.
STEM = "fused_conv2d_add_relu"          # conv1 + bn1 + relu (3 -> 8 channels)
BLOCK_CONV1 = "fused_conv2d1_add_relu"  # every block's conv1 + bn1 + relu
BLOCK_CONV2 = "fused_conv2d1_add_add1_relu"  # every block's conv2 + bn2 + add + relu
CONVS = ["conv2d"]


@pytest.fixture(scope="module")
def resnet():
    m, x, ep, want = tiny_resnet()
    return from_exported_program(ep), x.numpy(), want


def _run(exe, x):
    out = wb.relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x))
    return out[0].numpy()


def _tune(mod, work_dir, budget, per_task, **kwargs):
    kwargs.setdefault("dashboard", wb_dashboard())
    kwargs.setdefault("op_names", CONVS)
    return tune_relax(mod, None, TARGET, str(work_dir), max_trials_global=budget,
                      max_trials_per_task=per_task, num_trials_per_iter=4,
                      strategy="replay-trace", runner=fast_runner(), cost_model=xgb_1thread(),
                      seed=0, **kwargs)


def wb_dashboard():
    from workbench.widgets import TuningDashboard
    return TuningDashboard("text", file=io.StringIO())


def stop_in_first_batch():
    """A dashboard whose Stop is clicked while the first batch is measured."""
    from workbench.widgets import TuningDashboard

    class Board(TuningDashboard):
        def apply(self, *args):
            self.request_stop()
            super().apply(*args)

    return Board("text", file=io.StringIO())


@pytest.fixture
def ms_log():
    """The messages of the tuner's global logger (it does not propagate to pytest's)."""
    messages: list[str] = []

    class Handler(logging.Handler):
        def emit(self, record):
            messages.append(record.getMessage())

    handler = Handler(logging.INFO)
    log = logging.getLogger("workbench.meta_schedule")
    level = log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    yield messages
    log.removeHandler(handler)
    log.setLevel(level)


def _applied(db, mod):
    apply = MetaScheduleApplyDatabase(db, TARGET)
    apply(_fuse(mod, TARGET))
    return set(apply.applied)


def _records_by_task(db, mod):
    tasks = [t for t in extract_tasks(mod, TARGET) if "conv2d" in t.task_name]
    return dict(zip([t.task_name for t in tasks],
                    trials_done(db, [t.dispatched[0] for t in tasks])))


# ---- without measuring -----------------------------------------------------------------------

def test_tasks_are_weighted_by_call_count_and_name_their_layers(resnet):
    mod, _, _ = resnet
    tasks = {t.task_name: t for t in extract_tasks(mod, TARGET)}
    assert tasks[STEM].weight == 1 and tasks[STEM].layers == ["conv1 + bn1 + relu"]
    assert tasks[BLOCK_CONV1].weight == 2
    assert tasks[BLOCK_CONV1].layers == ["layer1.0.conv1 + bn1 + relu",
                                         "layer1.1.conv1 + bn1 + relu"]


def _commit(db, task, run_secs, schedule=0):
    """A record of the task's unscheduled kernel, as if measured; ``schedule`` tells traces
    apart (a decision of their own), as if each were a schedule of its own."""
    sch = Schedule(task.dispatched[0])
    sch.sample_categorical(list(range(8)), [1 / 8] * 8, decision=schedule)
    db.commit_tuning_record(TuningRecord(sch.trace, db.commit_workload(task.dispatched[0]),
                                         run_secs, Target(TARGET),
                                         ArgInfo.from_entry_func(sch.mod)))


def test_trials_done_counts_valid_and_failed_records_per_task(resnet, tmp_path):
    mod, _, _ = resnet
    tasks = [t for t in extract_tasks(mod, TARGET) if "conv2d" in t.task_name]
    db = JSONDatabase(work_dir=str(tmp_path))
    for task, n in zip(tasks, (3, 1)):
        for k in range(n):
            _commit(db, task, [1e-4 * k] if k else [1e10], schedule=k)  # the first failed
    # the confirmation's re-measurements are records of a schedule measured before
    for _ in range(2):
        _commit(db, tasks[0], [1e-4], schedule=1)
    assert trials_done(db, [t.dispatched[0] for t in tasks]) == [3, 1, 0]
    # a database read back from the work directory counts the same
    again = JSONDatabase(work_dir=str(tmp_path))
    assert trials_done(again, [t.dispatched[0] for t in tasks]) == [3, 1, 0]


def test_a_used_up_budget_tunes_nothing(resnet, tmp_path, ms_log):
    mod, _, _ = resnet
    tasks = [t for t in extract_tasks(mod, TARGET) if "conv2d" in t.task_name]
    db = MemoryDatabase()
    for task in tasks:
        for k in range(2):
            _commit(db, task, [1e-4], schedule=k)
    out = tune_relax(mod, None, TARGET, str(tmp_path / "wd"), max_trials_global=64,
                     max_trials_per_task=2, op_names=CONVS, database=db)
    assert out is db and len(db) == 2 * len(tasks)
    assert any("holds 6 trial(s)" in m and "budget is used up" in m for m in ms_log)
    assert not os.path.exists(tmp_path / "wd")   # nothing was started


def test_seeded_strategy_measures_its_seeds_first():
    calls = []

    class Inner(ReplayTrace):
        def pre_tuning(self, max_trials, *args):
            calls.append(("pre_tuning", max_trials))

        def generate_measure_candidates(self):
            return ["searched"]

        def notify_runner_results(self, cands, results):
            calls.append(("notify", cands))

    seeded = SeededStrategy(Inner(), ["default"])
    seeded.pre_tuning(8, 4, [])
    first = seeded.generate_measure_candidates()
    assert first == ["default"]
    seeded.notify_runner_results(first, [None])          # the seed's result stays outside
    assert seeded.generate_measure_candidates() == ["searched"]
    seeded.notify_runner_results(["searched"], [None])
    assert calls == [("pre_tuning", 7), ("notify", ["searched"])]
    seeded.pre_tuning(0, 4, [])                          # no budget: no seed either
    assert calls[-1] == ("pre_tuning", 0) and seeded.generate_measure_candidates() == [
        "searched"]
    many = SeededStrategy(Inner(), ["s0", "s1", "s2", "s3", "s4"])
    many.pre_tuning(8, 2, [])                 # seeds go in batches of num_trials_per_iter
    batches = []
    for _ in range(4):
        batch = many.generate_measure_candidates()
        many.notify_runner_results(batch, [None] * len(batch))
        batches.append(batch)
    assert batches == [["s0", "s1"], ["s2", "s3"], ["s4"], ["searched"]]
    assert calls[-2:] == [("pre_tuning", 3), ("notify", ["searched"])]


def test_default_schedule_candidate_is_the_builds_schedule(resnet):
    from workbench.dlight import default_schedule
    mod, _, _ = resnet
    task = next(t for t in extract_tasks(mod, TARGET) if t.task_name == STEM)
    cand = default_schedule_candidate(task.dispatched[0], Target(TARGET))
    want = default_schedule(task.dispatched[0], Target(TARGET))["main"]
    assert structural_equal(cand.sch.mod["main"].body, want.body)
    # the trace replays on the task module (what the database and compile_relax do)
    again = Schedule(task.dispatched[0])
    cand.sch.trace.apply_to_schedule(again, remove_postproc=False)
    assert structural_equal(again.mod["main"].body, want.body)
    assert [list(a.shape) for a in cand.args_info] == [
        [int(d.value) for d in task.dispatched[0]["main"].buffer_map[p].shape]
        for p in task.dispatched[0]["main"].params]


def test_capped_strategy_passes_the_smaller_cap():
    inner = ReplayTrace()
    seen = []
    inner.pre_tuning = lambda max_trials, *args: seen.append(max_trials)
    capped = CappedStrategy(inner, 3)
    capped.pre_tuning(64, 4, [])
    capped.pre_tuning(2, 4, [])
    assert seen == [3, 2]
    assert isinstance(capped.clone(), CappedStrategy) and capped.clone().cap == 3
    with pytest.raises(ValueError, match="cap must be an int >= 0"):
        CappedStrategy(inner, -1)
    with pytest.raises(TypeError, match="inner must be a SearchStrategy"):
        CappedStrategy("replay-trace", 1)


# ---- tuning runs -----------------------------------------------------------------------------

@pytest.mark.tuning
@pytest.mark.slow
def test_a_stopped_run_resumes_from_its_work_directory(resnet, tmp_path, ms_log):
    """Tuning, stopped from the dashboard, resumed by the same call; then compiled."""
    mod, x, want = resnet
    # The gradient scheduler sends one batch of each task before joining any -- its first
    # batch measures the task's default schedule and its neighbouring register tiles (at most
    # half the task's 8 trials) -- and Stop during the first join lets the batches in flight
    # finish: each task's records are exactly those seeds, the default schedule first.
    stopped = _tune(mod, tmp_path, budget=24, per_task=8, dashboard=stop_in_first_batch())
    seeds = {}
    for task in extract_tasks(mod, TARGET):
        if "conv2d" in task.task_name:
            seeds[task.task_name] = [c.sch.trace.as_json() for c in default_schedule_candidates(
                task.dispatched[0], Target(TARGET), 4)]
            first = default_schedule_candidate(task.dispatched[0], Target(TARGET))
            assert seeds[task.task_name][0] == first.sch.trace.as_json()
    assert _records_by_task(stopped, mod) == {n: len(s) for n, s in seeds.items()}
    assert all(1 < len(s) <= 4 for s in seeds.values())       # every conv has neighbours
    recorded = sorted(str(r.trace.as_json()) for r in stopped.get_all_tuning_records())
    assert recorded == sorted(str(t) for s in seeds.values() for t in s)
    n_seeds = len(stopped)

    board = wb_dashboard()
    resumed = _tune(mod, tmp_path, budget=24, per_task=8, dashboard=board)
    assert any(f"holds {n_seeds} trial(s)" in m and f"{24 - n_seeds} of the global budget "
               "left" in m for m in ms_log)
    assert resumed is not stopped and len(resumed) == 24   # read back from the work dir
    assert set(_records_by_task(resumed, mod).values()) == {8}
    assert board.progress.snapshot().trials == 24 - n_seeds   # only what was left
    table = board.frame.set_index("Name")   # tasks weighted by calls, named by layers
    assert table.loc[BLOCK_CONV1, "Weight"] == 2
    assert table.loc[BLOCK_CONV1, "Layers"] == "layer1.0.conv1 + bn1 + relu (+1 more)"
    assert table.loc[STEM, "Layers"] == "conv1 + bn1 + relu"
    assert {STEM, BLOCK_CONV1, BLOCK_CONV2} <= _applied(resumed, mod)

    again = _tune(mod, tmp_path, budget=24, per_task=8)
    assert len(again) == 24 and "budget is used up" in ms_log[-1]
    # the model built with the best records still computes what PyTorch does
    np.testing.assert_allclose(_run(compile_relax(again, mod, TARGET), x), want,
                               rtol=1e-4, atol=1e-4)


@pytest.mark.tuning
@pytest.mark.slow
def test_a_task_shared_with_an_earlier_model_reuses_its_records(resnet, tmp_path):
    first, _, _ = resnet
    _tune(first, tmp_path, budget=4, per_task=4, op_names=[BLOCK_CONV1])

    # Another model (one block, 5 classes, other weights) has the same block kernel.
    m, x, ep, want = tiny_resnet(seed=1, blocks=1, classes=5)
    second = from_exported_program(ep)
    before = _records_by_task(JSONDatabase(work_dir=str(tmp_path)), second)
    assert before == {STEM: 0, BLOCK_CONV1: 4, BLOCK_CONV2: 0}

    db = _tune(second, tmp_path, budget=12, per_task=4)
    # its other two tasks got the rest of the budget; the shared one was not tuned again
    assert _records_by_task(db, second) == {STEM: 4, BLOCK_CONV1: 4,
                                            BLOCK_CONV2: 4}
    assert len(db) == 12
    assert BLOCK_CONV1 in _applied(db, second)
    np.testing.assert_allclose(_run(compile_relax(db, second, TARGET), x.numpy()), want,
                               rtol=1e-4, atol=1e-4)
