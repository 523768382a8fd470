"""Reports as pandas DataFrames: the call table with numeric columns, and run-to-run diffs.

Imported lazily by ``Report`` so that ``import workbench.runtime.profiling`` does not load
pandas.
"""
from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from .metrics import (ARGUMENT_SHAPES, COUNT, DEVICE, DURATION, LAYER, MODULE, NAME, OP_TYPE,
                      PERCENT, START, Count, Duration, MetricValue, Percent, Ratio, plain)
from .rows import aggregate as aggregate_rows
from .rows import group_key, metric_names, sort_by_duration, without

if TYPE_CHECKING:
    import pandas as pd

    from .report import Report

FIXED_COLUMNS = (NAME, DURATION, PERCENT, DEVICE, COUNT, ARGUMENT_SHAPES)
# pandas dtype per metric type: counts stay integers (nullable, so a missing cell is <NA>).
_DTYPES: dict[type, str] = {Count: "Int64", Duration: "float64", Percent: "float64",
                            Ratio: "float64", str: "object"}
_FIXED_TYPES: dict[str, type] = {NAME: str, DURATION: Duration, PERCENT: Percent, DEVICE: str,
                                 COUNT: Count, ARGUMENT_SHAPES: str}


def report_rows(report: "Report", aggregate: bool) -> list[dict[str, MetricValue]]:
    """Calls as-is, or aggregated groups by descending duration (without start timestamps)."""
    if not aggregate:
        return [dict(c) for c in report.calls]
    rows = [without(r, (START,)) for r in aggregate_rows(report.calls)]
    if all(isinstance(r.get(DURATION), Duration) for r in rows):
        rows = sort_by_duration(rows)
    return rows


def _column_type(rows: Sequence[Mapping[str, MetricValue]], name: str) -> type:
    for row in rows:
        if name in row:
            return type(row[name])
    return _FIXED_TYPES.get(name, str)


def rows_to_dataframe(rows: Sequence[Mapping[str, MetricValue]]) -> "pd.DataFrame":
    """A DataFrame with the six fixed columns first, then the others in byte order."""
    import pandas as pd

    names = metric_names(rows)
    columns = [*FIXED_COLUMNS, *sorted(n for n in names if n not in FIXED_COLUMNS)]
    data: dict[str, Any] = {}
    for name in columns:
        cls = _column_type(rows, name)
        missing = "" if cls is str else None
        values = [plain(r[name]) if name in r else missing for r in rows]
        data[name] = pd.Series(values, dtype=_DTYPES[cls])
    return pd.DataFrame(data, columns=columns)


def to_dataframe(report: "Report", aggregate: bool = False) -> "pd.DataFrame":
    if not isinstance(aggregate, bool):
        raise TypeError(f"Report.to_dataframe: aggregate must be a bool, got {aggregate!r}")
    return rows_to_dataframe(report_rows(report, aggregate))


# ---- grouping by source --------------------------------------------------------------------------

GROUPINGS = {"name": NAME, "layer": LAYER, "op_type": OP_TYPE}
GROUP_COLUMNS = (DURATION, PERCENT, COUNT, "Kernels")
# A kernel's uniquifying counter ("conv2d3", "relu1"): digits after a letter, before "_" or
# the end ("max_pool2d" keeps its "2d").
_COUNTER = re.compile(r"(?<=[a-z])\d+(?=_|$)")


#: Names of the VM's own helper calls (shape checks, tuple building, allocation): runtime
#: bookkeeping, not layers of the model.
VM_BUILTIN_PREFIX = "vm.builtin."


def is_vm_builtin(name: object) -> bool:
    """Is ``name`` a VM builtin (``vm.builtin.match_shape``, ``vm.builtin.make_tuple``, ...)?"""
    return str(name).startswith(VM_BUILTIN_PREFIX)


def kernel_op_type(name: str) -> str:
    """What a kernel without a recorded source computes, from its name:
    ``fused_conv2d3_add1_relu2`` -> ``conv2d_add_relu``; runtime builtins stay as they are."""
    if name.startswith("vm."):
        return name
    return _COUNTER.sub("", name[len("fused_"):] if name.startswith("fused_") else name)


def _group_key(call: Mapping[str, MetricValue], by: str, depth: int | None) -> str:
    name = str(call.get(NAME, ""))
    if by == "name":
        return name
    if by == "op_type":
        return str(call.get(OP_TYPE) or kernel_op_type(name))
    layer = str(call.get(LAYER) or name)
    if depth is None:
        return layer
    module = str(call.get(MODULE, ""))
    parts = module.split(".") if module else []
    # A call inside one module at that depth is counted there; one spanning several
    # (a top-level conv + bn + relu) keeps its own layer label.
    return ".".join(parts[:depth]) if len(parts) >= depth else layer


def group_by(report: "Report", by: str = "layer", depth: int | None = None,
             builtins: bool = True) -> "pd.DataFrame":
    import pandas as pd

    if by not in GROUPINGS:
        raise ValueError(f"Report.group_by: by must be one of {sorted(GROUPINGS)}, got {by!r}")
    if depth is not None:
        if by != "layer":
            raise ValueError(f"Report.group_by: depth applies to by='layer' only, got by={by!r}")
        if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
            raise ValueError(f"Report.group_by: depth must be an int >= 1 or None, "
                             f"got {depth!r}")
    if not isinstance(builtins, bool):
        raise TypeError(f"Report.group_by: builtins must be a bool, got {builtins!r}")
    groups: dict[str, dict[str, Any]] = {}
    for call in report.calls:
        duration = call.get(DURATION)
        if not isinstance(duration, Duration):
            continue
        if not builtins and is_vm_builtin(call.get(NAME, "")):
            continue
        g = groups.setdefault(_group_key(call, by, depth),
                              {"us": 0.0, "pct": 0.0, "count": 0, "kernels": {}})
        g["us"] += duration.value
        percent = call.get(PERCENT)
        g["pct"] += percent.value if isinstance(percent, Percent) else 0.0
        count = call.get(COUNT)
        g["count"] += count.value if isinstance(count, Count) else 1
        g["kernels"][str(call.get(NAME, ""))] = None
    column = GROUPINGS[by]
    frame = pd.DataFrame({
        column: pd.Series(list(groups), dtype="object"),
        DURATION: pd.Series([g["us"] for g in groups.values()], dtype="float64"),
        PERCENT: pd.Series([g["pct"] for g in groups.values()], dtype="float64"),
        COUNT: pd.Series([g["count"] for g in groups.values()], dtype="Int64"),
        "Kernels": pd.Series([", ".join(g["kernels"]) for g in groups.values()],
                             dtype="object"),
    })
    frame = frame.sort_values(DURATION, ascending=False, kind="stable").reset_index(drop=True)
    frame.attrs["by"], frame.attrs["depth"] = by, depth
    return frame


# ---- diff -------------------------------------------------------------------------------------

#: The diff's columns with the default run names; with other names the two duration columns
#: are ``"<baseline_name> (us)"`` and ``"<name> (us)"`` (see :func:`diff_columns`).
DIFF_COLUMNS = (NAME, ARGUMENT_SHAPES, DEVICE, "Occurrence", "Baseline (us)", "New (us)",
                "Delta (us)", "Speedup", "Change")


def diff_columns(baseline_name: str = "Baseline", name: str = "New") -> tuple[str, ...]:
    """The diff's column names for runs called ``baseline_name`` (the reference) and
    ``name`` (the run compared with it)."""
    return (NAME, ARGUMENT_SHAPES, DEVICE, "Occurrence", f"{baseline_name} (us)",
            f"{name} (us)", "Delta (us)", "Speedup", "Change")


def _keyed(rows: Sequence[Mapping[str, MetricValue]]) -> dict[tuple, Mapping[str, MetricValue]]:
    # The k-th call of a (name, shapes, device) matches the k-th such call of the other run.
    seen: dict[tuple, int] = {}
    keyed = {}
    for row in rows:
        key = group_key(row)
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        keyed[(*key, occurrence)] = row
    return keyed


def _duration(row: Mapping[str, MetricValue] | None) -> float:
    value = None if row is None else row.get(DURATION)
    return value.value if isinstance(value, Duration) else math.nan


def _change(base: float, new: float, threshold: float) -> tuple[float, str]:
    if math.isnan(base):
        return math.nan, "added"
    if math.isnan(new):
        return math.nan, "removed"
    speedup = base / new if new > 0 else (math.inf if base > 0 else 1.0)
    if speedup > 1 + threshold:
        return speedup, "faster"
    if speedup < 1 / (1 + threshold):
        return speedup, "slower"
    return speedup, "same"


def _check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"Report.diff: {what} must be a non-empty str, got {value!r}")
    return value.strip()


def speedup_phrase(speedup: float) -> str:
    """"5.50x faster", "2.00x slower" or "the same": a ratio a reader cannot misread."""
    if math.isnan(speedup):
        return "not comparable"
    if speedup >= 1.005:
        return f"{speedup:.2f}x faster"
    if speedup <= 1 / 1.005:
        return "inf x slower" if speedup == 0 else f"{1 / speedup:.2f}x slower"
    return "the same speed"


def _grouped_diff(base: "Report", new: "Report", by: str, depth: int | None, threshold: float,
                  baseline_name: str, name: str) -> "pd.DataFrame":
    # Groups match by their key alone: a tuned build may rename a kernel or re-lay out its
    # weights (other argument shapes), but the layer it implements stays the same.
    import pandas as pd

    column = GROUPINGS[by]
    before = group_by(base, by, depth).set_index(column)[DURATION]
    after = group_by(new, by, depth).set_index(column)[DURATION]
    records = []
    for key in [*before.index, *(k for k in after.index if k not in before.index)]:
        b = float(before.get(key, math.nan))
        n = float(after.get(key, math.nan))
        speedup, change = _change(b, n, threshold)
        records.append((key, b, n, n - b, speedup, change))
    columns = [column, f"{baseline_name} (us)", f"{name} (us)", "Delta (us)", "Speedup",
               "Change"]
    frame = pd.DataFrame.from_records(records, columns=columns)
    return frame.astype({columns[1]: "float64", columns[2]: "float64",
                         "Delta (us)": "float64", "Speedup": "float64"})


def diff(base: "Report", new: "Report", aggregate: bool = False, threshold: float = 0.05,
         baseline_name: str = "Baseline", name: str = "New", by: str | None = None,
         depth: int | None = None) -> "pd.DataFrame":
    from .report import Report

    if not isinstance(new, Report):
        raise TypeError(f"Report.diff: other must be a Report, got {type(new).__name__}")
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or threshold < 0:
        raise ValueError(f"Report.diff: threshold must be a number >= 0, got {threshold!r}")
    baseline_name = _check_name("baseline_name", baseline_name)
    name = _check_name("name", name)
    if baseline_name == name:
        raise ValueError(f"Report.diff: the two runs need different names, both are {name!r}")
    if by is not None:
        frame = _grouped_diff(base, new, by, depth, threshold, baseline_name, name)
        columns = tuple(frame.columns)
        base_col, new_col = columns[1], columns[2]
    else:
        if depth is not None:
            raise ValueError("Report.diff: depth needs by='layer'")
        frame = _call_diff(base, new, aggregate, threshold, baseline_name, name)
        columns = diff_columns(baseline_name, name)
        base_col, new_col = columns[4], columns[5]
    both = frame[base_col].notna() & frame[new_col].notna()
    total_base = float(frame[base_col][both].sum())
    total_new = float(frame[new_col][both].sum())
    total = total_base / total_new if total_new > 0 else math.nan
    # Who is compared with whom travels with the frame (pandas keeps attrs on copies).
    frame.attrs.update({"baseline_name": baseline_name, "name": name, "speedup": total,
                        "title": f"{baseline_name} -> {name}: {speedup_phrase(total)}"})
    return frame


def _call_diff(base: "Report", new: "Report", aggregate: bool, threshold: float,
               baseline_name: str, name: str) -> "pd.DataFrame":
    import pandas as pd

    base_rows = _keyed(report_rows(base, aggregate))
    new_rows = _keyed(report_rows(new, aggregate))
    records = []
    layers = []
    for key in [*base_rows, *(k for k in new_rows if k not in base_rows)]:
        b, n = _duration(base_rows.get(key)), _duration(new_rows.get(key))
        speedup, change = _change(b, n, threshold)
        call_name = key[0]
        row = base_rows.get(key) or new_rows[key]
        if isinstance(row.get(NAME), str):
            call_name = row[NAME]  # the group key may be a Hash; show the name
        records.append((call_name, key[1], key[2], key[3], b, n, n - b, speedup, change))
        layers.append(str(row.get(LAYER, "")))
    columns = diff_columns(baseline_name, name)
    frame = pd.DataFrame.from_records(records, columns=list(columns))
    if any(layers):  # calls of an imported model: say which layer each row is
        frame[LAYER] = pd.Series(layers, dtype="object")
    return frame.astype({"Occurrence": "int64", columns[4]: "float64", columns[5]: "float64",
                         "Delta (us)": "float64", "Speedup": "float64"})
