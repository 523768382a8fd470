"""LocalBuilder: builds in worker processes, survives exceptions, hangs and crashes."""
import os
import signal

import numpy as np
import pytest

import workbench as wb
from workbench.codegen.testing import llvm_abort_available
from workbench.meta_schedule.builder import (
    Builder, BuilderInput, BuilderResult, LocalBuilder, PyBuilder,
)

import ms_workloads
from ms_workloads import matmul, scheduled


class TrackingBuilder(LocalBuilder):
    """Remembers its results so the test module removes the artifacts it made."""

    made = []

    def build(self, build_inputs):
        results = super().build(build_inputs)
        self.made.extend(results)
        return results


@pytest.fixture(scope="module", autouse=True)
def _cleanup():
    yield
    ms_workloads.remove_artifacts(TrackingBuilder.made)


@pytest.fixture(scope="module")
def builder():
    b = TrackingBuilder(max_workers=2, timeout_sec=60, cache=False)  # every build reaches a worker
    yield b
    b.shutdown()


def _check_matmul_artifact(path, n):
    rt = wb.runtime.load_module(path)
    a, b = np.random.rand(n, n).astype("float32"), np.random.rand(n, n).astype("float32")
    c = wb.nd.empty((n, n), "float32")
    rt["main"](wb.nd.array(a), wb.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5)


def test_build_success_artifacts_in_fresh_dirs(builder):
    mods = [matmul(16), scheduled(matmul(24), 4).mod, matmul(8)]
    results = builder.build([BuilderInput(m, "llvm") for m in mods])
    assert all(r.error_msg is None for r in results), results
    paths = [r.artifact_path for r in results]
    assert len({os.path.dirname(p) for p in paths}) == 3
    for path, n in zip(paths, (16, 24, 8)):
        assert path.endswith(".o") and os.path.isfile(path)
        _check_matmul_artifact(path, n)
    pids_before = sorted(builder.worker_pids)  # the workers survive between calls
    assert builder.build([BuilderInput(matmul(16), "llvm")])[0].error_msg is None
    assert sorted(builder.worker_pids) == pids_before
    assert builder.worker_startup_seconds is not None


def test_pool_recovers_from_a_worker_killed_while_idle(builder):
    assert builder.build([BuilderInput(matmul(8), "llvm")])[0].error_msg is None
    victim = builder.worker_pids[0]
    os.kill(victim, signal.SIGKILL)
    _wait_gone(victim)
    results = builder.build([BuilderInput(matmul(n), "llvm") for n in (8, 16, 24)])
    assert [r.error_msg for r in results] == [None] * 3
    assert victim not in builder.worker_pids


def _wait_gone(pid: int) -> None:
    """Until the process has exited whole. A killed multithreaded process shows its leader
    as a zombie while its other threads are still torn down: until they are, its files stay
    open and its parent cannot reap it, so a pool could still take it for a live idle
    worker (a job sent then came back "crashed", about 1 run in 10 on a loaded host)."""
    import time
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                zombie = f.read().rsplit(")", 1)[1].split()[0] == "Z"
            if zombie and len(os.listdir(f"/proc/{pid}/task")) <= 1:
                return
        except FileNotFoundError:
            return
        time.sleep(0.05)


def test_build_exception_is_reported():
    b = TrackingBuilder(max_workers=1, f_build=ms_workloads.build_raises)
    try:
        (res,) = b.build([BuilderInput(matmul(8), "llvm")])
    finally:
        b.shutdown()
    assert res.artifact_path is None
    assert res.error_msg.startswith("LocalBuilder: An exception occurred\nTraceback")
    assert "ValueError: boom" in res.error_msg


def test_build_timeout_kills_only_the_slow_job():
    b = TrackingBuilder(max_workers=2, timeout_sec=2, f_build=ms_workloads.build_sleepy)
    try:
        mods = [matmul(8), matmul(16).with_attr("test_sleep", 120), matmul(24), matmul(8)]
        results = b.build([BuilderInput(m, "llvm") for m in mods])
        assert results[1].error_msg == "LocalBuilder: Timeout, killed after 2 seconds"
        assert results[1].artifact_path is None
        for i in (0, 2, 3):
            assert results[i].error_msg is None, results[i].error_msg
        _check_matmul_artifact(results[2].artifact_path, 24)
        # the pool was recreated: the next batch works
        assert b.build([BuilderInput(matmul(16), "llvm")])[0].error_msg is None
    finally:
        b.shutdown()


def test_worker_crash_is_pinned_on_its_job():
    b = TrackingBuilder(max_workers=2, timeout_sec=60, f_build=ms_workloads.build_aborts_if_marked)
    try:
        mods = [matmul(8), matmul(16).with_attr("test_abort", True), matmul(24)]
        results = b.build([BuilderInput(m, "llvm") for m in mods])
        assert results[1].error_msg == "LocalBuilder: The worker process crashed: the worker " \
            "process was killed by signal SIGABRT (Aborted)"
        assert results[0].error_msg is None and results[2].error_msg is None
        _check_matmul_artifact(results[0].artifact_path, 8)
    finally:
        b.shutdown()


@pytest.mark.skipif(not llvm_abort_available(), reason="the aborting IR targets x86")
def test_llvm_abort_in_a_worker_is_an_error_naming_signal_stage_and_ir(tmp_path):
    """LLVM aborts inside a builder worker's compile: the job's error says so (signal, stage,
    saved IR), the worker itself survives (no pool restart) and builds the other jobs."""
    b = TrackingBuilder(max_workers=1, timeout_sec=120,
                        f_build=ms_workloads.build_llvm_aborts_if_marked)
    try:
        with wb.options.override(cache_dir=str(tmp_path)):
            mods = [matmul(8), matmul(16).with_attr("test_llvm_abort", True), matmul(24)]
            results = b.build([BuilderInput(m, "llvm") for m in mods])
            worker_pids = set(b.worker_pids)
            msg = results[1].error_msg
            assert msg.startswith("LocalBuilder: An exception occurred"), msg
            assert "LLVMCrashError" in msg and "SIGABRT" in msg and "stage 'codegen'" in msg
            assert "tuned_kernel" in msg
            saved = msg.split("The LLVM IR is saved in ", 1)[1].split(" (", 1)[0]
            assert saved.startswith(str(tmp_path)) and os.path.isfile(saved)
            assert results[0].error_msg is None and results[2].error_msg is None
            _check_matmul_artifact(results[2].artifact_path, 24)
            assert b.build([BuilderInput(matmul(8), "llvm")])[0].error_msg is None
            assert set(b.worker_pids) == worker_pids  # the worker never died
    finally:
        b.shutdown()


def test_builder_create_and_py_builder():
    b = Builder.create("local", max_workers=1)
    assert isinstance(b, LocalBuilder) and b.timeout_sec == 30.0
    with pytest.raises(ValueError, match="local"):
        Builder.create("rpc")

    class Echo(PyBuilder):
        def build(self, build_inputs):
            return [BuilderResult(None, f"no build for {list(bi.mod)}") for bi in build_inputs]

    (res,) = Echo().build([BuilderInput(matmul(8), "llvm")])
    assert res.error_msg == "no build for ['main']"


def test_build_functions_defined_anywhere_reach_the_workers():
    """A lambda or a function of a notebook cell (``__main__``) travels by value (the workers
    never import the parent's ``__main__``); what cannot be pickled at all is a clear error."""
    import threading

    from workbench.meta_schedule.builder.local_builder import default_build

    seen = []
    b = TrackingBuilder(max_workers=1, f_build=lambda mod, target, params:
                        default_build(mod, target, params))
    try:
        (res,) = b.build([BuilderInput(matmul(8), "llvm")])
        assert res.error_msg is None, res.error_msg
        _check_matmul_artifact(res.artifact_path, 8)
        lock = threading.Lock()
        b.f_build = lambda mod, target, params: seen.append(lock)
        with pytest.raises(TypeError, match="cannot send .* to a worker process"):
            b.build([BuilderInput(matmul(8), "llvm")])
        assert b.build([]) == []
    finally:
        b.shutdown()


def test_prestarted_workers_do_the_builds_and_a_tuning_run_prestarts_them():
    """prestart() launches the build workers without waiting; the next build runs in them.
    TaskScheduler.tune prestarts its builder and runner before it initializes the tasks."""
    from workbench.meta_schedule.runner import LocalRunner

    b = TrackingBuilder(max_workers=2, timeout_sec=60, cache=False)
    r = LocalRunner()
    try:
        b.prestart()
        r.prestart()
        pids = set(b.worker_pids)
        assert len(pids) == 2 and r.worker_pid is not None
        results = b.build([BuilderInput(matmul(16), "llvm")] * 2)
        assert all(res.error_msg is None for res in results)
        assert set(b.worker_pids) == pids
    finally:
        b.shutdown()
        r.shutdown()

    from workbench import meta_schedule as ms

    calls = []

    class Watched(TrackingBuilder):
        def prestart(self):
            calls.append("builder")
            super().prestart()

    class WatchedRunner(LocalRunner):
        def prestart(self):
            calls.append("runner")
            super().prestart()

    import tempfile
    builder, runner = Watched(max_workers=1, timeout_sec=60), WatchedRunner()
    try:
        ms.tune_tir(matmul(16), "llvm", tempfile.mkdtemp(), max_trials_global=1,
                    num_trials_per_iter=1, builder=builder, runner=runner,
                    strategy="replay-trace", cost_model="random")
    finally:
        builder.shutdown()
        runner.shutdown()
    assert calls[:2] == ["builder", "runner"]
