"""Test helpers for schedules: trace round trips through JSON and through Python."""
from __future__ import annotations

import json
from typing import Any

from workbench.ir.structural import assert_structural_equal
from workbench.tir.schedule.handles import LoopRV
from workbench.tir.schedule.schedule import Schedule
from workbench.tir.schedule.trace import Trace


def replay_python(lines: list[str], mod: Any) -> Schedule:
    """Run the lines of ``trace.as_python()`` on a fresh schedule of ``mod``."""
    sch = Schedule(mod)
    exec("\n".join(lines), {"sch": sch, "LoopRV": LoopRV})  # noqa: S102 - the trace printer's own output
    return sch


def verify_trace_roundtrip(sch: Schedule, mod: Any) -> Schedule:
    """Check that ``sch``'s trace replays from JSON and from Python to the same IR.

    ``mod`` is the unscheduled module. Returns the schedule rebuilt from JSON.
    """
    trace = sch.trace
    js = trace.as_json()
    text = json.dumps(js)
    from_json = Schedule(mod)
    Trace.apply_json_to_schedule(json.loads(text), from_json)
    assert_structural_equal(from_json.mod, sch.mod)
    if json.dumps(from_json.trace.as_json()) != text:
        raise AssertionError("the replayed trace serialises differently:\n"
                             f"{text}\n{json.dumps(from_json.trace.as_json())}")
    from_py = replay_python(trace.as_python(), mod)
    assert_structural_equal(from_py.mod, sch.mod)
    return from_json
