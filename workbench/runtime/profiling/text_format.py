"""TVM's CSV and text-table renderings of a Report (``ReportNode::AsCSV`` / ``AsTable``).

Differences from TVM, on purpose:
- no locale thousands separators (TVM uses the user's locale; the C locale has none);
- CSV doubles inner quotes of string cells (TVM leaves them, producing unreadable CSV);
- the table leaves out the per-call start timestamp (``Start (us)``): it is timeline data, and
  summing it over aggregated calls would print nonsense; and ``Module`` (the common module of
  a call's layers, grouping data the ``Layer`` column shows already);
- groups of aggregated calls keep their order of first appearance (TVM: hash order).
"""
from __future__ import annotations

from typing import Mapping, Sequence

from .metrics import (ARGUMENT_SHAPES, COUNT, DEVICE, DURATION, MODULE, NAME, PERCENT, START,
                      MetricValue, kind_of)
from .rows import Row, aggregate, column_sums, sort_by_duration, without

TABLE_COLUMNS = (NAME, DURATION, PERCENT, DEVICE, COUNT, ARGUMENT_SHAPES)
# Start is timeline data; Module is grouping data that the Layer column already shows.
TABLE_HIDDEN = (START, MODULE)
SEPARATOR_NAME = "-" * 10


def to_csv(calls: Sequence[Mapping[str, MetricValue]]) -> str:
    """Calls only: sorted union of metric names as header, one line per call, "\\n" endings."""
    header = sorted({name for call in calls for name in call})
    lines = [",".join(header)]
    for i, call in enumerate(calls):
        cells = []
        for name in header:
            value = call.get(name)
            cells.append("" if value is None else kind_of(value, f"calls[{i}][{name!r}]")
                         .csv_cell(value))
        lines.append(",".join(cells))
    return "".join(line + "\n" for line in lines)


def table_rows(calls: Sequence[Mapping[str, MetricValue]],
               device_metrics: Mapping[str, Mapping[str, MetricValue]],
               sort: bool, aggregate_calls: bool, col_sums: bool) -> list[Row]:
    """The rows of ``table()`` in print order: calls or groups, separator+Sum, device Totals."""
    rows = aggregate(calls) if aggregate_calls else [dict(c) for c in calls]
    rows = [without(r, TABLE_HIDDEN) for r in rows]
    if sort:
        rows = sort_by_duration(rows)
    if col_sums:
        sums = column_sums(rows)
        rows += [{NAME: SEPARATOR_NAME}, sums]
    for metrics in device_metrics.values():
        rows.append({**without(metrics, TABLE_HIDDEN), NAME: "Total"})
    return rows


def table_columns(rows: Sequence[Mapping[str, MetricValue]]) -> list[str]:
    """The six fixed columns, then every other metric name in byte order."""
    others = {name for row in rows for name in row} - set(TABLE_COLUMNS)
    return [*TABLE_COLUMNS, *sorted(others, key=lambda s: s.encode())]


def format_cell(value: MetricValue | None, where: str = "metric") -> str:
    return "" if value is None else kind_of(value, where).table_cell(value)


def to_table(calls: Sequence[Mapping[str, MetricValue]],
             device_metrics: Mapping[str, Mapping[str, MetricValue]],
             configuration: Mapping[str, MetricValue],
             sort: bool = True, aggregate_calls: bool = True, col_sums: bool = True) -> str:
    """TVM's human-readable table followed by the Configuration block."""
    rows = table_rows(calls, device_metrics, sort, aggregate_calls, col_sums)
    columns = table_columns(rows)
    grid = [list(columns)] + [[format_cell(row.get(c), c) for c in columns] for row in rows]
    widths = [max(len(line[i]) for line in grid) for i in range(len(columns))]
    out = []
    for line in grid:
        # First column left-aligned, the rest right-aligned; every cell followed by two spaces.
        cells = [line[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(line[1:], widths[1:])]
        out.append("".join(c + "  " for c in cells) + "\n")
    out.append("\nConfiguration\n-------------\n")
    for key, value in configuration.items():
        out.append(f"{key}: {format_cell(value, key)}\n")
    return "".join(out)
