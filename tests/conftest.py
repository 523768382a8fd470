"""Test-suite wide settings.

Hypothesis runs derandomized (examples derived from each test's name, no example database), so
a test passes or fails the same way on every run and machine. The randomized search lives in
``make fuzz``, which sets ``HYPOTHESIS_PROFILE=fuzz`` (fresh random examples, more of them) for
the same property tests, next to the schedule fuzzer (tests/fuzz/).
"""
from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# Timing must not decide a test either: no deadlines, no "too slow" health check (the machine
# may be loaded).
_TIMING = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", derandomize=True, database=None, **_TIMING)
settings.register_profile("fuzz", derandomize=False, database=None, max_examples=1000,
                          **_TIMING)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Tuning runs in tests measure exactly the trials they ask for: the confirmation
# re-measurements that end a run (meta_schedule.confirm) are off unless a test turns them on
# (tests/meta_schedule/test_ms_confirm.py). Through the environment, so scripts and notebook
# kernels the tests start inherit it.
os.environ.setdefault("WORKBENCH_MS_CONFIRM_ROUNDS", "0")
# Likewise the pretrained cost model (meta_schedule.cost_model.pretrained) is off, so a tuning
# test's first rounds are the cold search its assertions were written for (and cheap);
# tests/meta_schedule/test_ms_pretrained.py turns it on, as users have it.
os.environ.setdefault("WORKBENCH_MS_PRETRAINED_COST_MODEL", "0")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "not_roundtrip(reason): builds, on purpose, IR that TVMScript cannot say "
        "(one definition used twice); make test-roundtrip lists its findings apart")


# ---- the TVMScript round trip over everything the suite builds (`make test-roundtrip`) -------
# With WORKBENCH_SCRIPT_ROUNDTRIP=entry (or 1) every test runs inside a PassContext holding a
# RoundTripInstrument that round-trips the module entering each pipeline (=all: every pass
# boundary). Failures are collected with the test id, summarised at the end of the run and
# written as JSON (WORKBENCH_SCRIPT_ROUNDTRIP_REPORT, default build/script_roundtrip.json).
# Tests that enter their own PassContext get the instrument added to it (and are counted).
_RT_MODE = {"1": "entry", "entry": "entry", "all": "all"}.get(
    os.environ.get("WORKBENCH_SCRIPT_ROUNDTRIP", "").strip().lower())
_RT_STATS = {"tests": 0, "tests_checked": 0, "tests_own_context": 0, "modules": 0,
             "functions": 0, "failures": [], "allowed": [], "exempt": []}

if _RT_MODE:
    import json
    import time

    import pytest

    _RT_STARTED = time.time()

    @pytest.fixture(autouse=True)
    def _script_roundtrip(request, monkeypatch):
        from workbench.ir.transform import PassContext
        from workbench.script.roundtrip import RoundTripInstrument

        inst = RoundTripInstrument(mode=_RT_MODE, on_failure="record")
        ctx = PassContext(instruments=[inst])
        own = [0]
        enter = PassContext.__enter__

        def counting_enter(self):
            # A test's own PassContext (its opt_level, config or instruments) gets the
            # round-trip instrument too, last, so the passes it runs are checked as well --
            # unless the test round-trips on its own (the instrument's own tests).
            if self is not ctx:
                own[0] += 1
                if not any(isinstance(i, RoundTripInstrument) for i in self.instruments):
                    self.instruments = [*self.instruments, inst]
            return enter(self)

        monkeypatch.setattr(PassContext, "__enter__", counting_enter)
        with ctx:
            yield
        _RT_STATS["tests"] += 1
        _RT_STATS["tests_checked"] += inst.modules_checked > 0
        _RT_STATS["tests_own_context"] += own[0] > 0
        _RT_STATS["modules"] += inst.modules_checked
        _RT_STATS["functions"] += inst.functions_checked
        # A test marked not_roundtrip builds, on purpose, IR the text cannot say (one
        # definition used twice): its findings are listed with the marker's reason.
        exempt = request.node.get_closest_marker("not_roundtrip")
        why = {"exempt_reason": exempt.args[0]} if exempt is not None and exempt.args else {}
        for key, found in (("exempt" if exempt is not None else "failures", inst.failures),
                           ("allowed", inst.allowed)):
            _RT_STATS[key].extend(dict(f.as_dict(), test=request.node.nodeid, **why)
                                  for f in found)

    def pytest_terminal_summary(terminalreporter):
        tr, s = terminalreporter, _RT_STATS
        tr.section(f"TVMScript round trip ({_RT_MODE})")
        tr.write_line(f"{s['tests']} tests: {s['tests_checked']} built IR that was checked, "
                      f"{s['tests_own_context']} entered their own PassContext (checked "
                      f"in it too); "
                      f"{s['modules']} modules, {s['functions']} functions checked; "
                      f"{len(s['failures'])} failures, {len(s['allowed'])} allow-listed, "
                      f"{len(s['exempt'])} in tests marked not_roundtrip; "
                      f"{time.time() - _RT_STARTED:.0f}s")
        for f in s["failures"]:
            tr.write_line(f"ROUNDTRIP {f['test']}: {f['stage']} {f['pass_name']} "
                          f"function={f['function']}: {f['path']}: "
                          f"{f['reason'].splitlines()[0]}")
        path = os.environ.get("WORKBENCH_SCRIPT_ROUNDTRIP_REPORT", "build/script_roundtrip.json")
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "w") as out:
            json.dump(dict(s, mode=_RT_MODE, seconds=round(time.time() - _RT_STARTED, 1)),
                      out, indent=1)
        tr.write_line(f"report: {path}")
