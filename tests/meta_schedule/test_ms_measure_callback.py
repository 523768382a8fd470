"""Measure callbacks, alone with stand-in scheduler objects and end to end with the real
builder, runner and databases."""
import os
import tempfile
from types import SimpleNamespace

import pytest

from workbench.ir import structural_equal
from workbench.meta_schedule.arg_info import ArgInfo
from workbench.meta_schedule.builder import BuilderInput, BuilderResult, LocalBuilder
from workbench.meta_schedule.database import JSONDatabase, MemoryDatabase
from workbench.meta_schedule.measure_callback import (
    AddToDatabase, MeasureCallback, PyMeasureCallback, RemoveBuildArtifact, UpdateCostModel,
)
from workbench.meta_schedule.profiler import Profiler
from workbench.meta_schedule.runner import (
    EvaluatorConfig, LocalRunner, RunnerInput, RunnerResult, make_reference,
)
from workbench.target import Target

from ms_workloads import matmul, scheduled

TARGET = Target("llvm")


class RecordingCostModel:
    def __init__(self):
        self.calls = []

    def update(self, context, candidates, results):
        self.calls.append((context, list(candidates), list(results)))


def fake_scheduler(mod, database=None, cost_model=None):
    """What callbacks read of a TaskScheduler: TVM's field names."""
    ctx = SimpleNamespace(mod=mod, target=TARGET)
    return SimpleNamespace(tasks_=[SimpleNamespace(ctx=ctx)], database_=database,
                           cost_model_=cost_model)


def candidates(mod, factors):
    info = ArgInfo.from_entry_func(mod)
    return [SimpleNamespace(sch=scheduled(mod, f), args_info=info) for f in factors]


def artifact():
    d = tempfile.mkdtemp(prefix="ms_cb_test_")
    path = os.path.join(d, "mod.o")
    open(path, "wb").close()
    return path


def test_default_list():
    cbs = MeasureCallback.create("default")
    assert [type(c) for c in cbs] == [AddToDatabase, RemoveBuildArtifact, UpdateCostModel]
    with pytest.raises(ValueError):
        MeasureCallback.create("verbose")


def test_add_to_database_records_failures_as_1e10():
    mod = matmul(16)
    db = MemoryDatabase()
    ts = fake_scheduler(mod, database=db)
    cands = candidates(mod, [2, 4, 8])
    built = [BuilderResult("a.o", None), BuilderResult(None, "LocalBuilder: boom"),
             BuilderResult("c.o", None)]
    ran = [RunnerResult([0.002, 0.004], None), RunnerResult(None, "LocalBuilder: boom"),
           RunnerResult(None, "LocalRunner: wrong result: max abs error 1")]
    with Profiler() as prof:
        AddToDatabase().apply(ts, 0, cands, built, ran)
    assert "MeasureCallback/AddToDatabase" in prof.get()
    records = db.get_all_tuning_records()
    assert [r.run_secs for r in records] == [[0.002, 0.004], [1e10], [1e10]]
    assert all(r.target is TARGET and r.args_info == cands[0].args_info for r in records)
    assert [r.run_secs for r in db.get_top_k(db.commit_workload(mod), 5)] == [[0.002, 0.004]]
    assert records[0].trace is cands[0].sch.trace
    AddToDatabase().apply(fake_scheduler(mod), 0, cands, built, ran)  # no database: no-op


def test_remove_build_artifact_deletes_the_directories():
    paths = [artifact(), artifact()]
    built = [BuilderResult(paths[0], None), BuilderResult(None, "failed"),
             BuilderResult(paths[1], None)]
    RemoveBuildArtifact().apply(fake_scheduler(matmul(8)), 0, [None] * 3, built, [None] * 3)
    assert not any(os.path.exists(os.path.dirname(p)) for p in paths)


def test_update_cost_model_filters_like_tvm():
    mod = matmul(16)
    model = RecordingCostModel()
    ts = fake_scheduler(mod, cost_model=model)
    cands = candidates(mod, [2, 4, 8, 16])
    built = [BuilderResult("a", None), BuilderResult(None, "build failed"),
             BuilderResult("c", None), BuilderResult("d", None)]
    ran = [RunnerResult([0.001], None), RunnerResult(None, "build failed"),
           RunnerResult(None, "LocalRunner: Timeout"), RunnerResult([0.0, 0.0], None)]
    UpdateCostModel().apply(ts, 0, cands, built, ran)
    ((ctx, got_cands, got_results),) = model.calls
    assert ctx is ts.tasks_[0].ctx
    assert got_cands == [cands[0], cands[2]] and got_results == [ran[0], ran[2]]
    UpdateCostModel().apply(fake_scheduler(mod), 0, cands, built, ran)  # no model: no-op


def test_py_measure_callback():
    class Count(PyMeasureCallback):
        def __init__(self):
            self.n = 0

        def apply(self, task_scheduler, task_id, measure_candidates, builder_results,
                  runner_results):
            self.n += len(measure_candidates)

    cb = Count()
    cb.apply(None, 0, [1, 2], [], [])
    assert cb.n == 2 and isinstance(cb, MeasureCallback)


def test_measure_pipeline_end_to_end(tmp_path):
    """Build and run real candidates (one of them wrong), apply the default callbacks, and
    read the best schedule back from a reopened JSON database."""
    mod = matmul(32)
    cands = candidates(mod, [2, 4, 8])
    wrong = scheduled(matmul(32, scale=0.5), 16)  # a fast but wrong kernel
    cands.append(SimpleNamespace(sch=wrong, args_info=cands[0].args_info))
    builder = LocalBuilder(max_workers=2, timeout_sec=60)
    runner = LocalRunner(timeout_sec=10, evaluator_config=EvaluatorConfig(
        number=2, repeat=1, min_repeat_ms=0))
    try:
        built = builder.build([BuilderInput(c.sch.mod, TARGET) for c in cands])
        ref = make_reference(mod, TARGET, cands[0].args_info, str(tmp_path / "ref"),
                             runner=runner)
        futures = runner.run([RunnerInput(b.artifact_path, "cpu", c.args_info, reference=ref)
                              for b, c in zip(built, cands)])
        ran = [f.result() for f in futures]
    finally:
        builder.shutdown()
        runner.shutdown()
    assert [r.error_msg is None for r in ran] == [True, True, True, False]
    assert ran[3].error_msg.startswith("LocalRunner: wrong result")
    db = JSONDatabase(work_dir=str(tmp_path / "wd"))
    model = RecordingCostModel()
    ts = fake_scheduler(mod, database=db, cost_model=model)
    for cb in MeasureCallback.create("default"):
        cb.apply(ts, 0, cands, built, ran)
    assert not any(os.path.exists(b.artifact_path) for b in built)
    assert len(model.calls[0][1]) == 4  # a failed run still teaches the model
    reopened = JSONDatabase(work_dir=str(tmp_path / "wd"))
    assert len(reopened) == 4
    best = reopened.query_tuning_record(mod, TARGET, "main")
    fastest = min(range(3), key=lambda i: sum(ran[i].run_secs) / len(ran[i].run_secs))
    assert best.run_secs == ran[fastest].run_secs
    assert structural_equal(reopened.query_ir_module(mod, TARGET, "main"),
                            cands[fastest].sch.mod)
