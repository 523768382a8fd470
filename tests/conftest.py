"""Test-suite wide settings.

Hypothesis runs derandomized (examples derived from each test's name, no example database), so
a test passes or fails the same way on every run and machine. The randomized search lives in
``make fuzz``, which sets ``HYPOTHESIS_PROFILE=fuzz`` (fresh random examples, more of them) for
the same property tests, next to the schedule fuzzer (tests/fuzz/).
"""
from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, database=None)
settings.register_profile("fuzz", derandomize=False, database=None, max_examples=1000)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
