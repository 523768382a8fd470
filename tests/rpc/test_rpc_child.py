"""ChildProcess: where a worker runs sessions, builds and measurements. A crash or a hang ends
the child, never the caller; exceptions come back as data; options set by the caller travel;
children never run anybody's __main__ and die with their parent."""
import os
import subprocess
import sys
import textwrap
import time

import pytest

from workbench import options
from workbench.rpc.child import ChildProcess, RemoteException

import rpc_helpers


def _main_file():
    import __main__
    return getattr(__main__, "__file__", None)


def _num_threads():
    return options.get("num_threads")


def _raise_value_error():
    raise ValueError("bad value in the child")


@pytest.fixture
def child():
    c = ChildProcess("test-child")
    yield c
    c.close()


def test_jobs_errors_crashes_and_timeouts(child):
    pid = os.getpid()
    out = child.call(os.getpid)
    assert out.kind == "ok" and out.value != pid
    assert child.call(_main_file).value.endswith(os.path.join("rpc", "_child_main.py"))
    err = child.call(_raise_value_error)
    assert err.kind == "error" and isinstance(err.value, RemoteException)
    assert err.value.type_name == "ValueError" and "bad value" in err.value.message
    assert "_raise_value_error" in err.value.traceback
    first = child.pid
    crashed = child.call(rpc_helpers.crash_now)
    assert crashed.kind == "crashed" and "SIGSEGV" in crashed.value
    assert child.call(os.getpid).value != first  # replaced on the next call
    assert child.call(time.sleep, (30,), timeout=0.5).kind == "timeout"
    assert child.call(os.getpid).kind == "ok"


def test_explicit_options_travel_with_each_job(child):
    with options.override(num_threads=3):
        assert child.call(_num_threads).value == 3
    default = child.call(_num_threads).value
    assert default != 3 or os.cpu_count() == 3  # back to the child's own default


def test_unpicklable_jobs_are_refused_here(child):
    with pytest.raises(TypeError, match="module-level"):
        child.call(lambda: 1)


def test_child_dies_with_its_parent(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(textwrap.dedent("""
        import os, sys, time
        from workbench.rpc.child import ChildProcess
        c = ChildProcess("orphan-test")
        print(c.call(os.getpid).value, flush=True)
        time.sleep(60)
    """))
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        child_pid = int(parent.stdout.readline())
        os.kill(child_pid, 0)  # alive
        parent.kill()
        parent.wait(10)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            try:
                os.kill(child_pid, 0)
            except ProcessLookupError:
                break
            try:
                with open(f"/proc/{child_pid}/stat") as f:
                    if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                        break
            except OSError:
                break
            time.sleep(0.2)
        else:
            pytest.fail("the child outlived its parent")
    finally:
        if parent.poll() is None:
            parent.kill()
