"""Where each call sits in time, and the Chrome trace-event export built on it.

Calls recorded by our Profiler carry a ``Start (us)`` metric (microseconds since the run began).
Reports without it (e.g. read from TVM's JSON) get a synthetic timeline: each device's calls laid
end to end in call order, flagged as synthetic in the trace.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .metrics import DEVICE, DURATION, NAME, START, Duration, MetricValue, plain

if TYPE_CHECKING:
    from .report import Report


@dataclass(frozen=True)
class Span:
    """One call on the timeline, in microseconds."""

    name: str
    device: str
    start: float
    duration: float
    metrics: dict[str, MetricValue]


def _us(metrics: dict[str, MetricValue], key: str) -> float | None:
    value = metrics.get(key)
    return value.value if isinstance(value, Duration) else None


def has_timestamps(report: "Report") -> bool:
    return bool(report.calls) and all(_us(c, START) is not None for c in report.calls)


def call_spans(report: "Report") -> list[Span]:
    """Every call as a Span; real start times when all calls have them, else end to end."""
    real = has_timestamps(report)
    cursor: dict[str, float] = {}
    spans = []
    for call in report.calls:
        device = str(call.get(DEVICE, "")) or "unknown"
        duration = _us(call, DURATION) or 0.0
        start = _us(call, START) if real else cursor.get(device, 0.0)
        cursor[device] = start + duration
        spans.append(Span(str(call.get(NAME, "")), device, start, duration, call))
    return spans


def _device_index(devices: list[str], name: str) -> int:
    if name not in devices:
        devices.append(name)
    return devices.index(name) + 1  # tid 0 is left for process-level events


def to_chrome_trace(report: "Report", path: str | os.PathLike | None = None) -> str:
    """Trace Event Format JSON: one complete ("X") event per call and per device Total."""
    pid = 1
    devices: list[str] = []
    events: list[dict[str, Any]] = []
    for span in call_spans(report):
        args = {k: plain(v) for k, v in span.metrics.items() if k not in (NAME, START)}
        events.append({"name": span.name, "cat": "call", "ph": "X", "ts": span.start,
                       "dur": span.duration, "pid": pid,
                       "tid": _device_index(devices, span.device), "args": args})
    for device, metrics in report.device_metrics.items():
        events.append({"name": "Total", "cat": "total", "ph": "X",
                       "ts": _us(metrics, START) or 0.0, "dur": _us(metrics, DURATION) or 0.0,
                       "pid": pid, "tid": _device_index(devices, device),
                       "args": {k: plain(v) for k, v in metrics.items() if k != START}})
    meta = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
             "args": {"name": "workbench profile"}}]
    meta += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": i + 1, "args": {"name": d}}
             for i, d in enumerate(devices)]
    document = {
        "traceEvents": meta + events,
        "displayTimeUnit": "ms",
        "otherData": {
            "configuration": {k: plain(v) for k, v in report.configuration.items()},
            "timestamps": "recorded" if has_timestamps(report) else "synthetic (end to end)",
        },
    }
    text = json.dumps(document, ensure_ascii=False, allow_nan=False)
    if path is not None:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    return text
