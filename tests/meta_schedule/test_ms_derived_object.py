"""derived_object: user subclasses of every Py* extension class, used in real tuning runs."""
from __future__ import annotations

import numpy as np
import pytest
from ms_tuning_workloads import fast_runner, matmul, random_args, run, small_evolutionary

import workbench.meta_schedule as ms
from workbench.meta_schedule import derived_object
from workbench.meta_schedule.builder import LocalBuilder, PyBuilder
from workbench.meta_schedule.cost_model import PyCostModel
from workbench.meta_schedule.database import MemoryDatabase, PyDatabase
from workbench.meta_schedule.feature_extractor import PyFeatureExtractor
from workbench.meta_schedule.measure_callback import PyMeasureCallback
from workbench.meta_schedule.mutator import MutateTileSize, PyMutator
from workbench.meta_schedule.postproc import Postproc, PyPostproc
from workbench.meta_schedule.runner import PyRunner
from workbench.meta_schedule.schedule_rule import PyScheduleRule
from workbench.meta_schedule.search_strategy import PySearchStrategy, ReplayTrace
from workbench.meta_schedule.space_generator import PySpaceGenerator
from workbench.meta_schedule.task_scheduler import PyTaskScheduler
from workbench.tir.schedule import Schedule

TARGET = "llvm -num-cores=2"
CALLS: dict[str, int] = {}


def _count(name: str) -> None:
    CALLS[name] = CALLS.get(name, 0) + 1


@derived_object
class TileRule(PyScheduleRule):
    """Tile the matmul's i and j loops with sampled perfect tiles."""

    def apply(self, sch, block):
        _count("rule")
        if sch.get(block).name_hint != "C":
            return [sch]
        i, j, k = sch.get_loops(block)
        i0, i1 = sch.split(i, sch.sample_perfect_tile(i, n=2, max_innermost_factor=16))
        j0, j1 = sch.split(j, sch.sample_perfect_tile(j, n=2, max_innermost_factor=16))
        sch.reorder(i0, j0, k, i1, j1)
        return [sch]


@derived_object
class CountingPostproc(PyPostproc):
    def apply(self, sch):
        _count("postproc")
        return True


@derived_object
class TileMutator(PyMutator):
    def __init__(self):
        self.inner = MutateTileSize()

    def _initialize_with_tune_context(self, context):
        self.inner._initialize_with_tune_context(context)

    def apply(self, trace):
        _count("mutator")
        return self.inner.apply(trace)


@derived_object
class MySpace(PySpaceGenerator):
    def __init__(self):
        super().__init__(sch_rules=[TileRule()],
                         postprocs=[CountingPostproc()] + Postproc.create("llvm"),
                         mutator_probs={TileMutator(): 1.0})

    def generate_design_space(self, mod):
        _count("space")
        sch = Schedule(mod, seed=self.rand.fork_seed())
        block = sch.get_block("C")
        out = [sch]
        for rule in self.sch_rules:
            out = [s for cur in out for s in rule.apply(cur, block)]
        return out


@derived_object
class MyFeatures(PyFeatureExtractor):
    def extract_from(self, context, candidates):
        _count("features")
        return [np.array([[len(c.sch.trace.insts), 1.0]], dtype="float32") for c in candidates]


@derived_object
class MyCostModel(PyCostModel):
    def __init__(self):
        self.extractor = MyFeatures()
        self.seen = 0

    def load(self, path):
        pass

    def save(self, path):
        pass

    def update(self, context, candidates, results):
        _count("cost_update")
        self.extractor.extract_from(context, candidates)
        self.seen += len(candidates)

    def predict(self, context, candidates):
        _count("cost_predict")
        feats = self.extractor.extract_from(context, candidates)
        return np.array([f.sum() for f in feats], dtype="float64")


@derived_object
class MyBuilder(PyBuilder):
    def __init__(self):
        self.inner = LocalBuilder(max_workers=1)

    def build(self, build_inputs):
        _count("build")
        return self.inner.build(build_inputs)


@derived_object
class MyRunner(PyRunner):
    def __init__(self):
        self.inner = fast_runner()

    def run(self, runner_inputs):
        _count("run")
        assert all(r.reference for r in runner_inputs), "output check reference missing"
        return self.inner.run(runner_inputs)


@derived_object
class MyDatabase(PyDatabase):
    def __init__(self):
        self.inner = MemoryDatabase()

    def has_workload(self, mod):
        return self.inner.has_workload(mod)

    def commit_workload(self, mod):
        _count("commit_workload")
        return self.inner.commit_workload(mod)

    def commit_tuning_record(self, record):
        _count("commit_record")
        self.inner.commit_tuning_record(record)

    def get_top_k(self, workload, top_k):
        return self.inner.get_top_k(workload, top_k)

    def get_all_tuning_records(self):
        return self.inner.get_all_tuning_records()

    def query_tuning_record(self, mod, target=None, workload_name="main"):
        return self.inner.query_tuning_record(mod, target, workload_name)

    def query_schedule(self, mod, target=None, workload_name="main"):
        return self.inner.query_schedule(mod, target, workload_name)

    def query_ir_module(self, mod, target=None, workload_name="main"):
        return self.inner.query_ir_module(mod, target, workload_name)

    def __len__(self):
        return len(self.inner)


@derived_object
class MyCallback(PyMeasureCallback):
    def apply(self, task_scheduler, task_id, measure_candidates, builder_results,
              runner_results):
        _count("callback")
        assert task_scheduler.tasks_[task_id].ctx.mod is not None


@derived_object
class MyScheduler(PyTaskScheduler):
    def next_task_id(self):
        _count("next_task")
        for i, task in enumerate(self.tasks_):
            if not task.is_terminated:
                if task.runner_futures is not None:
                    self.join_running_task(i)
                return i
        return -1


@derived_object
class MyStrategy(PySearchStrategy):
    """Delegates to ReplayTrace, counting the lifecycle calls."""

    def __init__(self):
        self.inner = ReplayTrace()

    def _initialize_with_tune_context(self, context):
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, *args, **kwargs):
        _count("pre_tuning")
        self.inner.pre_tuning(*args, **kwargs)

    def post_tuning(self):
        _count("post_tuning")
        self.inner.post_tuning()

    def generate_measure_candidates(self):
        _count("generate")
        return self.inner.generate_measure_candidates()

    def notify_runner_results(self, measure_candidates, results):
        _count("notify")
        self.inner.notify_runner_results(measure_candidates, results)

    def clone(self):
        return MyStrategy()


def _check(db, func):
    sch = db.query_schedule(ms.tir_integration._named_tasks(func)[0][1], TARGET, "main")
    args = random_args(func)
    np.testing.assert_allclose(run(sch.mod, args)[-1], args[0] @ args[1], rtol=1e-4)


@pytest.mark.tuning
def test_every_py_class_in_a_tuning_run(tmp_path):
    CALLS.clear()
    func = matmul(32)
    cost_model = MyCostModel()
    db = ms.tune_tir(func, TARGET, str(tmp_path), max_trials_global=4, num_trials_per_iter=2,
                     space=MySpace(), strategy=small_evolutionary(genetic_mutate_prob=1.0),
                     builder=MyBuilder(), runner=MyRunner(), database=MyDatabase(),
                     cost_model=cost_model, measure_callbacks=["default", MyCallback()],
                     task_scheduler=MyScheduler(), seed=1)
    assert isinstance(db, MyDatabase) and len(db) == 4
    for name in ("space", "rule", "postproc", "mutator", "features", "cost_update",
                 "cost_predict", "build", "run", "commit_workload", "commit_record",
                 "callback", "next_task"):
        assert CALLS.get(name, 0) > 0, name
    assert cost_model.seen == 4
    _check(db, func)

    CALLS.clear()
    db = ms.tune_tir(func, TARGET, str(tmp_path / "b"), max_trials_global=4,
                     num_trials_per_iter=2, space=MySpace(), strategy=MyStrategy(),
                     runner=fast_runner(), database="memory", cost_model="random", seed=2)
    assert CALLS["pre_tuning"] == 1 and CALLS["post_tuning"] == 1
    assert CALLS["generate"] >= 2 and CALLS["notify"] == 2
    _check(db, func)


def test_derived_object_checks():
    with pytest.raises(TypeError, match="must subclass"):
        @derived_object
        class NotPy:
            pass

    with pytest.raises(TypeError, match="does not implement apply"):
        @derived_object
        class NoApply(PyPostproc):
            pass

    with pytest.raises(TypeError, match="does not implement run"):
        @derived_object
        class NoRun(PyRunner):
            pass

    with pytest.raises(TypeError, match="load, predict, save, update"):
        @derived_object
        class Empty(PyCostModel):
            pass

    assert TileRule._derived_object is True
    assert isinstance(TileRule(), ms.ScheduleRule)
    assert isinstance(MyScheduler(), ms.TaskScheduler)
