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
