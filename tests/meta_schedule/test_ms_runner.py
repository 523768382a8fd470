"""LocalRunner: measures in an isolated worker; crashes, hangs and wrong results are recorded
failures and the next candidate is still measured."""
import numpy as np
import pytest

from workbench import options
from workbench.meta_schedule.arg_info import ArgInfo, TensorInfo
from workbench.meta_schedule.builder import BuilderInput, LocalBuilder
from workbench.meta_schedule.runner import (
    EvaluatorConfig, LocalRunner, PyRunner, Runner, RunnerFuture, RunnerInput, RunnerResult,
    make_reference,
)
from workbench.meta_schedule.runner.reference import written_arguments
from workbench.meta_schedule.runner.utils import args_seed, random_arguments

import ms_workloads
from ms_workloads import infinite_loop, matmul, out_of_bounds_store, scheduled

FAST = EvaluatorConfig(number=2, repeat=2, min_repeat_ms=0)


@pytest.fixture(scope="module")
def artifacts():
    """Built once: a correct scheduled matmul, a wrong one, the segfaulting and the hanging
    kernels."""
    b = LocalBuilder(max_workers=2, timeout_sec=60)
    mods = {
        "good": scheduled(matmul(32), 4).mod,
        "good2": scheduled(matmul(32), 8).mod,
        "wrong": scheduled(matmul(32, scale=1.001), 4).mod,  # a modified constant
        "segv": out_of_bounds_store(),
        "hang": infinite_loop(),
        "plain": matmul(32),
    }
    results = b.build([BuilderInput(m, "llvm") for m in mods.values()])
    b.shutdown()
    paths = {}
    for name, res in zip(mods, results):
        assert res.error_msg is None, (name, res.error_msg)
        paths[name] = res.artifact_path
    yield paths
    ms_workloads.remove_artifacts(results)


@pytest.fixture(scope="module")
def runner():
    r = LocalRunner(timeout_sec=2, evaluator_config=FAST)
    yield r
    r.shutdown()


MM_ARGS = [TensorInfo("float32", (32, 32))] * 3
VEC_ARGS = [TensorInfo("float32", (16,))]


def _run(runner, *inputs):
    futures = runner.run(list(inputs))
    assert all(isinstance(f, RunnerFuture) and f.done() for f in futures)
    return [f.result() for f in futures]


def test_correct_kernel_is_measured(artifacts):
    r = LocalRunner(timeout_sec=10, evaluator_config=FAST, alloc_repeat=2)
    try:
        (res,) = _run(r, RunnerInput(artifacts["good"], "cpu", MM_ARGS))
    finally:
        r.shutdown()
    assert res.error_msg is None
    assert len(res.run_secs) == 4 and all(0 < s < 0.1 for s in res.run_secs)


def test_segfault_is_a_failure_and_next_candidate_runs(runner, artifacts):
    _run(runner, RunnerInput(artifacts["good"], "cpu", MM_ARGS))  # worker up
    pid = runner.worker_pid
    crashed, after = _run(runner, RunnerInput(artifacts["segv"], "cpu", VEC_ARGS),
                          RunnerInput(artifacts["good"], "cpu", MM_ARGS))
    assert crashed.run_secs is None
    assert crashed.error_msg.startswith("LocalRunner: The worker process crashed")
    assert "SIGSEGV" in crashed.error_msg
    assert after.error_msg is None and len(after.run_secs) == 2
    assert runner.worker_pid != pid  # replaced


def test_worker_killed_while_idle_is_replaced(runner, artifacts):
    import os
    import signal
    import time

    _run(runner, RunnerInput(artifacts["good"], "cpu", MM_ARGS))
    pid = runner.worker_pid
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)  # dead, not yet reaped: the runner must notice before sending a job
    (res,) = _run(runner, RunnerInput(artifacts["good"], "cpu", MM_ARGS))
    assert res.error_msg is None and runner.worker_pid != pid


def test_abort_in_evaluator_names_the_signal(artifacts):
    r = LocalRunner(timeout_sec=10, evaluator_config=FAST,
                    f_run_evaluator=ms_workloads.evaluator_aborts)
    try:
        (res,) = _run(r, RunnerInput(artifacts["good"], "cpu", MM_ARGS))
    finally:
        r.shutdown()
    assert "SIGABRT" in res.error_msg


def test_hang_is_killed_by_the_timeout(runner, artifacts):
    hung, after = _run(runner, RunnerInput(artifacts["hang"], "cpu", VEC_ARGS),
                       RunnerInput(artifacts["good"], "cpu", MM_ARGS))
    assert hung.error_msg == "LocalRunner: Timeout, killed after 2 seconds"
    assert hung.run_secs is None
    assert after.error_msg is None


def test_wrong_kernel_is_rejected_by_the_output_check(runner, artifacts, tmp_path):
    ref = make_reference(matmul(32), "llvm", MM_ARGS, str(tmp_path), runner=runner)
    assert ref.endswith(".npz")
    assert make_reference(matmul(32), "llvm", MM_ARGS, str(tmp_path)) == ref  # cached
    good, wrong, good2 = _run(
        runner,
        RunnerInput(artifacts["good"], "cpu", MM_ARGS, reference=ref),
        RunnerInput(artifacts["wrong"], "cpu", MM_ARGS, reference=ref),
        RunnerInput(artifacts["good2"], "cpu", MM_ARGS, reference=ref))
    assert good.error_msg is None and good2.error_msg is None
    assert wrong.run_secs is None
    assert wrong.error_msg.startswith("LocalRunner: wrong result: max abs error ")
    assert "argument 2" in wrong.error_msg
    # the reference holds numpy's answer on the seeded inputs
    a, b, _ = random_arguments(MM_ARGS)
    with np.load(ref) as data:
        assert list(data["outputs"]) == [2]
        np.testing.assert_allclose(data["expected_2"], ms_workloads.numpy_matmul(a, b),
                                   rtol=1e-5, atol=1e-5)


def test_reference_may_be_the_unscheduled_artifact(runner, artifacts):
    good, wrong = _run(
        runner,
        RunnerInput(artifacts["good"], "cpu", MM_ARGS, reference=artifacts["plain"]),
        RunnerInput(artifacts["wrong"], "cpu", MM_ARGS, reference=artifacts["plain"]))
    assert good.error_msg is None
    assert wrong.error_msg.startswith("LocalRunner: wrong result: max abs error")


def test_exception_in_evaluator_is_reported(artifacts):
    r = LocalRunner(timeout_sec=10, evaluator_config=FAST,
                    f_run_evaluator=ms_workloads.evaluator_raises)
    try:
        (res,) = _run(r, RunnerInput(artifacts["good"], "cpu", MM_ARGS))
    finally:
        r.shutdown()
    assert res.error_msg.startswith("LocalRunner: An exception occurred\nTraceback")
    assert "evaluator exploded" in res.error_msg


def test_cache_flush_uses_parent_options(runner, artifacts):
    r = LocalRunner(timeout_sec=10, evaluator_config=EvaluatorConfig(
        number=1, repeat=2, min_repeat_ms=0, enable_cpu_cache_flush=True))
    try:
        with options.override(ms_cache_flush_bytes=1 << 20):
            (res,) = _run(r, RunnerInput(artifacts["good"], "cpu", MM_ARGS))
    finally:
        r.shutdown()
    assert res.error_msg is None and len(res.run_secs) == 2


def test_random_arguments_are_seeded_per_args_info():
    a1 = random_arguments(MM_ARGS)
    a2 = random_arguments([x.as_json() for x in MM_ARGS])
    assert all(x is y for x, y in zip(a1, a2))  # cached
    assert args_seed(MM_ARGS) == args_seed([["TENSOR", "float32", [32, 32]]] * 3)
    assert args_seed(MM_ARGS) != args_seed(VEC_ARGS)
    (ints,) = random_arguments([TensorInfo("int32", (1000,))])
    assert ints.min() >= 1 and ints.max() <= 4
    (floats,) = random_arguments([TensorInfo("float16", (1000,))])
    assert floats.dtype == np.float16 and -1 <= floats.min() and floats.max() < 1
    rng = np.random.default_rng(args_seed(MM_ARGS))
    np.testing.assert_array_equal(a1[0], rng.uniform(-1, 1, (32, 32)).astype("float32"))


def test_written_arguments():
    assert written_arguments(matmul(8)["main"]) == [2]
    assert written_arguments(out_of_bounds_store()["main"]) == [0]


def test_runner_create_and_py_runner():
    r = Runner.create("local", timeout_sec=5, max_workers=4)
    assert isinstance(r, LocalRunner) and r.evaluator_config == EvaluatorConfig()
    with options.override(rpc_address=""), pytest.raises(ValueError, match="tracker_host"):
        Runner.create("rpc")  # no cluster configured (the rpc tests use real ones)

    class Fixed(PyRunner):
        def run(self, runner_inputs):
            return [RunnerFuture(lambda: True, lambda: RunnerResult([1.0], None))
                    for _ in runner_inputs]

    (fut,) = Fixed().run([RunnerInput("x.o", "cpu", VEC_ARGS)])
    assert fut.done() and fut.result().run_secs == [1.0]
    assert ArgInfo.from_json(VEC_ARGS[0].as_json()) == VEC_ARGS[0]
