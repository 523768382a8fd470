"""The schedules of a task's fastest measured candidates, by the identity of their trace.

Picking the best records of the database into a new population (``EvolutionarySearch``) and
re-measuring the leaders (``confirm_best``) replay record traces that this process replayed
already: the records of this run hold the very ``Trace`` objects of the candidates measured
(``AddToDatabase`` commits ``cand.sch.trace``; pooled records keep the first one's). The task
scheduler keeps each task's fastest ``capacity`` measured schedules here, and a lookup by a
record's trace object returns its schedule instead of a replay (~30 ms each for a 512^3
matmul; a 64-trial run replayed ~35 of them). Records loaded from a file have traces of their
own and are replayed as before.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from workbench.tir.schedule import Schedule, Trace

__all__ = ["MeasuredSchedules", "measured_schedules"]

# Schedules kept per task: enough for the database picks of a sized population (20% of 128)
# and the confirmation's leaders, few enough for a model of 50 tasks.
CAPACITY = 32


class MeasuredSchedules:
    """At most ``capacity`` schedules, the fastest put; ``get(trace)`` by trace identity."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self.capacity = capacity
        self._items: dict[int, tuple[float, "Schedule"]] = {}

    def put(self, sch: "Schedule", seconds: float) -> None:
        """Keep ``sch`` (measured at ``seconds``) if it is among the fastest."""
        self._items[id(sch.trace)] = (seconds, sch)
        if len(self._items) > self.capacity:
            slowest = max(self._items, key=lambda k: self._items[k][0])
            del self._items[slowest]

    def get(self, trace: "Trace") -> "Schedule | None":
        """The kept schedule whose trace is ``trace`` itself, or None. (A kept schedule holds
        its trace, so the id of a kept trace is never reused by another object.)"""
        item = self._items.get(id(trace))
        return item[1] if item is not None and item[1].trace is trace else None

    def __len__(self) -> int:
        return len(self._items)


def measured_schedules(ctx: Any) -> MeasuredSchedules:
    """The task's :class:`MeasuredSchedules` (made on first use, kept on the TuneContext)."""
    kept = getattr(ctx, "_measured_schedules", None)
    if kept is None:
        kept = MeasuredSchedules()
        ctx._measured_schedules = kept
    return kept
