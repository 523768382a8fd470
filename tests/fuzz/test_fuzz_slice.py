"""A fixed-seed slice of the schedule fuzzer (sched_fuzz.py), run the way `make fuzz` runs it:
cases in a worker process, each schedule built and compared with numpy. The seeds are fixed,
so the slice does the same work on every run; the randomized search is `make fuzz`."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from sched_fuzz import FAILURES, Tally, case_list, run_cases

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
def test_fixed_seed_slice_has_no_wrong_results_and_no_crashes():
    cases = case_list(first_seed=1, n=100, tuner_share=0.2)
    assert sum(kind == "tuner" for kind, _ in cases) == 20
    tally = Tally()
    for r in run_cases(cases, jobs=1, case_timeout=300, nice=0):
        tally.add(r)
    failures = [f"{r['kind']}:{r['seed']} {r['outcome']}: {r.get('detail', '')[:300]}"
                for r in tally.failures]
    assert not failures, "\n".join(failures) + "\n" + tally.summary()
    assert tally.tried == 100
    # the slice exercises both sides: schedules built and compared, and refused calls
    assert tally.outcomes["ok"] >= 80, tally.summary()
    assert tally.calls_accepted > 100 and tally.calls_refused > 50, tally.summary()


def test_low_precision_tuner_samples_are_exact_and_stay_in_bounds():
    """Tuner cases on the int8 / bf16 workloads (AMX, VNNI and BF16 micro-kernels on weights
    packed in the design space), built as the tuner's builder builds them and run between
    guard bytes in a worker process: bench_peak's int8 matmul had candidates that crashed the
    runner's workers (AMX tile stores into a compacted write cache with the uncompacted row
    stride); here they crashed the worker or computed garbage."""
    import fuzz_cases
    from fuzz_workloads import LOWP_WORKLOADS
    seeds = [s for s in range(1, 200) if fuzz_cases.tuner_choice(s)[1] in LOWP_WORKLOADS][:10]
    assert len(seeds) == 10
    results = list(run_cases([("tuner", s) for s in seeds], jobs=1, case_timeout=300, nice=0))
    failures = [f"tuner:{r['seed']} {fuzz_cases.tuner_choice(r['seed'])[1]} {r['outcome']}: "
                f"{r.get('detail', '')[:300]}" for r in results if r["outcome"] in FAILURES]
    assert not failures, "\n".join(failures)
    assert sum(r["outcome"] == "ok" for r in results) >= 7
    assert {r["workload"] for r in results if "workload" in r} == set(LOWP_WORKLOADS)


def test_one_case_runs_in_process_and_reports_its_counts():
    """``--case kind:seed`` (the reproducer of a finding) runs one case and prints it."""
    proc = subprocess.run([sys.executable, str(HERE / "sched_fuzz.py"), "--case", "random:3"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    head = proc.stdout[:proc.stdout.index("}") + 1]
    result = json.loads(head)
    assert result["outcome"] == "ok" and result["seed"] == 3
    assert result["accepted"] + result["refused"] > 0


def test_a_worker_that_dies_is_counted_as_a_crash(monkeypatch, tmp_path):
    """A case that kills its worker process is a crash of that case; the run goes on with a new
    worker. (A fake case kind makes the worker exit the way an LLVM abort would.)"""
    import fuzz_cases
    assert "abort" not in fuzz_cases.CASES
    script = tmp_path / "sitecustomize.py"
    script.write_text(
        "import os, sys\n"
        "sys.path.insert(0, %r)\n"
        "import fuzz_cases\n"
        "fuzz_cases.CASES['abort'] = lambda seed: os.abort()\n" % str(HERE))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    results = list(run_cases([("abort", 1), ("random", 3)], jobs=1, case_timeout=300, nice=0))
    by_kind = {r["kind"]: r for r in results}
    assert by_kind["abort"]["outcome"] == "crash"
    assert by_kind["random"]["outcome"] == "ok"
    assert set(FAILURES) >= {"crash", "timeout", "wrong", "error"}
