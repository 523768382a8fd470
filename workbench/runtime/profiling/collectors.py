"""``MetricCollector``: the interface for gathering extra metrics around each profiled call.

The protocol is TVM's (``Init`` / ``Start`` / ``Stop``), in Python spelling:

- ``init(devices)`` once before profiling, with every device as a ``DeviceWrapper``; do the
  expensive setup here;
- ``start(device)`` right before a call on ``device``; returns opaque state, or ``None`` when the
  collector cannot measure that device (it is then skipped for that call);
- ``stop(state)`` right after the call; returns ``{metric name: Count | Duration | Percent |
  Ratio | str}``, merged into that call's metrics.

Subclass it and override the three methods. ``WallClockCollector`` is the simplest example.
"""
from __future__ import annotations

import time
from typing import Any, Sequence

from .metrics import DeviceWrapper, Duration, MetricValue


class MetricCollector:
    """Interface for user-defined profiling metric collection (see the module docstring)."""

    def init(self, devices: Sequence[DeviceWrapper]) -> None:
        """Called once before profiling with every device that may be measured."""

    def start(self, device: DeviceWrapper) -> Any | None:
        """Begin measuring one call on ``device``; ``None`` means "cannot measure this device"."""
        raise NotImplementedError(f"{type(self).__name__} must implement start(device)")

    def stop(self, state: Any) -> dict[str, MetricValue]:
        """Finish the measurement begun by ``start``; return the new metrics."""
        raise NotImplementedError(f"{type(self).__name__} must implement stop(state)")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def check_collectors(collectors: Any, where: str) -> list[MetricCollector]:
    """A list of objects with init/start/stop; TypeError naming ``where`` otherwise."""
    if isinstance(collectors, (MetricCollector, str)) or not isinstance(collectors, Sequence):
        raise TypeError(f"{where}: collectors must be a list of MetricCollector, "
                        f"got {type(collectors).__name__}")
    for i, c in enumerate(collectors):
        missing = [m for m in ("init", "start", "stop") if not callable(getattr(c, m, None))]
        if missing:
            raise TypeError(f"{where}: collectors[{i}] ({type(c).__name__}) lacks {missing}; "
                            "subclass MetricCollector")
    return list(collectors)


class WallClockCollector(MetricCollector):
    """Wall-clock time of each call as ``Duration`` metric ``"Wall Time (us)"``.

    It does not synchronise a device: on the CPU the call has finished when it returns.
    """

    metric_name = "Wall Time (us)"

    def start(self, device: DeviceWrapper) -> int:
        return time.perf_counter_ns()

    def stop(self, state: int) -> dict[str, MetricValue]:
        return {self.metric_name: Duration((time.perf_counter_ns() - state) / 1000.0)}
