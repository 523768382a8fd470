"""Timing next to other libraries: the mechanisms, not the times.

- ``wait_for_quiet_threads`` sees a thread running native code (one of our kernels, called
  from a Python thread: ctypes releases the GIL, as OpenBLAS's workers never hold it) and
  waits for it, within its bound;
- ``time_evaluator`` waits for quiet threads with the ``timing_settle_ms`` option (0: not);
- the runtime hands ``omp_spin_count`` to libgomp as GOMP_SPINCOUNT when it loads it (libgomp
  prints what it read with OMP_DISPLAY_ENV), leaves a user's own setting alone, and does not
  leak the variable into ``os.environ``.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import workbench as wb
from workbench import options, te
from workbench.runtime import evaluator, settle

_N = 1 << 14


@pytest.fixture(scope="module")
def slow_kernel():
    """A serial kernel that runs for a while: a long float reduction."""
    a = te.placeholder((1024,), "float32", name="A")
    r = te.reduce_axis((0, _N), name="r")
    k = te.reduce_axis((0, _N), name="k")
    out = te.compute((1,), lambda i: te.sum(a[(r * 7 + k) % 1024] * 1.0001, axis=[r, k]),
                     name="S")
    f = wb.build(te.create_prim_func([a, out]), name="slow")["slow"]
    args = (wb.nd.array(np.ones(1024, "float32")), wb.nd.empty((1,), "float32"))
    return f, args


def _start(f, args):
    started, done = threading.Event(), threading.Event()
    native = []

    def work():
        native.append(threading.get_native_id())
        started.set()
        f(*args)
        done.set()

    t = threading.Thread(target=work)
    t.start()
    started.wait()
    return t, done, native


@pytest.mark.skipif(settle.running_threads() is None, reason="needs /proc/self/task")
def test_wait_for_quiet_threads_waits_for_a_busy_native_thread(slow_kernel):
    f, args = slow_kernel
    t, done, native = _start(f, args)
    try:
        # inside the kernel, without the GIL: the thread is running (or runnable)
        seen = []
        while not done.is_set() and not seen:
            seen = settle.running_threads() or []
        assert done.is_set() or native[0] in seen
        # a tiny bound returns while it still runs; a generous one only once it is quiet
        settle.wait_for_quiet_threads(0.001)
        settle.wait_for_quiet_threads(120.0)
        assert done.is_set()
        assert settle.wait_for_quiet_threads(0.0) == 0.0
    finally:
        t.join()
    assert threading.get_native_id() not in (settle.running_threads() or [])


def test_time_evaluator_settles_first_unless_disabled(monkeypatch):
    calls = []
    monkeypatch.setattr(evaluator, "wait_for_quiet_threads", lambda s: calls.append(s) or 0.0)
    ev = evaluator.time_evaluator(lambda: None, wb.cpu(0), number=1, repeat=1)
    ev()
    assert calls == [0.25]  # the default, 250 ms
    with options.override(timing_settle_ms=40):
        ev()
    with options.override(timing_settle_ms=0):
        ev()
    assert calls == [0.25, 0.04, 0.0]
    with pytest.raises(ValueError, match="timing_settle_ms"):
        options.set("timing_settle_ms", -1)


_CHILD = """
import os, numpy as np, workbench as wb
from workbench import te
a = te.placeholder((64,), "float32", name="A")
b = te.compute((64,), lambda i: a[i] + 1.0, name="B")
from workbench.tir import Schedule
sch = Schedule(te.create_prim_func([a, b]))
sch.parallel(sch.get_loops(sch.get_sblock("B"))[0])
f = wb.build(sch.mod, name="f")["f"]
f(wb.nd.array(np.zeros(64, "float32")), wb.nd.empty((64,), "float32"))
print("ENV_AFTER", os.environ.get("GOMP_SPINCOUNT"))
"""


def _child_spin(env_extra: dict[str, str]) -> tuple[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "WORKBENCH_OMP_SPIN_COUNT")}
    env.update(env_extra, OMP_DISPLAY_ENV="verbose")
    out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    spin = [ln for ln in out.stderr.splitlines() if "GOMP_SPINCOUNT =" in ln]
    assert len(spin) == 1, out.stderr  # libgomp was loaded once, by the runtime
    env_after = [ln for ln in out.stdout.splitlines() if ln.startswith("ENV_AFTER")][0]
    return spin[0].split("=", 1)[1].strip().strip("'"), env_after.split()[1]


def test_omp_spin_count_reaches_libgomp():
    from workbench.runtime import loader
    if loader.ensure_gomp(required=False) is None:
        pytest.skip("libgomp is not installed")
    assert _child_spin({}) == ("10000", "None")  # the option's default, not left in environ
    assert _child_spin({"WORKBENCH_OMP_SPIN_COUNT": "1234"}) == ("1234", "None")
    # the user's own setting wins; -1 keeps libgomp's default
    assert _child_spin({"GOMP_SPINCOUNT": "777"}) == ("777", "777")
    default, _ = _child_spin({"WORKBENCH_OMP_SPIN_COUNT": "-1"})
    assert default not in ("10000", "1234")


_IMPORTS = """
import {first}, {second}
maps = sorted({{line.split()[-1] for line in open("/proc/self/maps") if "libgomp" in line}})
print("GOMP", *maps)
"""


def _child_imports(first: str, second: str) -> tuple[list[str], str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY", "WORKBENCH_OMP_SPIN_COUNT")}
    env["OMP_DISPLAY_ENV"] = "verbose"
    out = subprocess.run([sys.executable, "-c", _IMPORTS.format(first=first, second=second)],
                         env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    maps = [ln for ln in out.stdout.splitlines() if ln.startswith("GOMP")][0].split()[1:]
    return maps, out.stderr


def test_import_workbench_first_gives_torch_our_bounded_spinning():
    """Issue 26: with PyTorch's libgomp (loaded first) our parallel loops spun for ms at every
    barrier and collapsed on a busy machine. ``import workbench`` loads libgomp with the
    runtime's spin count, and torch imported next shares it; the other order is warned of."""
    pytest.importorskip("torch")
    from workbench.runtime import loader
    if loader.ensure_gomp(required=False) is None:
        pytest.skip("libgomp is not installed")
    maps, stderr = _child_imports("workbench", "torch")
    assert len(maps) == 1 and "/torch/" not in maps[0], maps   # one libgomp: the runtime's
    assert [ln.split("=")[1].strip(" '") for ln in stderr.splitlines()
            if "GOMP_SPINCOUNT =" in ln] == ["10000"], stderr
    assert "before workbench" not in stderr
    maps, stderr = _child_imports("torch", "workbench")
    assert len(maps) == 1 and "/torch/" in maps[0], maps
    assert "libgomp (OpenMP) was loaded by another library" in stderr
    assert "Import workbench before torch" in stderr
