"""A test run that dies leaves nothing running.

A child pytest (a fresh interpreter) starts what the test suite starts -- the ``jupyter_lab``
server fixture with a kernel in it, a kernel of its own the way nbmake/nbclient start one --
and a tuning worker pool inside each kernel; then it waits. We ``kill -9`` that pytest
process, so no fixture teardown, ``finally`` or ``atexit`` runs, and check that every one of
those processes ends by itself: the server by its parent-death signal / lifeline, the kernels
by watching their parent, the workers by their lifeline.
"""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.timeout(300)]

_CHILD = r'''
import json, sys, time, urllib.request
sys.path.insert(0, {browser_dir!r})
from conftest import TOKEN, jupyter_lab  # noqa: F401 - the fixture, as the browser tests use it

from jupyter_client import BlockingKernelClient
from jupyter_client.manager import start_new_kernel

START_WORKERS = """
from workbench.workers import WorkerPool
pool = WorkerPool(2, name="wb-leftover")
pool.run(abs, [(-1,), (-2,)], 60)
print("PIDS", *pool.pids)
"""


def worker_pids(client):
    out = []
    def keep(msg):
        if msg["msg_type"] == "stream":
            out.append(msg["content"]["text"])
    reply = client.execute_interactive(START_WORKERS, timeout=120, output_hook=keep)
    assert reply["content"]["status"] == "ok", reply["content"]
    line = next(l for l in "".join(out).splitlines() if l.startswith("PIDS"))
    return [int(p) for p in line.split()[1:]]


def test_hold_processes(jupyter_lab):
    # A kernel inside the lab server, as a notebook opened in the browser gets.
    request = urllib.request.Request(
        f"{{jupyter_lab.url}}/api/kernels", data=json.dumps({{"name": "python3"}}).encode(),
        method="POST", headers={{"Authorization": f"token {{TOKEN}}",
                                 "Content-Type": "application/json"}})
    with urllib.request.urlopen(request, timeout=60) as response:
        kernel_id = json.loads(response.read())["id"]
    runtime = jupyter_lab.root.parent / "home" / "runtime"
    lab_client = BlockingKernelClient(connection_file=str(runtime / f"kernel-{{kernel_id}}.json"))
    lab_client.load_connection_file()
    # No heartbeat: on a loaded machine a late beat reads as "kernel died".
    lab_client.start_channels(hb=False)
    lab_client.wait_for_ready(timeout=120)
    lab_workers = worker_pids(lab_client)
    # A kernel of this process, the way nbmake / nbclient start one.
    manager, client = start_new_kernel(kernel_name="python3")
    own_workers = worker_pids(client)
    import psutil
    server = psutil.Process(jupyter_lab_pid())
    pids = {{"server": server.pid,
            "kernels": [p.pid for p in server.children(recursive=True)
                        if p.pid not in lab_workers] + [manager.provisioner.process.pid],
            "workers": lab_workers + own_workers}}
    with open({pids_file!r} + ".tmp", "w") as f:
        json.dump(pids, f)
    import os
    os.replace({pids_file!r} + ".tmp", {pids_file!r})
    time.sleep(600)


def jupyter_lab_pid():
    import psutil
    me = psutil.Process()
    return next(p.pid for p in me.children() if "jupyterlab" in " ".join(p.cmdline()))
'''


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_a_killed_test_run_leaves_no_server_kernel_or_worker(tmp_path):
    pids_file = tmp_path / "pids.json"
    child_test = tmp_path / "test_child_holds_processes.py"
    child_test.write_text(_CHILD.format(browser_dir=str(Path(__file__).parent),
                                        pids_file=str(pids_file)))
    child = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-s",
         "--rootdir", str(tmp_path), str(child_test)],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True)  # a process group of its own, like a CI job
    everything: list[int] = []
    try:
        deadline = time.monotonic() + 240
        while not pids_file.exists():
            assert child.poll() is None, child.stdout.read().decode(errors="replace")
            assert time.monotonic() < deadline, "the child test did not start its processes"
            time.sleep(0.5)
        pids = json.loads(pids_file.read_text())
        everything = [pids["server"], *pids["kernels"], *pids["workers"]]
        assert len(pids["kernels"]) == 2 and len(pids["workers"]) == 4, pids
        assert all(_alive(p) for p in everything), pids

        os.kill(child.pid, signal.SIGKILL)  # the test run dies: no teardown of any kind
        child.wait(30)
        deadline = time.monotonic() + 60
        alive = everything
        while alive and time.monotonic() < deadline:
            time.sleep(0.5)
            alive = [p for p in alive if _alive(p)]
        assert not alive, f"still running after the test run was killed: {alive} of {pids}"
    finally:
        if child.poll() is None:
            child.kill()
        for pid in everything:  # never leave them behind, even when the test fails
            if _alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
