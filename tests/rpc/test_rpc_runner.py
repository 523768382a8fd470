"""The "rpc" runner and the Dask builder on a real cluster (`dask scheduler` + two `dask
worker` processes with a resource key): measurements with the output check, crash isolation,
which worker measured what, builds on the workers, and tune_tir with runner="rpc"."""
import io
import os

import numpy as np
import pytest

import workbench as wb
from workbench import meta_schedule as ms
from workbench.meta_schedule.arg_info import TensorInfo
from workbench.meta_schedule.builder import Builder, BuilderInput, DaskBuilder, LocalBuilder
from workbench.meta_schedule.runner import (
    EvaluatorConfig, RPCConfig, RPCRunner, Runner, RunnerInput, make_reference,
)
from workbench.widgets import TuningDashboard

import ms_workloads
from dask_procs import KEY
from ms_workloads import matmul, out_of_bounds_store, scheduled

FAST = EvaluatorConfig(number=2, repeat=2, min_repeat_ms=0)
MM_ARGS = [TensorInfo("float32", (32, 32))] * 3
VEC_ARGS = [TensorInfo("float32", (16,))]


@pytest.fixture(scope="module")
def config(dask_cluster):
    return RPCConfig(dask_cluster.address, tracker_key=KEY, session_timeout_sec=60)


@pytest.fixture(scope="module")
def artifacts():
    b = LocalBuilder(max_workers=2, timeout_sec=120)
    mods = {"good": scheduled(matmul(32), 4).mod, "good2": scheduled(matmul(32), 8).mod,
            "wrong": scheduled(matmul(32, scale=1.001), 4).mod, "segv": out_of_bounds_store()}
    results = b.build([BuilderInput(m, "llvm") for m in mods.values()])
    b.shutdown()
    assert all(r.error_msg is None for r in results), [r.error_msg for r in results]
    yield {name: r.artifact_path for name, r in zip(mods, results)}
    ms_workloads.remove_artifacts(results)


def test_runner_create_and_config(config):
    r = Runner.create("rpc", rpc_config=config, evaluator_config=FAST, max_workers=2)
    assert isinstance(r, RPCRunner) and r.key == KEY and r.max_workers == 2
    assert {w.name for w in r.workers()} == {"w0", "w1"}
    with pytest.raises(TypeError, match="f_create_session"):
        Runner.create("rpc", rpc_config=config, f_create_session=lambda cfg: None)
    with pytest.raises(ValueError, match="tracker_port"):
        RPCConfig("127.0.0.1", "http")._normalized()
    assert RPCConfig("127.0.0.1", "8786").address == "127.0.0.1:8786"
    assert RPCConfig("tcp://h:1").address == "tcp://h:1"
    with pytest.raises(ValueError, match="full address"):
        RPCConfig("tcp://h:1", 8786)._normalized()
    # runner="rpc" with no config reads the options (environment WORKBENCH_RPC_ADDRESS/_KEY)
    with wb.options.override(rpc_address=config.tracker_host, rpc_key=KEY):
        from_env = Runner.create("rpc")
    assert from_env.rpc_config.tracker_host == config.tracker_host and from_env.key == KEY


def test_measures_checks_and_isolates_on_the_workers(config, artifacts, tmp_path,
                                                     dask_cluster):
    runner = RPCRunner(config, evaluator_config=FAST)
    # the reference is computed on a worker of the key (the runner's hook)
    ref = make_reference(matmul(32), "llvm", MM_ARGS, str(tmp_path), runner=runner)
    assert ref.endswith(".npz") and os.path.getsize(ref) > 0
    nannies = [p.pid for p in dask_cluster.workers]
    inputs = [RunnerInput(artifacts["good"], "cpu", MM_ARGS, reference=ref),
              RunnerInput(artifacts["wrong"], "cpu", MM_ARGS, reference=ref),
              RunnerInput(artifacts["segv"], "cpu", VEC_ARGS),
              RunnerInput(artifacts["good2"], "cpu", MM_ARGS, reference=ref),
              RunnerInput(artifacts["good"], "cpu", MM_ARGS, reference=ref),
              RunnerInput(artifacts["good2"], "cpu", MM_ARGS, reference=ref)]
    futures = runner.run(inputs)
    good, wrong, segv, *more = [f.result() for f in futures]
    assert good.error_msg is None and len(good.run_secs) == 2 and good.worker
    assert wrong.run_secs is None and wrong.error_msg.startswith("RPCRunner: wrong result")
    assert segv.run_secs is None and "crashed" in segv.error_msg and "SIGSEGV" in \
        segv.error_msg
    assert all(r.error_msg is None for r in more)
    workers = {r.worker for r in [good, wrong, segv, *more]}
    assert workers <= {w.address for w in dask_cluster.client().workers(KEY)}
    assert len(workers) == 2  # both workers of the key measured
    # the crash took down the measuring child only: same workers, same nannies
    assert len(dask_cluster.client().workers(KEY)) == 2
    assert all(p.poll() is None for p in dask_cluster.workers)
    assert [p.pid for p in dask_cluster.workers] == nannies


def test_a_check_that_did_not_run_is_never_a_result(config, artifacts, tmp_path):
    from workbench.meta_schedule.runner.rpc_runner import RPCRunnerFuture

    class Job:  # a worker that reports a timing but no passed output check
        def done(self):
            return True

        def result(self):
            return {"kind": "ok", "value": {"run_secs": [1e-6]}, "worker": "tcp://x:1"}

    res = RPCRunnerFuture(Job(), 10, checked=True).result()
    assert res.run_secs is None and "output check did not run" in res.error_msg
    assert RPCRunnerFuture(Job(), 10, checked=False).result().run_secs == [1e-6]


def test_dask_builder(config):
    b = Builder.create("dask", rpc_config=config, timeout_sec=120)
    assert isinstance(b, DaskBuilder)
    good, bad = b.build([BuilderInput(scheduled(matmul(16), 4).mod, "llvm"),
                         BuilderInput(matmul(16), "llvm")])
    assert good.error_msg is None and os.path.isfile(good.artifact_path)
    rt = wb.runtime.load_module(good.artifact_path)  # built remotely, loads here
    a, bb = (np.random.default_rng(1).standard_normal((16, 16)).astype("float32")
             for _ in range(2))
    c = wb.nd.empty((16, 16), "float32")
    rt(wb.nd.array(a), wb.nd.array(bb), c)
    np.testing.assert_allclose(c.numpy(), a @ bb, rtol=1e-4, atol=1e-4)
    assert bad.error_msg is None
    ms_workloads.remove_artifacts([good, bad])
    failing = DaskBuilder(config, f_build=ms_workloads.build_raises)
    (res,) = failing.build([BuilderInput(matmul(8), "llvm")])
    assert res.artifact_path is None
    assert res.error_msg.startswith("DaskBuilder: An exception occurred on worker")
    assert "boom: this build always fails" in res.error_msg


@pytest.mark.tuning
def test_tune_tir_on_the_cluster(config, tmp_path):
    out = io.StringIO()
    dashboard = TuningDashboard("text", file=out)
    # (a small search: this is about where candidates are built and measured)
    db = ms.tune_tir(matmul(64), "llvm -num-cores=1", str(tmp_path), max_trials_global=8,
                     num_trials_per_iter=4, runner="rpc", builder="dask", rpc_config=config,
                     strategy="replay-trace", cost_model="random", dashboard=dashboard,
                     seed=0)
    records = db.get_all_tuning_records()
    assert len(records) == 8
    valid = [r for r in records if r.run_secs[0] < 1e9]
    assert valid
    # the best record compiles here and computes the product
    sch = ms.compile_tir(db, matmul(64), "llvm")
    rt = wb.build(sch.mod, "llvm")
    a, b = (np.random.default_rng(2).standard_normal((64, 64)).astype("float32")
            for _ in range(2))
    c = wb.nd.empty((64, 64), "float32")
    rt(wb.nd.array(a), wb.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)
    # the dashboard knows which worker measured what
    frame = dashboard.workers_frame
    assert frame["Measured"].sum() == 8 and set(frame["Worker"]) <= {
        w.address for w in config.cluster().workers(KEY)}
    assert "Measured on:" in out.getvalue() and "worker" in out.getvalue()


@pytest.mark.tuning
def test_tune_relax_with_an_rpc_config_on_the_in_process_cluster(tmp_path):
    """runner=RPCConfig(...) (short for runner="rpc" + rpc_config) on the in-process
    cluster; the tuned model still computes what numpy does."""
    from rpc_helpers import TwoHeads
    from workbench import relax
    from workbench.meta_schedule.relax_integration import compile_relax, tune_relax
    from workbench.relax.frontend import nn

    model = TwoHeads()
    mod, _ = model.export_tvm({"forward": {"x": nn.spec.Tensor((4, 8), "float32")}})
    config = RPCConfig("local", session_timeout_sec=60)
    # Batches of num_trials_per_iter only (no default-schedule first trial per task), so
    # the budget is met exactly.
    db = tune_relax(mod, None, "llvm -num-cores=1", str(tmp_path), max_trials_global=4,
                       num_trials_per_iter=2, strategy="replay-trace", cost_model="random",
                       runner=config, seed=0, default_schedule_first=False)
    records = db.get_all_tuning_records()
    assert len(records) == 4 and any(r.run_secs[0] < 1e9 for r in records)
    exe = compile_relax(db, mod, "llvm -num-cores=1")
    rng = np.random.default_rng(3)
    params = {n: rng.standard_normal(p.shape).astype(p.dtype)
              for n, p in model.named_parameters()}
    x = rng.standard_normal((4, 8)).astype("float32")
    y, r = relax.VirtualMachine(exe, wb.cpu())["forward"](
        *[wb.nd.array(v) for v in [x, *params.values()]])
    want = x @ params["fc.weight"].T + params["fc.bias"]
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(r.numpy(), np.maximum(want, 0), rtol=1e-5, atol=1e-5)


def test_max_workers_caps_the_candidates_in_flight(artifacts):
    """max_workers=1 on the in-process cluster: a thread feeds the candidates one at a time;
    every one is measured, once."""
    runner = RPCRunner(RPCConfig("local", session_timeout_sec=60), evaluator_config=FAST,
                       max_workers=1)
    futures = runner.run([RunnerInput(artifacts["good"], "cpu", MM_ARGS) for _ in range(3)])
    in_flight = [sum(f._job.submitted and not f._job.done() for f in futures)]
    results = []
    for f in futures:
        in_flight.append(sum(g._job.submitted and not g._job.done() for g in futures))
        results.append(f.result())
    assert max(in_flight) <= 1
    assert all(r.error_msg is None and len(r.run_secs) == 2 for r in results)
    assert all(f._job.resubmits == 0 for f in futures)


def test_a_job_dask_cannot_send_fails_alone():
    """Arguments that cannot be pickled fail that job (TaskFailed), not the cluster."""
    import threading

    from workbench.rpc import get_cluster
    from workbench.rpc.tasks import ClusterJob, TaskFailed

    job = ClusterJob(get_cluster("local"), len, (threading.Lock(),), what="test")
    job.submit()
    with pytest.raises(TaskFailed, match="pickle|serialize"):
        job.result()
    ok = ClusterJob(get_cluster("local"), len, ((1, 2, 3),), what="test")
    ok.submit()
    assert ok.result() == 3
