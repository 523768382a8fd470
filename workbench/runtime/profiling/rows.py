"""Row operations shared by the table, the DataFrame and the widget: aggregate, sort, sum.

A row is a ``dict[str, metric value]`` (a call, an aggregated group of calls, or a total).
These follow TVM's ``ReportNode::AsTable`` rules; where TVM leaves an order unspecified (hash
maps) we use first appearance so output is deterministic.
"""
from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from .metrics import (ARGUMENT_SHAPES, DEVICE, DURATION, HASH, LAYER, MODULE, NAME, OP_TYPE,
                      Duration, MetricValue, kind_of)

Row = dict[str, MetricValue]


def first_and_more(values: Sequence[str]) -> str:
    """One kernel shared by several layers: ``"layer1.0.conv1 + bn1 + relu (+1 more)"``."""
    distinct = list(dict.fromkeys(v for v in values if v))
    if not distinct:
        return ""
    return distinct[0] if len(distinct) == 1 else f"{distinct[0]} (+{len(distinct) - 1} more)"


def common_module(values: Sequence[str]) -> str:
    """The longest common dotted prefix: ``layer1.0`` and ``layer1.1`` give ``layer1``."""
    parts = [v.split(".") if v else [] for v in values]
    common: list[str] = []
    for level in zip(*parts):
        if any(p != level[0] for p in level):
            break
        common.append(level[0])
    return ".".join(common)


# Source metrics of a kernel shared by several layers combine to something readable; other
# strings keep TVM's rule (the common value, else empty).
_STRING_RULES = {LAYER: first_and_more, OP_TYPE: first_and_more, MODULE: common_module}


def group_key(call: Mapping[str, MetricValue]) -> tuple[str, str, str]:
    """Calls with the same key are one table row: (Hash or Name, Argument Shapes, Device).

    TVM concatenates the three strings; a tuple gives the same groups without the accidental
    collisions concatenation allows ("ab"+"c" == "a"+"bc").
    """
    ident = call.get(HASH, call.get(NAME, ""))
    return (str(ident), str(call.get(ARGUMENT_SHAPES, "")), str(call.get(DEVICE, "")))


def metric_names(rows: Iterable[Mapping[str, MetricValue]]) -> list[str]:
    """Every metric name that occurs in ``rows``, in order of first appearance."""
    seen: dict[str, None] = {}
    for row in rows:
        seen.update(dict.fromkeys(row))
    return list(seen)


def combine(values: Sequence[MetricValue], name: str) -> MetricValue:
    """Combine one metric over a group: sum Duration/Count/Percent, mean Ratio, common str
    (source metrics: see ``_STRING_RULES``)."""
    kinds = {type(v) for v in values}
    if len(kinds) != 1:
        found = ", ".join(sorted(k.__name__ for k in kinds))
        raise ValueError(f"metric {name!r} has values of several types ({found}); "
                         "calls cannot be aggregated")
    if isinstance(values[0], str) and name in _STRING_RULES:
        return _STRING_RULES[name](list(values))
    return kind_of(values[0], name).combine(list(values))


def aggregate(calls: Sequence[Mapping[str, MetricValue]]) -> list[Row]:
    """One row per group_key, groups in order of first appearance."""
    groups: dict[tuple[str, str, str], list[Mapping[str, MetricValue]]] = {}
    for call in calls:
        groups.setdefault(group_key(call), []).append(call)
    names = metric_names(calls)
    rows = []
    for members in groups.values():
        row: Row = {}
        for name in names:
            values = [m[name] for m in members if name in m]
            if values:
                row[name] = combine(values, name)
        rows.append(row)
    return rows


def sort_by_duration(rows: Sequence[Mapping[str, MetricValue]]) -> list[Row]:
    """Rows by descending Duration (stable); every row must have a Duration."""
    for i, row in enumerate(rows):
        if not isinstance(row.get(DURATION), Duration):
            raise ValueError(f"cannot sort by {DURATION!r}: row {i} ({row.get(NAME, '?')!r}) "
                             "has no Duration metric")
    return sorted((dict(r) for r in rows), key=lambda r: -r[DURATION].value)


def column_sums(rows: Sequence[Mapping[str, MetricValue]]) -> Row:
    """TVM's Sum row: every Count/Duration/Percent column summed by name, Name = "Sum"."""
    columns: dict[str, list[MetricValue]] = {}
    for row in rows:
        for name, value in row.items():
            if kind_of(value, name).summable:
                columns.setdefault(name, []).append(value)
    sums: Row = {name: combine(values, name) for name, values in columns.items()}
    sums[NAME] = "Sum"
    return sums


def without(row: Mapping[str, MetricValue], hidden: Iterable[str]) -> Row:
    hidden = set(hidden)
    return {k: v for k, v in row.items() if k not in hidden}

