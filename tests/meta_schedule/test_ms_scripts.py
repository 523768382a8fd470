"""Tuning from a plain script, run as a subprocess of a fresh interpreter the way users run
it: TVM's tutorial style (module-level code, no ``if __name__ == "__main__":``) tunes exactly
as a guarded script does -- the module-level code runs once, in the parent, and tuning
finishes -- with no tracebacks or warnings; and a machine where no worker process can start
gets one line per pool saying why and what happens instead, then tunes in-process."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

TUTORIAL = """
import os
import tempfile

import workbench.meta_schedule as ms
from workbench import te
from workbench.ir.module import IRModule

with open({marker!r}, "a") as f:  # one line per execution of this module's code
    f.write(f"{{os.getpid()}}\\n")

A = te.placeholder((128, 128), "float32", name="A")
B = te.placeholder((128, 128), "float32", name="B")
k = te.reduce_axis((0, 128), name="k")
C = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
mod = IRModule({{"main": te.create_prim_func([A, B, C])}})
database = ms.tune_tir(mod, "llvm -num-cores=2", tempfile.mkdtemp(), max_trials_global=16)
print("TUNED", len(database.get_all_tuning_records()))
"""


def _run(tmp_path: Path, source: str, timeout: float, cold_cache: bool = False
         ) -> subprocess.CompletedProcess:
    script = tmp_path / "tune_matmul.py"
    script.write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\n" + source)
    env = dict(os.environ)
    if cold_cache:   # every kernel is compiled, none comes from the object cache
        env["WORKBENCH_CACHE_DIR"] = str(tmp_path / "cache")
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=timeout, cwd=tmp_path, env=env)


@pytest.mark.slow
@pytest.mark.tuning
def test_a_script_without_main_guard_tunes_once(tmp_path):
    marker = tmp_path / "module_code_ran"
    out = _run(tmp_path, TUTORIAL.format(marker=str(marker)), timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "TUNED 16" in out.stdout
    assert len(marker.read_text().splitlines()) == 1, \
        f"the script's module-level code ran {len(marker.read_text().splitlines())} times"
    assert "Traceback" not in out.stdout + out.stderr, out.stderr[-3000:]
    warnings = [line for line in (out.stdout + out.stderr).splitlines()
                if "WARNING" in line or "Warning" in line]
    assert not warnings, warnings


FALLBACK = """
import sys
import tempfile

import workbench.meta_schedule as ms
from workbench import te
from workbench.ir.module import IRModule
from workbench.meta_schedule.runner import EvaluatorConfig, LocalRunner

# As on a machine where this interpreter cannot start another one (an embedded Python, a
# sandbox without fork, a process limit).
sys.executable = "/nonexistent/python3"

A = te.placeholder((32, 32), "float32", name="A")
B = te.placeholder((32, 32), "float32", name="B")
k = te.reduce_axis((0, 32), name="k")
C = te.compute((32, 32), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
mod = IRModule({"main": te.create_prim_func([A, B, C])})
runner = LocalRunner(evaluator_config=EvaluatorConfig(number=1, repeat=1, min_repeat_ms=1))
database = ms.tune_tir(mod, "llvm -num-cores=2", tempfile.mkdtemp(), max_trials_global=8,
                       num_trials_per_iter=4, strategy="replay-trace", cost_model="random",
                       runner=runner, seed=0)
valid = [r for r in database.get_all_tuning_records() if r.run_secs[0] < 1e9]
print("TUNED", len(database.get_all_tuning_records()), "VALID", len(valid))
"""


@pytest.mark.tuning
def test_no_worker_processes_one_line_per_pool_then_in_process(tmp_path):
    out = _run(tmp_path, FALLBACK, timeout=600, cold_cache=True)
    assert out.returncode == 0, out.stderr[-3000:]
    assert re.search(r"TUNED 8 VALID [1-8]\b", out.stdout), out.stdout[-2000:]
    text = out.stdout + out.stderr
    assert "Traceback" not in text, text[-3000:]
    warnings = [line for line in text.splitlines() if "WARNING" in line]
    reason = ("cannot start worker processes (cannot start a Python process "
              "(FileNotFoundError: [Errno 2] No such file or directory: '/nonexistent/python3'))")
    assert len(warnings) == 2, warnings
    runner_line = (f"LocalRunner: {reason}; measuring in this process from now on (no time "
                   "limit; a crashing kernel would end this process)")
    builder_line = (f"LocalBuilder: {reason}; building in this process from now on (no time "
                    "limit, no crash isolation)")
    # the builder's pool is the first to run a job (the reference is made before the first
    # measurement, after the first builds)
    assert warnings[0].endswith(builder_line) and warnings[1].endswith(runner_line), warnings
    # LLVM's compile helper (a cache miss) falls back the same way, once
    compile_lines = [line for line in text.splitlines() if "LLVM compile helper" in line]
    assert compile_lines == [
        "LLVM compile helper: cannot start a Python process (FileNotFoundError: [Errno 2] No "
        "such file or directory: '/nonexistent/python3'); compiling in this process from now "
        "on (no crash isolation: an LLVM abort would end this process)"], compile_lines

