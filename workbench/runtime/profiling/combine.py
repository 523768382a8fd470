"""``Report.fastest_of(reports)``: per call, the fastest of several profiled runs.

On a shared machine, other processes only ever add time to a call (the process is descheduled
for a time slice, a cache is cold), so the minimum over a few runs of the same program is the
closest to what the code costs. The runs must have the same calls in the same order (same
names and argument shapes: runs of one VM function on inputs of one shape); the result keeps
the first run's calls and metrics with ``Duration`` replaced by the per-call minimum,
``Percent`` recomputed against the fastest run's device total, that run's device metrics, and
the first run's configuration plus ``"Runs"`` (how many were combined).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from .metrics import ARGUMENT_SHAPES, DURATION, NAME, PERCENT, Count, Duration, Percent

if TYPE_CHECKING:  # pragma: no cover
    from .report import Report

__all__ = ["fastest_of"]


def _total(report: "Report") -> float:
    totals = [m[DURATION].value for m in report.device_metrics.values()
              if isinstance(m.get(DURATION), Duration)]
    if totals:
        return max(totals)
    return sum(c[DURATION].value for c in report.calls if isinstance(c.get(DURATION), Duration))


def fastest_of(reports: Sequence["Report"]) -> "Report":
    from .report import Report

    if isinstance(reports, Report) or not isinstance(reports, Sequence) or not reports:
        raise TypeError("Report.fastest_of: expected a non-empty list of Reports")
    for i, r in enumerate(reports):
        if not isinstance(r, Report):
            raise TypeError(f"Report.fastest_of: reports[{i}] is a {type(r).__name__}, "
                            "not a Report")
    first = reports[0]
    for i, r in enumerate(reports[1:], 1):
        if len(r.calls) != len(first.calls):
            raise ValueError(f"Report.fastest_of: reports[{i}] has {len(r.calls)} calls, "
                             f"reports[0] {len(first.calls)}: not runs of the same program")
        for k, (a, b) in enumerate(zip(first.calls, r.calls)):
            if (a.get(NAME), a.get(ARGUMENT_SHAPES)) != (b.get(NAME), b.get(ARGUMENT_SHAPES)):
                raise ValueError(f"Report.fastest_of: call {k} is {a.get(NAME)!r} in reports[0] "
                                 f"but {b.get(NAME)!r} in reports[{i}]")
    quickest = min(reports, key=_total)
    total = _total(quickest)
    calls = []
    for k, call in enumerate(first.calls):
        call = dict(call)
        durations = [r.calls[k][DURATION].value for r in reports
                     if isinstance(r.calls[k].get(DURATION), Duration)]
        if durations:
            call[DURATION] = Duration(min(durations))
            if isinstance(call.get(PERCENT), Percent) and total > 0:
                call[PERCENT] = Percent(100.0 * call[DURATION].value / total)
        calls.append(call)
    configuration = {**first.configuration, "Runs": Count(len(reports))}
    return Report(calls, quickest.device_metrics, configuration)
