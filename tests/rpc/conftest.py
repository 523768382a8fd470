import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "meta_schedule"))

from dask_procs import DaskCluster  # noqa: E402


@pytest.fixture(scope="session")
def dask_cluster(tmp_path_factory):
    """A real `dask scheduler` and two `dask worker` processes (key "workbench-test"),
    shared by the rpc tests; stopped (process groups killed) at the end."""
    cluster = DaskCluster(str(tmp_path_factory.mktemp("dask")), n_workers=2)
    try:
        cluster.wait_for_workers(2)
        yield cluster
    finally:
        from workbench import rpc
        rpc.shutdown()
        cluster.stop()
        assert not cluster.pids(), "dask processes left running"
