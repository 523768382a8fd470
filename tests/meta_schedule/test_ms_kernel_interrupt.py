"""Tuning in a real Jupyter kernel (jupyter_client, as nbclient/JupyterLab drive one):

- a kernel interrupt (the notebook's stop square: SIGINT to the kernel's process group) in the
  middle of ``tune_tir`` / ``tune_relax`` ends the cell with ``KeyboardInterrupt``; no worker
  process is left; every measurement the runner's worker finished is in the JSON database
  (a witness file written by the worker after each measurement says how many), which loads
  without a warning; running the same cell again appends to it and the search starts from
  its records;
- a kernel restart in the middle of ``tune_tir`` leaves no worker behind.
"""
from __future__ import annotations

import json
import re
import time
import warnings
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.tuning, pytest.mark.timeout(600)]

TESTS_DIR = Path(__file__).resolve().parent

SETUP = """
import logging, os, sys
sys.path.insert(0, {tests_dir!r})
import ms_workloads
import workbench.meta_schedule as ms
from workbench import te
from workbench.ir.module import IRModule
from workbench.meta_schedule.runner import EvaluatorConfig, LocalRunner

logging.getLogger("workbench.meta_schedule").setLevel(logging.WARNING)  # as notebook 05
os.environ["WB_TEST_MEASURED"] = {witness!r}
WORK_DIR = {work_dir!r}

def runner():
    # Every measurement takes >= 0.1 s, so an interrupt can land in the middle of a batch.
    return LocalRunner(evaluator_config=EvaluatorConfig(number=1, repeat=1, min_repeat_ms=100),
                       f_run_evaluator=ms_workloads.counting_evaluator)

def strategy():
    return ms.search_strategy.EvolutionarySearch(population_size=32, genetic_num_iters=1)
"""

TIR = """
A = te.placeholder((64, 64), "float32", name="A")
B = te.placeholder((64, 64), "float32", name="B")
k = te.reduce_axis((0, 64), name="k")
C = te.compute((64, 64), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
mod = IRModule({"main": te.create_prim_func([A, B, C])})
"""
TIR_CELL = """db = ms.tune_tir(mod, "llvm -num-cores=2", WORK_DIR, max_trials_global=400,
                 num_trials_per_iter=8, runner=runner(), strategy=strategy(), seed=0)
print("RECORDS", len(db.get_all_tuning_records()))
"""

RELAX = """
from workbench.relax.frontend import nn

class MLP(nn.Module):
    def __init__(self):
        self.fc1 = nn.Linear(32, 32)
        self.fc2 = nn.Linear(32, 16)

    def forward(self, x):
        return self.fc2(nn.relu(self.fc1(x)))

model, _ = MLP().export_tvm({"forward": {"x": nn.spec.Tensor((8, 32), "float32")}})
"""
RELAX_CELL = """db = ms.relax_integration.tune_relax(
    model, None, "llvm -num-cores=2", WORK_DIR, max_trials_global=400, num_trials_per_iter=8,
    runner=runner(), strategy=strategy(), seed=0)
print("RECORDS", len(db.get_all_tuning_records()))
"""


class Kernel:
    """A Python kernel of this venv, started as nbclient starts one."""

    def __init__(self, cwd: Path) -> None:
        from jupyter_client.manager import start_new_kernel
        self.manager, self.client = start_new_kernel(kernel_name="python3", cwd=str(cwd))

    @property
    def pid(self) -> int:
        return self.manager.provisioner.process.pid

    def run(self, code: str, timeout: float = 120) -> str:
        out: list[str] = []
        reply = self.client.execute_interactive(
            code, timeout=timeout, output_hook=lambda m: out.append(
                m["content"].get("text", "") if m["msg_type"] == "stream" else ""))
        assert reply["content"]["status"] == "ok", reply["content"]
        return "".join(out)

    def start(self, code: str) -> str:
        return self.client.execute(code)

    def reply(self, msg_id: str, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                msg = self.client.get_shell_msg(timeout=0.5)
            except Exception:  # noqa: BLE001 - queue.Empty
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg["content"]
        raise AssertionError(f"no reply to the cell within {timeout:.0f} s")

    def workers(self) -> dict[int, str]:
        """The kernel's worker processes: pid -> name (wb-build, wb-run, wb-replay)."""
        import psutil
        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return {}
        names = {p.pid: _name(p) for p in children}
        return {pid: name for pid, name in names.items() if name.startswith("wb-")}

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def _name(proc) -> str:
    try:
        return proc.name()
    except Exception:  # noqa: BLE001 - it ended meanwhile
        return ""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _eventually(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"{what}: not within {timeout:.0f} s")


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def _load_database(work_dir: Path):
    """The JSON database as a new process would load it: any skipped line is an error."""
    from workbench.meta_schedule.database import JSONDatabase
    from workbench.meta_schedule.database.json_database import DatabaseWarning
    with warnings.catch_warnings():
        warnings.simplefilter("error", DatabaseWarning)
        db = JSONDatabase(work_dir=str(work_dir))
    records = db.get_all_tuning_records()
    for path in work_dir.glob("database_*.json"):
        for line in path.read_text().splitlines():
            json.loads(line)  # every line whole
    return records


def _interrupt_mid_batch(kernel: Kernel, cell: str, witness: Path, at_least: int) -> float:
    """Run ``cell``, interrupt the kernel while the runner is in the middle of a batch once
    ``at_least`` measurements are done; return how long the cell took to end."""
    msg_id = kernel.start(cell)
    _eventually(lambda: (_lines(witness) >= at_least and 2 <= _lines(witness) % 8 <= 5
                         and kernel.workers()), 300, f"{at_least} measurements")
    kernel.manager.interrupt_kernel()
    asked = time.monotonic()
    reply = kernel.reply(msg_id, timeout=120)
    ended = time.monotonic() - asked
    assert reply["status"] == "error" and reply["ename"] == "KeyboardInterrupt", reply
    _eventually(lambda: not kernel.workers(), 10, "every worker process stopping")
    return ended


def _check_stored(work_dir: Path, witness: Path) -> int:
    records = _load_database(work_dir)
    valid = sum(1 for r in records if r.run_secs and r.run_secs[0] < 1e9)
    measured = _lines(witness)
    # The last measurement may have finished in the worker just as the interrupt came, before
    # its result reached the kernel; every other one is stored.
    assert measured - 1 <= valid <= measured, (valid, measured, len(records))
    return len(records)


def _picked_from_database(logs: Path, since: dict[Path, int]) -> list[int]:
    """How many records each search round took from the database (its best as the initial
    population, or as what a cost model not yet informed learns from), in log text written
    after ``since`` (file -> size)."""
    picked = []
    for log in sorted(logs.glob("*task_*.log")):
        text = log.read_text()[since.get(log, 0):]
        picked += [int(n) for n in re.findall(r"Picked top (\d+) candidate", text)]
        picked += [int(n) for n in re.findall(r"The cost model learnt from (\d+) record", text)]
    return picked


def _interrupt_and_resume(tmp_path: Path, model_source: str, cell: str,
                          then_restart: bool = False) -> None:
    work_dir, witness = tmp_path / "work", tmp_path / "measured.txt"
    kernel = Kernel(tmp_path)
    try:
        kernel.run(SETUP.format(tests_dir=str(TESTS_DIR), witness=str(witness),
                                work_dir=str(work_dir)) + model_source)
        ended = _interrupt_mid_batch(kernel, cell, witness, at_least=10)
        n_records = _check_stored(work_dir, witness)
        record_file = work_dir / "database_tuning_record.json"
        before = record_file.read_text()
        logs = {p: len(p.read_text()) for p in (work_dir / "logs").glob("*.log")}
        print(f"interrupted: the cell ended {ended:.2f} s after the interrupt with "
              f"{n_records} records stored")

        # The same cell again: it loads the database, starts from it, appends to it.
        _interrupt_mid_batch(kernel, cell, witness, at_least=_lines(witness) + 2)
        n_again = _check_stored(work_dir, witness)
        assert n_again > n_records
        assert record_file.read_text().startswith(before)
        assert any(n > 0 for n in _picked_from_database(work_dir / "logs", logs))

        if then_restart:
            # A kernel restart in the middle of tuning leaves no worker behind.
            kernel.start(cell)
            workers = _eventually(
                lambda: {"wb-build", "wb-run"} <= set(kernel.workers().values()) and
                kernel.workers(), 300, "the builder's and the runner's workers")
            kernel.manager.restart_kernel(now=True)
            _eventually(lambda: not any(_alive(p) for p in workers), 15,
                        f"workers {workers} ending with the restarted kernel")
    finally:
        kernel.close()


def test_interrupt_tune_tir_in_a_kernel_then_resume_then_restart(tmp_path):
    _interrupt_and_resume(tmp_path, TIR, TIR_CELL, then_restart=True)


def test_interrupt_tune_relax_in_a_kernel_then_resume(tmp_path):
    _interrupt_and_resume(tmp_path, RELAX, RELAX_CELL)
