"""Int8 tuning end to end, and tuning that never ends empty without saying why.

The first test is what a user on an AVX-512 host typed and got zero records from: a uint8 x
int8 -> int32 product in numpy's matmul layout ``B[k, j]`` and in the dense layout
``B[j, k]``, at sizes the micro-kernels divide and sizes they do not. One ``tune_tir`` call
tunes them all; every task must end with a record whose schedule computes the exact product.
On a host without VNNI the space is the plain one (the target tests in
``test_ms_cpu_targets.py`` cover the tensorized spaces for every CPU kind on any host).
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

import workbench as wb
from workbench import meta_schedule as ms
from workbench.meta_schedule.postproc import PyPostproc
from workbench.meta_schedule.space_generator import PostOrderApply
from workbench.meta_schedule.utils import derived_object

from ms_tuning_workloads import fast_runner
from test_ms_cpu_targets import product

TARGET = "llvm -num-cores=2"
SIZES = (100, 128, 200, 512, 1000)


def _int8_module():
    funcs = {}
    for layout in ("matmul", "dense"):
        for n in SIZES:
            name = f"{layout}_{n}"
            funcs[name] = product("int8", layout, n, n, n).with_attr("global_symbol", name)
    return wb.IRModule(funcs)


def test_every_int8_layout_and_size_tunes_to_an_exact_kernel(tmp_path):
    mod = _int8_module()
    with warnings.catch_warnings():
        warnings.simplefilter("error", ms.NoValidCandidateWarning)
        db = ms.tune_tir(mod, TARGET, str(tmp_path), max_trials_global=2 * len(SIZES) * 2,
                         num_trials_per_iter=2, task_scheduler="round-robin",
                         strategy="replay-trace", cost_model="random", runner=fast_runner(),
                         seed=3)
    rng = np.random.default_rng(0)
    for layout in ("matmul", "dense"):
        for n in SIZES:
            name = f"{layout}_{n}"
            one = wb.IRModule({"main": mod[name].with_attr("global_symbol", "main")})
            sch = ms.tir_integration.compile_tir(db, one, TARGET)
            lib = wb.build(sch.mod, target=TARGET)
            a = rng.integers(0, 256, (n, n)).astype("uint8")
            b = rng.integers(-128, 128, (n, n)).astype("int8")
            c = wb.nd.array(np.zeros((n, n), "int32"))
            lib["main"](wb.nd.array(a), wb.nd.array(b), c)
            w = b.astype(np.int64) if layout == "matmul" else b.T.astype(np.int64)
            np.testing.assert_array_equal(c.numpy(), (a.astype(np.int64) @ w).astype(np.int32),
                                          err_msg=name)


@derived_object
class RefuseEverything(PyPostproc):
    """A postprocessor that refuses every candidate, saying why."""

    def _initialize_with_tune_context(self, context) -> None:
        pass

    def apply(self, sch) -> bool:
        self.last_refusal = "this test refuses every schedule"
        return False

    def clone(self):
        return RefuseEverything()


def test_a_task_without_a_valid_candidate_says_why_everywhere(tmp_path, capsys):
    """Every sample refused: one warning for the task with the counts and the first refusal,
    the same in the logs (the scheduler's and the task's) and on the dashboard, and
    ``compile_tir`` raises a clear error rather than handing None to ``build``."""
    func = product("int8", "matmul", 32, 32, 32)
    mod = wb.IRModule({"main": func})
    space = PostOrderApply(postprocs=[RefuseEverything()])
    with pytest.warns(ms.NoValidCandidateWarning) as caught:
        db = ms.tune_tir(mod, TARGET, str(tmp_path), max_trials_global=4,
                         num_trials_per_iter=4, strategy="replay-trace", cost_model="random",
                         space=space, runner=fast_runner(), dashboard="text")
    msgs = [str(w.message) for w in caught if issubclass(w.category, ms.NoValidCandidateWarning)]
    assert len(msgs) == 1, msgs
    msg = msgs[0]
    assert "Task #0 ('main') found no valid candidate" in msg
    assert "refused by postprocessors (RefuseEverything: " in msg
    assert "First refusal: RefuseEverything: this test refuses every schedule" in msg
    assert "0 build failure(s)" in msg and "0 run failure(s)" in msg
    logs = {p.name: p.read_text() for p in (tmp_path / "logs").iterdir()}
    assert all("First refusal: RefuseEverything:" in text for text in logs.values()), logs
    out = capsys.readouterr().out
    assert "Warning: Task #0 ('main') found no valid candidate" in out
    assert len(db) == 0
    with pytest.raises(ms.NoValidRecordError, match="no valid tuning record.*'main'"):
        ms.tir_integration.compile_tir(db, mod, TARGET)


def test_a_task_whose_builds_all_fail_reports_the_build_error(tmp_path):
    """Every build fails (a builder whose compiler raises): the warning counts the failures
    and quotes the first error."""
    from workbench.meta_schedule.builder import LocalBuilder
    from ms_workloads import build_raises

    func = product("int8", "matmul", 32, 32, 32)
    with pytest.warns(ms.NoValidCandidateWarning) as caught:
        ms.tune_tir(wb.IRModule({"main": func}), TARGET, str(tmp_path), max_trials_global=2,
                    num_trials_per_iter=2, strategy="replay-trace", cost_model="random",
                    builder=LocalBuilder(f_build=build_raises, max_workers=1),
                    runner=fast_runner())
    msg = next(str(w.message) for w in caught
               if issubclass(w.category, ms.NoValidCandidateWarning))
    assert "2 build failure(s)" in msg, msg
    assert "boom: this build always fails" in msg, msg


def test_an_empty_run_over_earlier_records_says_they_are_kept(tmp_path):
    """A second run in the same work_dir whose samples are all refused still warns, and says
    the database keeps the first run's records (compile_tir still works)."""
    mod = wb.IRModule({"main": product("fp32", "matmul", 16, 16, 16)})
    common = dict(num_trials_per_iter=2, strategy="replay-trace", cost_model="random",
                  runner=fast_runner())
    ms.tune_tir(mod, TARGET, str(tmp_path), max_trials_global=2, **common)
    with pytest.warns(ms.NoValidCandidateWarning, match="keeps this workload's records"):
        db = ms.tune_tir(mod, TARGET, str(tmp_path), max_trials_global=2,
                         space=PostOrderApply(postprocs=[RefuseEverything()]), **common)
    assert ms.tir_integration.compile_tir(db, mod, TARGET) is not None


def test_a_task_the_budget_never_reached_is_not_a_failure(tmp_path):
    """Two tasks, a budget of one batch: the second task gets no trial, which is the budget's
    doing, not a failed search -- no warning."""
    mod = wb.IRModule({name: product("fp32", "matmul", 16, 16, 16).with_attr("global_symbol", name)
                       for name in ("first", "second")})
    with warnings.catch_warnings():
        warnings.simplefilter("error", ms.NoValidCandidateWarning)
        db = ms.tune_tir(mod, TARGET, str(tmp_path), max_trials_global=2, num_trials_per_iter=2,
                         task_scheduler="round-robin", strategy="replay-trace",
                         cost_model="random", runner=fast_runner())
    assert len(db) >= 1
