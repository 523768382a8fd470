"""``Profiler``: records timed, nested calls on devices and turns them into a Report.

This is TVM's internal profiling engine (what its VM uses), in Python. ``start()`` opens one
``Total`` frame per device; ``start_call``/``stop_call`` bracket each call (calls may nest, so
inner calls finish, and are listed, before their enclosing call); ``stop()`` closes the Totals;
``report()`` gives every call ``Percent`` of the longest device Total. Beyond TVM each call also
records ``Start (us)`` (time since ``start()``), so reports have a timeline.

Timing is a wall clock without device synchronisation, which is right for the CPU; a device
with asynchronous work must be synchronised by the caller before ``stop_call``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ... import options
from .collectors import MetricCollector, check_collectors
from .metrics import (COUNT, DEVICE, DURATION, NAME, PERCENT, START, Count, DeviceWrapper,
                      Duration, MetricValue, Percent)
from .report import Report


def _wrap(dev: Any) -> DeviceWrapper:
    return dev if isinstance(dev, DeviceWrapper) else DeviceWrapper(dev)


@dataclass
class _Frame:
    name: str
    device: DeviceWrapper
    metrics: dict[str, MetricValue]
    collector_states: list[tuple[MetricCollector, Any]]
    start_ns: int
    end_ns: int = 0
    finished_metrics: dict[str, MetricValue] = field(default_factory=dict)


class Profiler:
    """Profiler(devices, collectors=(), configuration=None, num_threads=None).

    ``configuration`` gains ``"Number of threads"`` (``num_threads``, default: the
    ``num_threads`` option, i.e. the thread count parallel kernels run with). Collectors are
    ``init``-ed once, here, with all devices.
    """

    def __init__(self, devices: Sequence[Any], collectors: Sequence[MetricCollector] = (),
                 configuration: Mapping[str, MetricValue] | None = None,
                 num_threads: int | None = None) -> None:
        if not devices:
            raise ValueError("Profiler: needs at least one device")
        self.devices = [_wrap(d) for d in devices]
        self.collectors = check_collectors(list(collectors), "Profiler")
        for collector in self.collectors:
            collector.init(list(self.devices))
        if num_threads is None:
            num_threads = int(options.get("num_threads"))  # what parallel kernels will use
        self.configuration: dict[str, MetricValue] = dict(configuration or {})
        self.configuration["Number of threads"] = Count(num_threads)
        self._stack: list[_Frame] = []
        self._finished: list[_Frame] = []
        self._t0 = 0
        self._running = False

    def is_running(self) -> bool:
        return self._running

    def start(self) -> None:
        """Begin the run: opens the per-device ``Total`` frames."""
        if self._running:
            raise RuntimeError("Profiler.start: already running")
        self._running = True
        self._stack, self._finished = [], []
        self._t0 = time.perf_counter_ns()
        for device in self.devices:
            self.start_call("Total", device)

    def start_call(self, name: str, dev: Any,
                   extra_metrics: Mapping[str, MetricValue] | None = None) -> None:
        """Open a call frame named ``name`` on ``dev`` (nested inside any open frame)."""
        if not self._running:
            raise RuntimeError("Profiler.start_call: call start() first")
        device = _wrap(dev)
        states = [(c, s) for c in self.collectors if (s := c.start(device)) is not None]
        self._stack.append(_Frame(name, device, dict(extra_metrics or {}), states,
                                  time.perf_counter_ns()))

    def stop_call(self, extra_metrics: Mapping[str, MetricValue] | None = None) -> None:
        """Close the innermost open frame, merging ``extra_metrics`` and collector metrics."""
        if not self._stack:
            raise RuntimeError("Profiler.stop_call: no call is open")
        frame = self._stack.pop()
        frame.end_ns = time.perf_counter_ns()
        frame.metrics.update(extra_metrics or {})
        for collector, state in frame.collector_states:
            frame.metrics.update(collector.stop(state))
        self._finished.append(frame)

    def stop(self) -> None:
        """End the run: closes the ``Total`` frames; every call must be closed by now."""
        if len(self._stack) != len(self.devices):
            raise RuntimeError(f"Profiler.stop: {len(self._stack) - len(self.devices)} "
                               "call(s) still open")
        for _ in self.devices:
            self.stop_call()
        self._running = False

    def _row(self, frame: _Frame) -> dict[str, MetricValue]:
        return {NAME: frame.name, DURATION: Duration((frame.end_ns - frame.start_ns) / 1e3),
                COUNT: Count(1), DEVICE: frame.device.name, **frame.metrics,
                START: Duration((frame.start_ns - self._t0) / 1e3)}

    def report(self) -> Report:
        """The finished run as a Report (calls in completion order, Totals as device metrics)."""
        if self._running or not self._finished:
            raise RuntimeError("Profiler.report: call start() and stop() first")
        rows = [self._row(f) for f in self._finished]
        calls, totals = rows[:-len(self.devices)], rows[-len(self.devices):]
        overall = max(t[DURATION].value for t in totals)
        for row in calls:
            share = row[DURATION].value / overall * 100 if overall > 0 else 0.0
            start = row.pop(START)
            row[PERCENT] = Percent(share)
            row[START] = start  # keep the timestamp last, after TVM's metrics
        device_metrics = {t[DEVICE]: t for t in totals}
        return Report(calls, device_metrics, self.configuration)
