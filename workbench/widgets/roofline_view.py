"""The roofline face of a profiling report: the plot, the call-table columns, the ranking.

Fed by :func:`workbench.meta_schedule.roofline.roofline` (one row per kernel, sorted by the
time tuning could save). :class:`~.report_view.ReportView` shows:

- :func:`roofline_figure`: arithmetic intensity (FLOP/byte) against achieved GFLOPS, both
  logarithmic, under the roofs (memory: intensity x bandwidth; compute: the FMA peak; dashed,
  the last-level cache's bandwidth, for kernels whose data fits there),
  one marker per kernel sized by its time, hover text with its numbers. Kernels without
  FLOPs (copies, reshapes) have no place on a log axis and are left out of the plot (the
  ranking keeps them);
- :func:`with_roofline_columns`: ``GFLOPS``, ``GB/s``, ``% of bound`` and ``Headroom`` for
  the kernel rows of a report DataFrame (calls or aggregated rows), from each row's own time;
- :func:`ranking_frame`: the "where to tune next" table.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from workbench.meta_schedule.roofline import argument_bytes
from workbench.runtime.machine_limits import MachineLimits
from workbench.runtime.profiling.metrics import ARGUMENT_SHAPES, COUNT, DURATION, NAME

__all__ = ["ROW_COLUMNS", "RANKING_COLUMNS", "roofline_figure", "update_roofline_figure",
           "with_roofline_columns", "ranking_frame"]

#: Columns added to the report's call table.
ROW_COLUMNS = ("GFLOPS", "GB/s", "% of bound", "Headroom")
#: Columns of the "where to tune next" table (the ranking's, in reading order).
RANKING_COLUMNS = ("Score", "Time (us)", "Percent", "GFLOPS", "Bound (GFLOPS)", "% of bound",
                   "Headroom", "Limit", "Intensity", "GB/s", "Calls")

_MEMORY_COLOUR, _COMPUTE_COLOUR, _KERNEL_COLOUR = "#4c78a8", "#e45756", "#f58518"


def _roofs(limits: Mapping[str, Any], lo: float,
           hi: float) -> tuple[list, list, list, list, list, list]:
    """(x, y) of the memory roof from ``lo`` to the ridge, the compute roof on to ``hi`` and
    the last-level cache's bandwidth roof up to its own ridge (empty when unknown)."""
    peak, bw = float(limits["peak_gflops"]), float(limits["bandwidth_gbs"])
    cache_bw = float(limits.get("cache_bandwidth_gbs", 0.0) or 0.0)
    ridge = peak / bw
    lo, hi = min(lo, ridge / 10), max(hi, ridge * 10)
    cx, cy = ([lo, peak / cache_bw], [lo * cache_bw, peak]) if cache_bw > bw else ([], [])
    return [lo, ridge], [lo * bw, peak], [ridge, hi], [peak, peak], cx, cy


def _plotted(ranking: pd.DataFrame) -> pd.DataFrame:
    ok = (ranking["FLOP"] > 0) & (ranking["GFLOPS"] > 0) & np.isfinite(ranking["Intensity"])
    return ranking[ok]


def _hover(name: str, row: pd.Series) -> str:
    return (f"{name}<br>{row['Time (us)']:.1f} us in {int(row['Calls'])} call(s)<br>"
            f"{row['GFLOPS']:.2f} GFLOPS, {row['GB/s']:.2f} GB/s<br>"
            f"intensity {row['Intensity']:.2f} FLOP/byte ({row['Limit']} bound)<br>"
            f"{row['% of bound']:.1f}% of the roof; {row['Headroom']:.1f}x headroom")


def roofline_figure(ranking: pd.DataFrame) -> go.FigureWidget:
    """The roofline plot of ``ranking`` (``roofline(...)``'s frame, whose ``attrs`` carry the
    limits): traces 0 and 1 are the memory and compute roofs, trace 2 the kernels, trace 3 the
    last-level cache's bandwidth roof (the one a kernel whose call moves no more than the cache
    holds is held against)."""
    fig = go.FigureWidget(
        data=[go.Scatter(x=[], y=[], mode="lines", name="memory roof",
                         line=dict(color=_MEMORY_COLOUR)),
              go.Scatter(x=[], y=[], mode="lines", name="compute roof",
                         line=dict(color=_COMPUTE_COLOUR)),
              go.Scatter(x=[], y=[], mode="markers", name="kernels", hovertext=[],
                         hoverinfo="text", marker=dict(color=_KERNEL_COLOUR, opacity=0.75,
                                                       line=dict(width=1, color="#333"))),
              go.Scatter(x=[], y=[], mode="lines", name="cache roof (data in the LLC)",
                         line=dict(color=_MEMORY_COLOUR, dash="dash"))],
        layout=dict(xaxis=dict(type="log", title="arithmetic intensity (FLOP/byte)"),
                    yaxis=dict(type="log", title="GFLOPS"), height=420,
                    legend=dict(x=1.02, xanchor="left", y=1, yanchor="top")))
    update_roofline_figure(fig, ranking)
    return fig


def update_roofline_figure(fig: go.FigureWidget, ranking: pd.DataFrame) -> None:
    """Redraw ``fig`` (from :func:`roofline_figure`) for the rows of ``ranking``."""
    limits = ranking.attrs["limits"]
    points = _plotted(ranking)
    xs = points["Intensity"].to_numpy(float)
    lo = float(xs.min()) / 2 if len(xs) else 0.1
    hi = float(xs.max()) * 2 if len(xs) else 100.0
    mx, my, cx, cy, lx, ly = _roofs(limits, lo, hi)
    cache_bw = float(limits.get("cache_bandwidth_gbs", 0.0) or 0.0)
    cache = f", {cache_bw:.1f} GB/s in cache" if lx else ""
    times = points["Time (us)"].to_numpy(float)
    # Marker area follows time: the kernels that matter are the big ones.
    sizes = 8 + 40 * np.sqrt(times / times.max()) if len(times) and times.max() > 0 else []
    with fig.batch_update():
        fig.layout.title.text = (
            f"Roofline: {limits['peak_gflops']:.0f} GFLOPS peak, {limits['bandwidth_gbs']:.1f}"
            f" GB/s{cache} ({limits['cores']} cores, {limits['cpu']})")
        fig.data[0].x, fig.data[0].y = mx, my
        fig.data[1].x, fig.data[1].y = cx, cy
        fig.data[3].x, fig.data[3].y = lx, ly
        kernels = fig.data[2]
        kernels.x, kernels.y = list(xs), list(points["GFLOPS"].to_numpy(float))
        kernels.text = [str(n) for n in points.index]
        kernels.hovertext = [_hover(str(n), row) for n, row in points.iterrows()]
        kernels.marker.size = list(sizes)


def with_roofline_columns(frame: pd.DataFrame, ranking: pd.DataFrame) -> pd.DataFrame:
    """``frame`` (``Report.to_dataframe``, calls or aggregated) with :data:`ROW_COLUMNS` for
    the rows of the ranking's kernels (NaN for other rows): FLOPs per call from the ranking,
    bytes from the row's argument shapes, time from the row."""
    limits = ranking.attrs["limits"]
    machine = MachineLimits.from_dict(limits)
    per_call = (ranking["FLOP"] / ranking["Calls"]).to_dict()
    values: dict[str, list[float]] = {c: [] for c in ROW_COLUMNS}
    for _, row in frame.iterrows():
        name = str(row.get(NAME, ""))
        secs = float(row.get(DURATION, math.nan)) * 1e-6
        if name not in per_call or not secs > 0:
            for c in ROW_COLUMNS:
                values[c].append(math.nan)
            continue
        count = float(row[COUNT]) if COUNT in row and pd.notna(row[COUNT]) else 1.0
        flop = per_call[name] * count
        nbytes = argument_bytes(str(row.get(ARGUMENT_SHAPES, ""))) * count
        bound_s = machine.bound_seconds(flop, nbytes, count)
        values["GFLOPS"].append(flop / secs / 1e9)
        values["GB/s"].append(nbytes / secs / 1e9)
        values["% of bound"].append(bound_s / secs * 100)
        values["Headroom"].append(secs / bound_s if bound_s > 0 else math.nan)
    out = frame.copy()
    for c in ROW_COLUMNS:
        out[c] = values[c]
    return out


def ranking_frame(ranking: pd.DataFrame) -> pd.DataFrame:
    """The "where to tune next" table: rank, kernel and :data:`RANKING_COLUMNS`, rounded for
    reading."""
    shown = ranking[list(RANKING_COLUMNS)].round(
        {"Score": 1, "Time (us)": 1, "Percent": 1, "GFLOPS": 2, "Bound (GFLOPS)": 1,
         "% of bound": 1, "Headroom": 1, "Intensity": 2, "GB/s": 2})
    shown = shown.reset_index()
    shown.insert(0, "Rank", range(1, len(shown) + 1))
    return shown
