"""Profiling objects: TVM's ``tvm.runtime.profiling`` API, plus timelines and DataFrames.

``Report`` holds per-call metrics (``Count``, ``Duration`` in microseconds, ``Percent``,
``Ratio``, ``str``), per-device totals and the run's configuration, and renders them in TVM's
JSON / CSV / table formats. ``MetricCollector`` is the interface for extra metrics;
``WallClockCollector`` and ``PerfEventCollector`` (Linux perf_event_open) are built in.
``profile_function`` measures one compiled function with collectors; ``Profiler`` is the engine
the VM uses to record calls.

Importing this package loads neither pandas nor the widget libraries.
"""
from .collectors import MetricCollector, WallClockCollector
from .metrics import Count, DeviceWrapper, Duration, Percent, Ratio
from .perf_event import PerfEventCollector, perf_events_status
from .profile_function import profile_function
from .profiler import Profiler
from .report import REPORT_MIME_TYPE, Report

__all__ = [
    "Count",
    "DeviceWrapper",
    "Duration",
    "MetricCollector",
    "PerfEventCollector",
    "Percent",
    "Profiler",
    "REPORT_MIME_TYPE",
    "Ratio",
    "Report",
    "WallClockCollector",
    "perf_events_status",
    "profile_function",
]
