"""Faults on a real cluster: a worker killed mid-measurement, a lost client connection, a
scheduler that goes away during tuning, and TLS. Tuning goes on or stops with a clear message;
no record is lost or duplicated; a worker's crash never yields a result."""
import glob
import os
import signal
import subprocess
import time

import pytest

from workbench import meta_schedule as ms
from workbench import rpc
from workbench.meta_schedule.arg_info import TensorInfo
from workbench.meta_schedule.builder import BuilderInput, LocalBuilder
from workbench.meta_schedule.database import JSONDatabase
from workbench.meta_schedule.measure_callback import PyMeasureCallback
from workbench.meta_schedule.runner import EvaluatorConfig, RPCConfig, RPCRunner, RunnerInput
from workbench.meta_schedule.utils import derived_object
from workbench.rpc import ClusterUnavailable

import ms_workloads
import rpc_helpers
from dask_procs import KEY, DaskCluster
from ms_workloads import matmul, scheduled

pytestmark = pytest.mark.slow

FAST = EvaluatorConfig(number=2, repeat=1, min_repeat_ms=0)
MM_ARGS = [TensorInfo("float32", (32, 32))] * 3


@pytest.fixture(scope="module")
def good_artifact():
    b = LocalBuilder(max_workers=1, timeout_sec=120)
    results = b.build([BuilderInput(scheduled(matmul(32), 4).mod, "llvm")])
    b.shutdown()
    assert results[0].error_msg is None
    yield results[0].artifact_path
    ms_workloads.remove_artifacts(results)


def _markers():
    os.makedirs(rpc_helpers.MARKERS, exist_ok=True)
    return glob.glob(os.path.join(rpc_helpers.MARKERS, "measuring-*"))


def _clear_markers():
    for path in _markers():
        os.remove(path)


def test_worker_killed_mid_measurement(dask_cluster, good_artifact):
    config = RPCConfig(dask_cluster.address, tracker_key=KEY, session_timeout_sec=60)
    runner = RPCRunner(config, evaluator_config=FAST,
                       f_run_evaluator=rpc_helpers.slow_evaluator)
    before = {w.address for w in dask_cluster.client().workers(KEY)}
    _clear_markers()
    futures = runner.run([RunnerInput(good_artifact, "cpu", MM_ARGS) for _ in range(2)])
    deadline = time.monotonic() + 120
    while not _markers():
        assert time.monotonic() < deadline, "no measurement started"
        time.sleep(0.1)
    victim = int(os.path.basename(_markers()[0]).split("-")[1])  # a Dask worker process
    os.kill(victim, signal.SIGKILL)
    results = [f.result() for f in futures]
    # Dask ran the killed worker's task again: every candidate has exactly one result
    assert all(r.error_msg is None and len(r.run_secs) == 1 for r in results), results
    assert len({r.worker for r in results}) >= 1
    # the nanny restarted the worker under a new address; the cluster is whole again
    dask_cluster.wait_for_workers(2)
    after = {w.address for w in dask_cluster.client().workers(KEY)}
    assert len(after - before) == 1


def test_lost_connection_goes_on(dask_cluster, good_artifact):
    config = RPCConfig(dask_cluster.address, tracker_key=KEY, session_timeout_sec=60)
    runner = RPCRunner(config, evaluator_config=FAST,
                       f_run_evaluator=rpc_helpers.slow_evaluator, reconnect_timeout_sec=60)
    cluster = config.cluster()
    _clear_markers()
    futures = runner.run([RunnerInput(good_artifact, "cpu", MM_ARGS) for _ in range(2)])
    deadline = time.monotonic() + 120
    while not _markers():
        assert time.monotonic() < deadline, "no measurement started"
        time.sleep(0.1)
    client = cluster.client
    # cut this client's connection to the scheduler (a network blip); the scheduler and the
    # workers stay up, the client reconnects and the runner resubmits what was cancelled
    client.loop.add_callback(lambda: client.scheduler_comm.comm.abort())
    results = [f.result() for f in futures]
    assert all(r.error_msg is None and r.run_secs for r in results), results
    assert sum(f._job.resubmits for f in futures) >= 1
    assert cluster.status == "running"


@derived_object
class KillSchedulerAfterFirstBatch(PyMeasureCallback):
    """A measure callback (after AddToDatabase) that stops the scheduler once."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.batches = 0

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results,
              runner_results):
        self.batches += 1
        if self.batches == 1:
            self.cluster.kill_scheduler()


def test_scheduler_gone_stops_tuning_cleanly(tmp_path):
    cluster = DaskCluster(str(tmp_path / "dask"), n_workers=1)
    try:
        cluster.wait_for_workers(1)
        config = RPCConfig(cluster.address, tracker_key=KEY, session_timeout_sec=60)
        runner = RPCRunner(config, evaluator_config=FAST, reconnect_timeout_sec=3)
        work_dir = str(tmp_path / "tune")
        killer = KillSchedulerAfterFirstBatch(cluster)
        started = time.monotonic()
        with pytest.raises(ClusterUnavailable, match="Tuning stops here") as info:
            ms.tune_tir(matmul(32), "llvm -num-cores=1", work_dir, max_trials_global=12,
                        num_trials_per_iter=4, runner=runner, strategy="replay-trace",
                        cost_model="random", measure_callbacks=["default", killer], seed=1)
        assert time.monotonic() - started < 600
        assert cluster.address in str(info.value)
        # exactly the first batch is on disk, once each, all measured
        db = JSONDatabase(work_dir=work_dir)
        records = db.get_all_tuning_records()
        assert len(records) == 4
        assert len({str(r.trace.as_json()) for r in records}) == 4
        assert all(r.run_secs[0] < 1e9 for r in records)
    finally:
        rpc.shutdown()
        cluster.stop()
        assert not cluster.pids()


USER_SCRIPT = """
import sys
import numpy as np
import workbench as wb
session = wb.rpc.connect(sys.argv[1], sys.argv[2])
x = wb.nd.array(np.arange(4, dtype="float32"), session.cpu())
print("sum", float(x.numpy().sum()), flush=True)
sys.stdin.read()  # the test stops the cluster meanwhile
print("done", flush=True)
"""


def test_client_leaves_quietly_when_its_scheduler_is_gone(tmp_path):
    """A script (a fresh interpreter, no main guard) used a session; the cluster is stopped
    under it; the script ends: no traceback from Dask's reconnect loop at exit."""
    import sys
    script = tmp_path / "user.py"
    script.write_text(USER_SCRIPT)
    cluster = DaskCluster(str(tmp_path / "dask"), n_workers=1)
    try:
        cluster.wait_for_workers(1)
        proc = subprocess.Popen([sys.executable, str(script), cluster.address, KEY],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
        first = proc.stdout.readline()
        assert first.startswith("sum 6.0"), first + proc.stderr.read()
        cluster.stop()
        time.sleep(3)   # Dask's client notices and starts reconnecting
        out, err = proc.communicate("", timeout=120)
    finally:
        rpc.shutdown()
        cluster.stop()
    assert proc.returncode == 0, err
    assert "done" in out
    assert "Traceback" not in err and "Error" not in err, err


def _make_certificates(folder):
    """A CA and a certificate for 127.0.0.1 signed by it (PEM files), with openssl."""
    def run(*args):
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)
    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
        "ca.pem", "-days", "2", "-subj", "/CN=workbench-test-ca")
    run("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "key.pem", "-out", "req.csr",
        "-subj", "/CN=127.0.0.1")
    with open(os.path.join(folder, "ext.cnf"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run("x509", "-req", "-in", "req.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
        "-CAcreateserial", "-out", "cert.pem", "-days", "2", "-extfile", "ext.cnf")
    return tuple(os.path.join(folder, n) for n in ("ca.pem", "cert.pem", "key.pem"))


def test_tls_security_passes_through(tmp_path):
    from distributed import Security

    ca, cert, key = _make_certificates(str(tmp_path))
    cluster = DaskCluster(str(tmp_path / "dask"), n_workers=1, tls=(ca, cert, key))
    security = Security(tls_ca_file=ca, tls_client_cert=cert, tls_client_key=key,
                        require_encryption=True)
    try:
        assert cluster.address.startswith("tls://")
        cluster.wait_for_workers(1, security=security)
        with rpc.connect(cluster.address, KEY, security=security, timeout=60) as session:
            assert session.worker.address.startswith("tls://")
            assert session.listdir() == []
        # without the certificates the scheduler cannot be reached
        with pytest.raises((ClusterUnavailable, OSError, TypeError, ValueError)):
            rpc.get_cluster(cluster.address, security=None, timeout=3)
    finally:
        rpc.shutdown()
        cluster.stop()
        assert not cluster.pids()


def test_nothing_survives_a_killed_test_process(tmp_path):
    """A test process killed with SIGKILL (no teardown at all) takes its scheduler, workers
    and their session children with it (process groups, parent-death signal, children
    watching their parent)."""
    import sys
    import textwrap

    script = tmp_path / "holder.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        from dask_procs import DaskCluster, KEY
        from workbench import rpc
        cluster = DaskCluster({str(tmp_path / "dask")!r}, n_workers=1)
        cluster.wait_for_workers(1)
        session = rpc.connect(cluster.address, KEY, timeout=60)
        print(" ".join(map(str, cluster.pids() + [session.info["pid"]])), flush=True)
        time.sleep(600)
    """))
    holder = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                              text=True)
    try:
        pids = [int(p) for p in holder.stdout.readline().split()]
        assert len(pids) >= 4  # scheduler, nanny, worker, the session's child
        holder.kill()
        holder.wait(10)
        deadline = time.monotonic() + 30
        alive = pids
        while alive and time.monotonic() < deadline:
            time.sleep(0.2)
            alive = [p for p in pids if _alive(p)]
        assert not alive, f"left running: {alive}"
    finally:
        if holder.poll() is None:
            holder.kill()


def _alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
