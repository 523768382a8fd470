"""Helper processes (workbench.workers): fresh interpreters that never run the parent's
``__main__``, end with their parent however it ends, ignore interrupts meant for the parent,
and a pool that says once why it cannot start and falls back. Parents are scripts run as
subprocesses of a fresh interpreter, the way users run them."""
from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from workbench.workers import WorkerPool, WorkerStartError, launch_python, stop_process

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _wait_all_gone(pids: list[int], timeout: float = 15.0) -> list[int]:
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        time.sleep(0.1)
        alive = [p for p in alive if _alive(p)]
    return alive


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "user_script.py"
    path.write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n" + textwrap.dedent(body))
    return path


def test_workers_never_run_the_parents_main(tmp_path):
    """A script without a main guard: its module-level code runs once, in the parent only,
    and functions it defines (and lambdas) still run in the workers."""
    marker = tmp_path / "module_code_ran"
    script = _script(tmp_path, f"""
        import os
        from workbench.workers import WorkerPool

        with open({str(marker)!r}, "a") as f:
            f.write(f"{{os.getpid()}}\\n")

        def cube(x):
            return x ** 3

        pool = WorkerPool(2)
        print("CUBES", [o.value for o in pool.run(cube, [(i,) for i in range(4)], 60)])
        print("LAMBDA", pool.call(lambda: os.getpid() != {os.getpid()}, (), 60).value)
    """)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "CUBES [0, 1, 8, 27]" in out.stdout and "LAMBDA True" in out.stdout
    assert len(marker.read_text().splitlines()) == 1, marker.read_text()
    assert "Traceback" not in out.stderr, out.stderr


_ORPHANS = """
import signal, threading, time
from workbench.meta_schedule.builder import LocalBuilder
from workbench.meta_schedule.runner import LocalRunner
from workbench.meta_schedule.search_strategy.replay_pool import ReplayPool
from workbench.workers import launch_python

made = {}

def start():
    # Every kind of pool the tuner has, started from a thread that then ends: the
    # workers must neither die with the thread nor outlive the process.
    made["builder"] = LocalBuilder(max_workers=1)
    made["builder"]._pool.run(time.sleep, [(0.01,)], 60)
    made["runner"] = LocalRunner()
    made["runner"]._pool.call(time.sleep, (0.01,), 60)
    made["replay"] = ReplayPool(2)
    made["replay"]._workers.run(time.sleep, [(0.01,), (0.01,)], 60)
    # and a plain helper that wants SIGTERM first (a server)
    made["server"] = launch_python(call="signal:pause", exit_signal=signal.SIGTERM,
                                   new_session=True, ignore_sigint=False)

thread = threading.Thread(target=start)
thread.start()
thread.join()
time.sleep(1.5)  # longer than the lifeline's poll: the thread is long gone
pids = (made["builder"].worker_pids + [made["runner"].worker_pid]
        + made["replay"].worker_pids + [made["server"].pid])
# still the same workers, still working
made["builder"]._pool.run(time.sleep, [(0.01,)], 60)
made["replay"]._workers.run(time.sleep, [(0.01,), (0.01,)], 60)
again = made["builder"].worker_pids + made["replay"].worker_pids
print("SAME" if set(again) <= set(pids) else f"CHANGED {again}", flush=True)
# one more pool from the main thread (parent-death signal as well as the lifeline)
main_pool = LocalBuilder(max_workers=1)
main_pool._pool.run(time.sleep, [(0.01,)], 60)
print(" ".join(map(str, pids + main_pool.worker_pids)), flush=True)
time.sleep(120)
"""


def test_workers_outlive_their_thread_and_die_with_the_parent(tmp_path):
    """``kill -9`` of the parent (a crashed script, a restarted kernel) ends the workers of
    every pool (builder, runner, replay) and other helpers, whichever thread started them."""
    script = _script(tmp_path, _ORPHANS)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    pids: list[int] = []
    try:
        assert parent.stdout.readline().strip() == "SAME"
        pids = [int(x) for x in parent.stdout.readline().split()]
        assert len(pids) == 6 and all(_alive(p) for p in pids), pids
        parent.kill()
        parent.wait(10)
        alive = _wait_all_gone(pids)
        assert not alive, f"{alive} outlived their killed parent (of {pids})"
    finally:
        if parent.poll() is None:
            parent.kill()
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_an_interrupt_reaches_only_the_parent(tmp_path):
    """Ctrl-C in a terminal (or a Jupyter interrupt) signals the whole process group: the
    workers ignore it, print nothing, and keep serving."""
    script = _script(tmp_path, """
        import os, signal, time
        from workbench.workers import WorkerPool

        pool = WorkerPool(2)
        pool.run(os.getpid, [(), (), (), ()], 60)
        before = pool.pids
        try:
            os.killpg(0, signal.SIGINT)
            time.sleep(5)
        except KeyboardInterrupt:
            print("PARENT INTERRUPTED", flush=True)
        time.sleep(0.5)
        print("SAME" if set(pool.pids) == set(before) else "CHANGED", flush=True)
        print("STILL WORKS", pool.call(abs, (-3,), 60).value, flush=True)
    """)
    # SIGINT as a terminal gives it: a test run started in the background of a non-interactive
    # shell (``(make test &)``) inherits SIGINT ignored, and Python then installs no handler
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, start_new_session=True,
                         preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert "PARENT INTERRUPTED" in out.stdout, (out.stdout, out.stderr)
    assert "SAME" in out.stdout and "STILL WORKS 3" in out.stdout, out.stdout
    assert "KeyboardInterrupt" not in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_a_pool_that_cannot_start_says_why_once_and_falls_back(monkeypatch, caplog):
    monkeypatch.setattr(sys, "executable", "/nonexistent/python3")
    strict = WorkerPool(2)
    with pytest.raises(WorkerStartError) as info:
        strict.run(abs, [(-1,)], 10)
    assert info.value.kind == "launch" and "/nonexistent/python3" in info.value.reason

    ran_init = []
    pool = WorkerPool(2, lambda: ran_init.append(1), label="Tester",
                      fallback="doing it here", logger=logging.getLogger("wb.test"))
    with caplog.at_level(logging.WARNING, logger="wb.test"):
        first = pool.run(abs, [(-1,), (-2,)], 10)
        second = pool.run(abs, [(-3,)], 10)
    assert [o.value for o in first + second] == [1, 2, 3]
    assert ran_init == [1]  # the initializer ran once, here
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1, lines
    assert lines[0].startswith("Tester: cannot start worker processes (cannot start a Python "
                               "process (FileNotFoundError:")
    assert lines[0].endswith("; doing it here")
    assert pool.fallen_back is not None and pool.pids == []


def test_a_failing_initializer_fails_the_jobs_with_its_traceback():
    pool = WorkerPool(1, _raising_initializer, fallback="never used")
    (out,) = pool.run(abs, [(-1,)], 60)
    assert out.kind == "error" and "the worker initializer failed" in out.value
    assert "RuntimeError: no setup here" in out.value
    assert pool.fallen_back is None and pool.pids == []


def _raising_initializer() -> None:
    raise RuntimeError("no setup here")


def test_launch_python_runs_a_module_as_main(tmp_path):
    source, target = tmp_path / "in.json", tmp_path / "out.json"
    source.write_text('{"b": 1, "a": [1, 2]}')
    proc = launch_python(module="json.tool", args=["--sort-keys", str(source), str(target)])
    assert proc.wait(60) == 0
    assert target.read_text().startswith('{\n    "a"')
    assert stop_process(proc) == 0
    with pytest.raises(ValueError, match="exactly one"):
        launch_python()


def test_a_pool_carries_on_with_the_workers_that_started(monkeypatch):
    from workbench.workers import worker as worker_module

    real, launches = worker_module.launch_python, []

    def second_launch_fails(**kwargs):
        launches.append(kwargs)
        if len(launches) == 2:
            raise OSError("Resource temporarily unavailable")
        return real(**kwargs)

    monkeypatch.setattr(worker_module, "launch_python", second_launch_fails)
    pool = WorkerPool(2)
    try:
        assert [o.value for o in pool.run(abs, [(-i,) for i in range(6)], 60)] == \
            [0, 1, 2, 3, 4, 5]
        assert len(pool.pids) == 1 and len(launches) == 2  # no retry at every turn
    finally:
        pool.shutdown()
    assert pool.pids == []


def test_workers_get_the_parents_sys_path_even_with_paths_on_it(monkeypatch, tmp_path):
    (tmp_path / "only_here_helper.py").write_text("def where():\n    return __file__\n")
    # A Path on sys.path (a notebook's sys.path.append(Path(...))) must not stop a launch.
    monkeypatch.setattr(sys, "path", [str(tmp_path), tmp_path / "elsewhere", *sys.path])
    import importlib
    helper = importlib.import_module("only_here_helper")
    pool = WorkerPool(1)
    try:
        out = pool.call(helper.where, (), 60)  # pickled by reference: imported in the worker
    finally:
        pool.shutdown()
        sys.modules.pop("only_here_helper", None)
    assert out.kind == "ok" and out.value == str(tmp_path / "only_here_helper.py"), out


def _pid() -> int:
    return os.getpid()


def test_prestart_launches_workers_that_a_later_run_uses():
    """prestart() returns at once and leaves the workers starting; the next run finds them
    ready (the same processes), and a pool that fell back to this process stays so."""
    pool = WorkerPool(2, name="wb-prestart")
    try:
        t0 = time.monotonic()
        pool.prestart()
        assert time.monotonic() - t0 < 1.0         # did not wait for the interpreters
        launched = set(pool.pids)
        assert len(launched) == 2
        deadline = time.monotonic() + 60
        while pool.ready < 2 and time.monotonic() < deadline:
            time.sleep(0.05)                       # no job needed: their answers are read
        assert pool.ready == 2
        got = {out.value for out in pool.run(_pid, [()] * 6, timeout=60)}
        assert got <= launched and os.getpid() not in got
        pool.prestart()                            # nothing missing: nothing launched
        assert set(pool.pids) == launched
    finally:
        pool.shutdown()
    fallen = WorkerPool(1, fallback="running here")
    fallen.fallen_back = "no processes here"
    fallen.prestart()
    assert fallen.pids == [] and fallen.ready == 0
