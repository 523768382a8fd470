"""Remote sessions on a real Dask cluster (`dask scheduler` + two `dask worker` processes with
a resource key) and on the in-process LocalCluster: upload, load_module, remote arrays, calls,
remote time_evaluator, target detection, files, errors, and crash isolation."""
import os
import signal
import time

import numpy as np
import pytest

import workbench as wb
from workbench import rpc
from workbench.rpc import NoMatchingWorker, RemoteNDArray, SessionLost
from workbench.runtime.evaluator import BenchmarkResult

from dask_procs import KEY
from rpc_helpers import scale_kernel


@pytest.fixture(scope="module")
def kernel_file(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("kernels") / "scale.o")
    scale_kernel(64).export_library(path)
    return path


@pytest.fixture(scope="module")
def session(dask_cluster):
    s = rpc.connect(dask_cluster.address, key=KEY, timeout=60)
    yield s
    s.close()


def test_kernel_runs_remotely(session, kernel_file):
    assert session.upload(kernel_file) == "scale.o"
    assert "scale.o" in session.listdir()
    lib = session.load_module("scale.o")
    assert lib.entry_name == "main" and lib.function_names == ["main"]
    dev = session.cpu(0)
    x = np.random.default_rng(0).standard_normal(64).astype("float32")
    a = wb.nd.array(x, dev)
    b = wb.nd.empty((64,), "float32", dev)
    assert isinstance(a, RemoteNDArray) and a.shape == (64,) and a.dtype == "float32"
    assert str(dev).startswith("remote[") and dev != wb.cpu(0)
    lib["main"](a, b)
    np.testing.assert_allclose(b.numpy(), x * 2 + 1, rtol=1e-6)
    # copies both ways, and a local NDArray argument travels by value
    b.copyfrom(np.zeros(64, "float32"))
    lib(wb.nd.array(x), b)
    np.testing.assert_allclose(b.copyto(wb.cpu()).numpy(), x * 2 + 1, rtol=1e-6)


def test_session_lives_in_a_child_of_its_worker(session, dask_cluster):
    worker_pids = dask_cluster.pids()
    assert session.info["pid"] in worker_pids  # in the workers' process groups...
    assert session.info["pid"] not in [p.pid for p in dask_cluster.workers]  # ...not a nanny
    assert session.worker.address in [w.address for w in dask_cluster.client().workers(KEY)]


def test_remote_time_evaluator(session, kernel_file):
    session.upload(kernel_file, "t.o")
    lib = session.load_module("t.o")
    dev = session.cpu()
    a = wb.nd.array(np.ones(64, "float32"), dev)
    b = wb.nd.empty((64,), "float32", dev)
    res = lib.time_evaluator("main", dev, number=5, repeat=3)(a, b)
    assert isinstance(res, BenchmarkResult) and len(res.results) == 3
    assert all(0 < r < 0.01 for r in res.results)
    grown = lib.time_evaluator("main", dev, number=1, repeat=1, min_repeat_ms=5)
    grown(a, b)
    assert grown.number > 1  # grown on the worker, kept for the next call as TVM does
    with pytest.raises(TypeError, match="session"):
        lib.time_evaluator("main", wb.cpu())
    with pytest.raises(AttributeError, match="no function 'nope'"):
        lib.time_evaluator("nope", dev)


def test_target_is_detected_on_the_worker(session):
    target = session.target
    host = wb.Target("llvm")
    assert target.mcpu == host.host_cpu and target.num_cores >= 1
    assert set(target.mattr) == set(host.features.split(","))
    # cross-compiling for the worker's target runs there
    A = wb.te.placeholder((8,), name="A")
    B = wb.te.compute((8,), lambda i: A[i] + 1.0, name="B")
    session.upload(wb.build(wb.te.create_prim_func([A, B]), target), "plus1.o")
    dev = session.cpu()
    out = wb.nd.empty((8,), "float32", dev)
    session.load_module("plus1.o")["main"](wb.nd.array(np.arange(8, dtype="float32"), dev), out)
    np.testing.assert_array_equal(out.numpy(), np.arange(8) + 1)


def test_files_stay_in_the_session_directory(session):
    session.upload(b"hello", "notes/a.txt")
    assert session.download("notes/a.txt") == b"hello"
    assert session.listdir("notes") == ["a.txt"]
    session.remove("notes")
    assert "notes" not in session.listdir()
    with pytest.raises(ValueError, match="leaves the session"):
        session.download("../../etc/passwd")
    with pytest.raises(ValueError, match="relative"):
        session.upload(b"x", "/tmp/x")
    with pytest.raises(ValueError, match="target"):
        session.upload(b"x")
    with pytest.raises(FileNotFoundError, match="no file 'missing.o'"):
        session.load_module("missing.o")


def test_remote_errors_keep_their_type_and_traceback(session, kernel_file):
    session.upload(kernel_file, "e.o")
    lib = session.load_module("e.o")
    dev = session.cpu()
    a = wb.nd.array(np.ones(64, "float32"), dev)
    with pytest.raises(TypeError, match="takes 2 arguments") as info:
        lib["main"](a)
    assert any("remote traceback" in note for note in info.value.__notes__)
    with pytest.raises(ValueError, match="shape"):
        lib["main"](a, wb.nd.empty((32,), "float32", dev))
    with pytest.raises(ValueError, match="device of this machine"):
        lib["main"](a, wb.cpu())
    with pytest.raises(AttributeError, match="no global function"):
        session.get_function("no.such.function")
    import threading
    with pytest.raises(TypeError, match="cannot send 'call'.*pickle"):
        lib["main"](a, threading.Lock())  # cannot travel: refused here, the session lives on
    assert session.alive and session.listdir()  # errors do not end the session


def test_unknown_key_names_what_the_workers_offer(dask_cluster):
    with pytest.raises(NoMatchingWorker, match=f"offer resources \\['{KEY}'\\]"):
        rpc.connect(dask_cluster.address, key="workbench-nonexistent", timeout=0.5)


def test_crash_ends_the_session_not_the_worker(dask_cluster, kernel_file, tmp_path):
    from ms_workloads import out_of_bounds_store

    wild = str(tmp_path / "wild.o")
    wb.build(out_of_bounds_store(), "llvm").export_library(wild)  # stores 4 GB past its buffer
    s = rpc.connect(dask_cluster.address, key=KEY, timeout=60)
    worker = s.worker.address
    s.upload(wild)
    lib = s.load_module("wild.o")
    buf = wb.nd.empty((16,), "float32", s.cpu())
    with pytest.raises(SessionLost, match="crashed during 'call'.*SIGSEGV"):
        lib["main"](buf)
    with pytest.raises(SessionLost, match="SIGSEGV"):
        s.listdir()  # the session stays over: its modules and arrays are gone
    assert worker in [w.address for w in dask_cluster.client().workers(KEY)]
    # the same worker serves a new session; a session whose process dies between two calls
    # is over too (never silently replaced by an empty one)
    again = rpc.connect(dask_cluster.address, key=KEY, worker=worker, timeout=60)
    again.upload(kernel_file)
    assert again.listdir() == ["scale.o"] and again.info["pid"] != s.info["pid"]
    os.kill(again.info["pid"], signal.SIGKILL)
    # (seen dead before the call, or while sending it: the kill races with the request)
    with pytest.raises(SessionLost, match="(died|crashed during 'load_module'): .*SIGKILL"):
        again.load_module("scale.o")


def test_session_timeout(dask_cluster):
    s = rpc.connect(dask_cluster.address, key=KEY, session_timeout=3, timeout=60)
    time.sleep(3.5)
    with pytest.raises(SessionLost, match="timed out after 3 seconds"):
        s.listdir()


def test_tracker_api(dask_cluster):
    tracker = rpc.connect_tracker(dask_cluster.address)
    summary = tracker.summary()
    assert len(summary["server_info"]) == 2 and summary["queue_info"][KEY]["free"] == 2
    assert KEY in tracker.text_summary()
    s = tracker.request(KEY)
    assert s.alive and s.key == KEY
    s.close()
    with pytest.raises(SessionLost, match="closed"):
        s.listdir()
    cfg = rpc.RPCConfig(tracker_host="127.0.0.1", tracker_port=dask_cluster.port,
                        tracker_key=KEY)
    assert cfg.count_num_servers() == 2
    with cfg.connect_server() as s2:
        assert s2.target.num_cores >= 1


def test_in_process_local_cluster(kernel_file):
    s = rpc.connect()  # no address: an in-process LocalCluster, started on first use
    assert s.cluster.is_local and s.worker.address.startswith("inproc://")
    assert s.info["pid"] != os.getpid()  # the session still runs in a child process
    s.upload(kernel_file)
    lib = s.load_module("scale.o")
    dev = s.cpu()
    x = np.arange(64, dtype="float32")
    b = wb.nd.empty((64,), "float32", dev)
    lib["main"](wb.nd.array(x, dev), b)
    np.testing.assert_allclose(b.numpy(), x * 2 + 1)
    assert len(lib.time_evaluator("main", dev, number=3, repeat=2)(wb.nd.array(x, dev),
                                                                     b).results) == 2
    s.close()
