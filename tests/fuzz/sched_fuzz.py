"""The schedule fuzzer: random schedules of every public primitive, built and checked against
numpy, each case in a child process so that a compiler crash is counted, not fatal.

    python tests/fuzz/sched_fuzz.py --schedules 20000 --jobs 2      # what `make fuzz` runs
    python tests/fuzz/sched_fuzz.py --case random:1234              # one case, in-process
    python tests/fuzz/sched_fuzz.py --minimize random:1234          # shrink a failing case

Cases are numbered by seed (``--first-seed``); a fraction (``--tuner-share``) are *tuner* cases
(random decisions on the llvm design space, see fuzz_cases.py), the rest *random* cases. Worker
processes (``--jobs``, run under ``nice``) each serve many cases; one that dies or exceeds
``--case-timeout`` is counted as a crash of its case and replaced. Every failure is appended to
``--findings`` (JSON lines: kind, seed, workload, outcome, detail, moves, trace), which is the
reproducer: ``--case kind:seed`` replays it in-process.

The summary counts schedules tried, accepted (built and compared), refused (tuner samples the
postprocessors rejected), wrong, errors (an exception other than a refusal from a primitive, the
trace replay, the build or the run), crashed and timed out, and the primitive calls accepted and
refused; the exit status is 1 when any case failed.
"""
from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

HERE = Path(__file__).resolve().parent
FAILURES = ("wrong", "error", "crash", "timeout")


def case_list(first_seed: int, n: int, tuner_share: float) -> list[tuple[str, int]]:
    """``n`` cases from ``first_seed``: every k-th one a tuner case (k from the share)."""
    every = round(1 / tuner_share) if tuner_share > 0 else 0
    return [("tuner" if every and (seed % every) == 0 else "random", seed)
            for seed in range(first_seed, first_seed + n)]


class _Worker:
    """A child process serving cases over pipes (fuzz_cases.worker_main)."""

    def __init__(self, nice: int) -> None:
        cmd = [sys.executable, "-c", "import sys; sys.path.insert(0, %r); "
               "import fuzz_cases; fuzz_cases.worker_main()" % str(HERE)]
        if nice and hasattr(os, "nice"):
            cmd = ["nice", "-n", str(nice)] + cmd
        env = dict(os.environ, PYTHONFAULTHANDLER="1")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1, env=env)
        self.case: tuple[str, int] | None = None
        self.started = 0.0
        self.stderr_tail: list[str] = []

    def send(self, case: tuple[str, int]) -> None:
        self.case = case
        self.started = time.monotonic()
        self.proc.stdin.write(json.dumps(list(case)) + "\n")
        self.proc.stdin.flush()

    def kill(self) -> str:
        try:
            self.proc.kill()
            _, err = self.proc.communicate(timeout=10)
        except Exception:  # noqa: BLE001 - best effort
            err = ""
        return (err or "")[-3000:]


def run_cases(cases: list[tuple[str, int]], jobs: int = 1, case_timeout: float = 300.0,
              nice: int = 10, progress: Any = None) -> Iterator[dict[str, Any]]:
    """Run ``cases`` in ``jobs`` worker processes; yields one result dict per case (in
    completion order). A worker that dies yields ``outcome="crash"`` for its case (with the
    end of its stderr), one that overruns ``case_timeout`` ``outcome="timeout"``."""
    todo = list(reversed(cases))
    workers: list[_Worker] = []
    try:
        while todo or any(w.case for w in workers):
            while len(workers) < jobs and todo:
                workers.append(_Worker(nice))
            for w in workers:
                if w.case is None and todo:
                    w.send(todo.pop())
            busy = [w for w in workers if w.case is not None]
            ready, _, _ = select.select([w.proc.stdout for w in busy], [], [], 1.0)
            now = time.monotonic()
            for w in list(busy):
                if w.proc.stdout in ready:
                    line = w.proc.stdout.readline()
                    if line:
                        result = json.loads(line)
                        w.case = None
                        yield result
                        continue
                    kind, seed = w.case
                    err = w.kill()
                    workers.remove(w)
                    yield {"kind": kind, "seed": seed, "outcome": "crash", "accepted": 0,
                           "refused": 0, "detail": f"worker died (exit {w.proc.returncode})",
                           "stderr": err}
                elif now - w.started > case_timeout:
                    kind, seed = w.case
                    err = w.kill()
                    workers.remove(w)
                    yield {"kind": kind, "seed": seed, "outcome": "timeout", "accepted": 0,
                           "refused": 0, "detail": f"no result after {case_timeout:.0f} s",
                           "stderr": err}
    finally:
        for w in workers:
            try:
                w.proc.stdin.close()
                w.proc.wait(timeout=10)
            except Exception:  # noqa: BLE001
                w.kill()


class Tally:
    """Counts of a fuzz run (what the summary prints)."""

    def __init__(self) -> None:
        self.outcomes: Counter = Counter()
        self.by_kind: Counter = Counter()
        self.calls_accepted = 0
        self.calls_refused = 0
        self.failures: list[dict[str, Any]] = []
        self.t0 = time.monotonic()

    def add(self, r: dict[str, Any]) -> None:
        self.outcomes[r["outcome"]] += 1
        self.by_kind[(r["kind"], r["outcome"])] += 1
        if r["kind"] == "random":
            self.calls_accepted += r.get("accepted", 0)
            self.calls_refused += r.get("refused", 0)
        if r["outcome"] in FAILURES:
            self.failures.append(r)

    @property
    def tried(self) -> int:
        return sum(self.outcomes.values())

    def summary(self) -> str:
        o = self.outcomes
        secs = time.monotonic() - self.t0
        built = o["ok"] + o["wrong"]
        lines = [
            f"schedules tried {self.tried}: accepted and built {built} (ok {o['ok']}, "
            f"wrong {o['wrong']}), refused {o['refused']}, errors {o['error']}, "
            f"crashed {o['crash']}, timed out {o['timeout']}",
            "  random cases: " + ", ".join(f"{k} {v}" for (kind, k), v in
                                           sorted(self.by_kind.items()) if kind == "random"),
            "  tuner cases:  " + ", ".join(f"{k} {v}" for (kind, k), v in
                                           sorted(self.by_kind.items()) if kind == "tuner"),
            f"  primitive calls in random cases: accepted {self.calls_accepted}, "
            f"refused {self.calls_refused}",
            f"  time {secs:.0f} s ({secs / max(1, self.tried):.2f} s per schedule)",
        ]
        return "\n".join(lines)


def _print_failure(r: dict[str, Any], file: Any = sys.stdout) -> None:
    print(f"\n=== {r['outcome'].upper()} {r['kind']}:{r['seed']} ({r.get('workload')}): "
          f"{r.get('detail', '')[:600]}", file=file)
    for m in r.get("moves", [])[-14:]:
        print(f"    {m[:300]}", file=file)
    file.flush()


def _one_case(spec: str) -> int:
    sys.path.insert(0, str(HERE))
    import fuzz_cases
    kind, seed = spec.split(":")
    r = fuzz_cases.run_case(kind, int(seed))
    print(json.dumps({k: v for k, v in r.items() if k not in ("trace", "traceback")},
                     indent=1, default=str))
    if "trace" in r:
        print(r["trace"])
    if "traceback" in r:
        print(r["traceback"])
    return 0 if r["outcome"] in ("ok", "refused") else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--schedules", type=int, default=20000, help="cases to run")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument("--tuner-share", type=float, default=0.2,
                    help="fraction of cases drawn from the tuner's design space")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--nice", type=int, default=10)
    ap.add_argument("--case-timeout", type=float, default=300.0)
    ap.add_argument("--findings", default="fuzz-findings.jsonl",
                    help="failures are appended here (JSON lines)")
    ap.add_argument("--report-every", type=int, default=500)
    ap.add_argument("--case", help="run one case KIND:SEED in this process and print it")
    ap.add_argument("--minimize", help="shrink the failing case KIND:SEED (random cases)")
    args = ap.parse_args(argv)
    if args.case:
        return _one_case(args.case)
    if args.minimize:
        sys.path.insert(0, str(HERE))
        from fuzz_minimize import minimize
        return minimize(args.minimize)

    cases = case_list(args.first_seed, args.schedules, args.tuner_share)
    tally = Tally()
    findings = Path(args.findings)
    for r in run_cases(cases, args.jobs, args.case_timeout, args.nice):
        tally.add(r)
        if r["outcome"] in FAILURES:
            _print_failure(r)
            with findings.open("a") as f:
                f.write(json.dumps(r, default=str) + "\n")
        if tally.tried % args.report_every == 0:
            print(tally.summary(), flush=True)
    print(tally.summary())
    return 1 if tally.failures else 0


if __name__ == "__main__":
    sys.exit(main())
