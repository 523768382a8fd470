"""``ReportView``: a profiling Report in the notebook as a table and plotly charts.

Tabs: the call table (sort, aggregate toggle, name filter), time by operator (bar), share of
time (pie), a timeline of the calls per device, and, when a ``baseline`` Report is given, the
diff "baseline -> report" (speed-up per call, titled with both runs' names). A report of an
imported model (calls with ``Layer`` / ``Op Type`` metrics) also gets a "Group by" choice
(layer, op type or kernel name; layers down to a module depth) that the charts, a "Groups"
table and the diff follow. Every control change recomputes the current rows once and updates
each view in one message (``hold_sync`` / ``batch_update``), so it also works from code,
without a browser: set ``view.filter_text.value`` and read ``view.frame`` or the figures'
trace data.

Real models have hundreds of calls with long argument lists, so the tables are one line per
row (argument shapes condensed, long cells cut with the full text on hover, sideways scroll;
:mod:`.table_html`), a "Columns" chooser hides columns, and the call table is shown a page
at a time. The VM's own helper calls (``vm.builtin.*``: shape checks, tuple building) are
left out of the tables, charts and diff until "VM builtins" is ticked; the Report itself keeps
them (``Report.group_by(..., builtins=False)`` is the same choice in code).

Given the executable the report profiled (``exe=``, or a ready ``roofline=`` frame of
:func:`workbench.meta_schedule.roofline.roofline`), the kernels are also held against the
machine's measured limits: the call table gets ``GFLOPS``, ``GB/s``, ``% of bound`` and
``Headroom`` columns, and a "Roofline" tab shows the roofline plot and the ranked "where to
tune next" list (:mod:`.roofline_view`), which ``tune_relax(..., op_names=view.ranking.head(3))``
takes as it is.
"""
from __future__ import annotations

import html
from typing import Any

import ipywidgets as widgets
import pandas as pd
import plotly.graph_objects as go

from workbench.meta_schedule.roofline import roofline as kernel_roofline
from workbench.runtime.profiling import Report
from workbench.runtime.profiling.frames import FIXED_COLUMNS, is_vm_builtin
from workbench.runtime.profiling.metrics import DURATION, LAYER, MODULE, NAME, OP_TYPE, START
from workbench.runtime.profiling.timeline import call_spans, has_timestamps
from workbench.widgets.roofline_view import (
    ranking_frame, roofline_figure, update_roofline_figure, with_roofline_columns,
)
from workbench.widgets.table_html import frame_table_html

ORIGINAL_ORDER = "(original order)"
#: "Group by" choices: label -> Report.group_by's ``by``.
GROUPINGS = {"Layer": "layer", "Op Type": "op_type", "Name": "name"}
FULL_DEPTH = "full"
_CHART_TITLES = {"Layer": "Time by layer", "Op Type": "Time by op type",
                 "Name": "Time by operator"}
#: Columns the table starts without (the timeline shows start times, ``Layer`` the module).
HIDDEN_COLUMNS = (START, MODULE)
_PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2",
            "#ff9da6", "#9d755d", "#bab0ac")


def _frame_html(frame: pd.DataFrame) -> str:
    return frame_table_html(frame, classes="wb-report-view")


def _without_builtins(frame: pd.DataFrame, column: str | None = None) -> pd.DataFrame:
    """``frame`` without the rows whose ``column`` (default: ``Name``, else the first
    column) names a VM builtin."""
    column = column or (NAME if NAME in frame.columns else frame.columns[0])
    keep = ~frame[column].map(is_vm_builtin).astype(bool)
    return frame[keep].reset_index(drop=True)


def _name_mask(frame: pd.DataFrame, text: str) -> pd.Series:
    # A plain case-insensitive substring: users type part of a kernel name, or of a layer or
    # op type when the report has them.
    mask = pd.Series(False, index=frame.index)
    for column in (NAME, LAYER, OP_TYPE):
        if column in frame.columns:
            mask |= frame[column].astype(str).str.contains(text.strip(), case=False,
                                                           regex=False)
    return mask


class ReportView(widgets.VBox):
    """ReportView(report, *, baseline=None, name="new", baseline_name="baseline", top_k=20):
    interactive view of ``report``.

    ``baseline`` (the Report to compare against, e.g. the run before an optimization) adds a
    Diff tab: how ``report`` compares with it, call by call (``baseline.diff(report)``), titled
    with both names, e.g. "naive -> tiled: 5.50x faster"; bars > 1 mean ``report`` is faster.
    ``name`` / ``baseline_name`` label the two runs in titles and table headers. (The former
    ``other=`` argument read both ways and is refused with a message saying what to write.)
    ``top_k`` bounds the bar and share charts (the rest is summed as "other").
    ``page_size`` is how many rows the call table shows at a time (``prev_button`` /
    ``next_button`` page through them; ``page_frame`` holds the rows on the page).
    A report whose calls know their model layers (``Layer`` metrics, see
    ``Report.group_by``) gets ``group_dropdown`` ("Layer", "Op Type", "Name"; "Layer" first)
    and ``depth_dropdown`` ("full" or a module depth): the bar and share charts, the
    "Groups" tab (``groups_frame``, ``groups_html``) and the diff (matched by group) follow
    them; other reports chart kernel names, as before.
    ``builtins_check`` ("VM builtins", off) adds the VM's helper calls to every view;
    ``columns_select`` chooses the table's columns (all but ``Start (us)`` and ``Module`` at
    first).
    ``exe`` (the Executable ``report`` profiled; ``limits``: MachineLimits, default this
    machine's measured ones) or ``roofline`` (a frame of ``roofline(report, exe)``) adds the
    roofline columns and the "Roofline" tab: ``ranking`` (the whole ranking),
    ``ranking_shown`` (its rows after the filter), ``roofline_figure``, ``ranking_html``.
    State for code and tests: ``frame`` (rows after filter and sort, every page),
    ``page_frame``, ``diff_frame``, and the widgets ``aggregate_toggle``, ``sort_dropdown``,
    ``ascending_check``, ``filter_text``, ``builtins_check``, ``columns_select``,
    ``table_html``, ``page_label``, ``bar_figure``, ``share_figure``, ``timeline_figure``,
    ``diff_figure``, ``diff_summary_html``, ``diff_html``.
    """

    def __init__(self, report: Report, *, baseline: Report | None = None, name: str = "new",
                 baseline_name: str = "baseline", top_k: int = 20, page_size: int = 50,
                 exe: Any = None, limits: Any = None, roofline: pd.DataFrame | None = None,
                 **kwargs: Any) -> None:
        if "other" in kwargs:
            raise TypeError(
                "ReportView: 'other' is no longer accepted because it read both ways (it was "
                "the *new* run, compared against 'report'). Write ReportView(new_report, "
                "baseline=old_report, name='new', baseline_name='old'): the Diff tab then "
                "shows how new_report compares with old_report.")
        if not isinstance(report, Report):
            raise TypeError(f"ReportView: report must be a Report, got {type(report).__name__}")
        if baseline is not None and not isinstance(baseline, Report):
            raise TypeError(f"ReportView: baseline must be a Report or None, got "
                            f"{type(baseline).__name__}")
        for what, value in (("name", name), ("baseline_name", baseline_name)):
            if not isinstance(value, str) or not value.strip():
                raise TypeError(f"ReportView: {what} must be a non-empty str, got {value!r}")
        if baseline is not None and name.strip() == baseline_name.strip():
            raise ValueError(f"ReportView: name and baseline_name must differ, both are "
                             f"{name!r}")
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"ReportView: top_k must be an int >= 1, got {top_k!r}")
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"ReportView: page_size must be an int >= 1, got {page_size!r}")
        self.report, self.baseline, self.top_k = report, baseline, top_k
        self.page_size, self.page = page_size, 0
        self.name, self.baseline_name = name.strip(), baseline_name.strip()
        self.ranking = self._ranking(report, exe, limits, roofline)
        self.ranking_shown: pd.DataFrame | None = self.ranking
        self._frames = {flag: report.to_dataframe(aggregate=flag) for flag in (True, False)}
        if self.ranking is not None:
            self._frames = {flag: with_roofline_columns(frame, self.ranking)
                            for flag, frame in self._frames.items()}
        self.frame: pd.DataFrame = self._frames[True]
        self.page_frame: pd.DataFrame = self.frame
        self.diff_frame: pd.DataFrame | None = None
        self.has_layers = LAYER in self._frames[False].columns
        self.groups_frame: pd.DataFrame | None = None

        self.aggregate_toggle = widgets.ToggleButton(
            value=True, description="Aggregate", tooltip="one row per name, shapes and device")
        self.sort_dropdown = widgets.Dropdown(options=self._sort_options(), value=DURATION,
                                              description="Sort by")
        self.ascending_check = widgets.Checkbox(value=False, description="Ascending")
        self.filter_text = widgets.Text(value="", placeholder="part of a name",
                                        description="Filter")
        self.builtins_check = widgets.Checkbox(
            value=False, description="VM builtins", indent=False,
            tooltip="show the VM's helper calls (vm.builtin.match_shape, make_tuple, ...)")
        columns = self._sort_options()[1:]
        self.columns_select = widgets.SelectMultiple(
            options=columns, value=[c for c in columns if c not in HIDDEN_COLUMNS],
            rows=min(8, len(columns)), description="Columns")
        self.prev_button = widgets.Button(description="Previous", icon="chevron-left",
                                          layout=widgets.Layout(width="auto"))
        self.next_button = widgets.Button(description="Next", icon="chevron-right",
                                          layout=widgets.Layout(width="auto"))
        self.page_label = widgets.HTML()
        self.prev_button.on_click(lambda _b: self.show_page(self.page - 1))
        self.next_button.on_click(lambda _b: self.show_page(self.page + 1))
        self.group_dropdown = widgets.Dropdown(
            options=list(GROUPINGS), value="Layer" if self.has_layers else "Name",
            description="Group by")
        self.depth_dropdown = widgets.Dropdown(
            options=[FULL_DEPTH, 1, 2, 3, 4], value=FULL_DEPTH, description="Depth",
            tooltip="layers grouped by module path cut to this many parts")
        self.groups_html = widgets.HTML()
        self.table_html = widgets.HTML()
        self.summary_html = widgets.HTML()
        self.bar_figure = go.FigureWidget(
            data=[go.Bar(x=[], y=[], orientation="h", name=DURATION)],
            layout=dict(title=dict(text=_CHART_TITLES[self.group_dropdown.value]),
                        xaxis_title=DURATION,
                        yaxis=dict(autorange="reversed"), height=360, margin=dict(l=160)))
        self.share_figure = go.FigureWidget(
            data=[go.Pie(labels=[], values=[], hole=0.4, sort=False)],
            layout=dict(title=dict(text="Share of time"), height=360))
        self.timeline_figure = go.FigureWidget(
            data=[go.Bar(x=[], y=[], base=[], orientation="h", name="calls")],
            layout=dict(title=dict(text=self._timeline_title()), barmode="overlay",
                        xaxis_title="time since start (us)", height=300))
        self.diff_summary_html = widgets.HTML()
        self.diff_html = widgets.HTML()
        b, n = self.baseline_name, self.name
        self.diff_figure = go.FigureWidget(
            data=[go.Bar(x=[], y=[], orientation="h", name=f"{b} -> {n}")],
            layout=dict(title=dict(text=f"Speedup per call, {b} -> {n}"),
                        xaxis_title=f"{b} time / {n} time (> 1: {n} is faster)",
                        # the line at 1 ("same speed") that bars are read against
                        shapes=[dict(type="line", x0=1, x1=1, xref="x", y0=0, y1=1,
                                     yref="paper", line=dict(color="#555", dash="dot"))],
                        yaxis=dict(autorange="reversed"), height=360, margin=dict(l=160)))

        pager = widgets.HBox([self.prev_button, self.page_label, self.next_button],
                             layout=widgets.Layout(align_items="center"))
        columns_box = widgets.Accordion(children=[self.columns_select], titles=("Columns",),
                                        selected_index=None)
        pages = {"Table": widgets.VBox([self.summary_html, columns_box, self.table_html,
                                        pager]),
                 "Time by operator": self.bar_figure, "Share": self.share_figure,
                 "Timeline": self.timeline_figure}
        if self.has_layers:
            pages["Groups"] = self.groups_html
        if self.ranking is not None:
            self.roofline_figure = roofline_figure(self.ranking)
            self.ranking_html = widgets.HTML()
            pages["Roofline"] = widgets.VBox([self.roofline_figure, self.ranking_html])
        if baseline is not None:
            pages[f"Diff: {b} -> {n}"] = widgets.VBox(
                [self.diff_summary_html, self.diff_figure, self.diff_html])
        self.tabs = widgets.Tab(children=list(pages.values()), titles=list(pages))
        # Rows of controls wrap in a narrow notebook instead of running off its edge.
        wrap = widgets.Layout(flex_flow="row wrap", align_items="center")
        controls = [widgets.HBox([self.aggregate_toggle, self.sort_dropdown,
                                  self.ascending_check, self.filter_text,
                                  self.builtins_check], layout=wrap)]
        if self.has_layers:
            controls.append(widgets.HBox([self.group_dropdown, self.depth_dropdown],
                                         layout=wrap))
        super().__init__([*controls, self.tabs], **kwargs)
        for control in (self.aggregate_toggle, self.sort_dropdown, self.ascending_check,
                        self.filter_text, self.group_dropdown, self.depth_dropdown,
                        self.builtins_check):
            control.observe(self._on_change, names="value")
        self.columns_select.observe(lambda _change: self.show_page(self.page), names="value")
        self.refresh()

    # ---- state ----------------------------------------------------------------------------------

    @staticmethod
    def _ranking(report: Report, exe: Any, limits: Any,
                 ranking: pd.DataFrame | None) -> pd.DataFrame | None:
        if ranking is not None:
            if exe is not None:
                raise TypeError("ReportView: give exe= (to compute the roofline) or "
                                "roofline= (a computed one), not both")
            if not isinstance(ranking, pd.DataFrame) or "limits" not in ranking.attrs:
                raise TypeError(f"ReportView: roofline must be the DataFrame of "
                                f"roofline(report, exe), got {type(ranking).__name__}")
            return ranking
        if exe is None:
            if limits is not None:
                raise TypeError("ReportView: limits= needs exe= (the executable the report "
                                "profiled)")
            return None
        return kernel_roofline(report, exe, limits)

    def _sort_options(self) -> list[str]:
        columns = dict.fromkeys([*FIXED_COLUMNS, *self._frames[False].columns,
                                 *self._frames[True].columns])
        return [ORIGINAL_ORDER, *columns]

    def _timeline_title(self) -> str:
        if has_timestamps(self.report):
            return "Timeline"
        return "Timeline (no recorded start times: calls laid end to end)"

    def _current_frame(self) -> pd.DataFrame:
        frame = self._frames[self.aggregate_toggle.value]
        if not self.builtins_check.value:
            frame = _without_builtins(frame)
        if self.filter_text.value.strip():
            frame = frame[_name_mask(frame, self.filter_text.value)]
        column = self.sort_dropdown.value
        if column != ORIGINAL_ORDER and column in frame.columns:
            frame = frame.sort_values(column, ascending=self.ascending_check.value,
                                      kind="stable", na_position="last")
        return frame.reset_index(drop=True)

    def _on_change(self, change: dict) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Recompute the rows from the controls and update every view (the table back on
        its first page)."""
        self.frame = self._current_frame()
        self.summary_html.value = self._summary()
        self.show_page(0)
        self._update_bar_and_share()
        self._update_timeline()
        if self.baseline is not None:
            self._update_diff()
        if self.ranking is not None:
            self._update_roofline()

    @property
    def pages(self) -> int:
        """How many pages the call table has (at least 1)."""
        return max(1, -(-len(self.frame) // self.page_size))

    def show_page(self, page: int) -> None:
        """Show page ``page`` (0-based, clamped to the pages there are) of the call table,
        with the chosen columns."""
        self.page = min(max(0, page), self.pages - 1)
        start = self.page * self.page_size
        rows = self.frame.iloc[start:start + self.page_size]
        chosen = set(self.columns_select.value)
        self.page_frame = rows[[c for c in rows.columns if c in chosen]]
        with self.table_html.hold_sync(), self.page_label.hold_sync(), \
                self.prev_button.hold_sync(), self.next_button.hold_sync():
            self.table_html.value = _frame_html(self.page_frame)
            shown = f"{start + 1}-{start + len(rows)}" if len(rows) else "0"
            self.page_label.value = (f"rows {shown} of {len(self.frame)} "
                                     f"(page {self.page + 1}/{self.pages})")
            self.prev_button.disabled = self.page == 0
            self.next_button.disabled = self.page >= self.pages - 1

    def _summary(self) -> str:
        total = self.frame[DURATION].sum(skipna=True)
        devices = ", ".join(
            f"{html.escape(dev)} total {m[DURATION].value:.2f} us"
            for dev, m in self.report.device_metrics.items() if DURATION in m)
        run = f"{html.escape(self.name)}: " if self.baseline is not None else ""
        hidden = ""
        if not self.builtins_check.value:
            calls = self._frames[False]
            builtin = calls[calls[NAME].map(is_vm_builtin).astype(bool)]
            if len(builtin):
                hidden = (f"; {len(builtin)} VM builtin calls hidden "
                          f"({builtin[DURATION].sum(skipna=True):.2f} us)")
        return (f"{run}<b>{len(self.frame)}</b> rows, {total:.2f} us in calls"
                + (f"; {devices}" if devices else "") + hidden)

    # ---- charts ---------------------------------------------------------------------------------

    def _grouping(self) -> tuple[str, int | None]:
        """Report.group_by's (by, depth) for the current controls."""
        by = GROUPINGS[self.group_dropdown.value]
        depth = self.depth_dropdown.value
        return by, (None if by != "layer" or depth == FULL_DEPTH else int(depth))

    def _current_groups(self) -> pd.DataFrame:
        by, depth = self._grouping()
        groups = self.report.group_by(by, depth=depth, builtins=self.builtins_check.value)
        text = self.filter_text.value.strip()
        if text:
            # A group is shown when its own label or one of its kernels matches.
            mask = (groups.iloc[:, 0].astype(str).str.contains(text, case=False, regex=False)
                    | groups["Kernels"].str.contains(text, case=False, regex=False))
            groups = groups[mask].reset_index(drop=True)
        return groups

    def _time_by_name(self) -> pd.Series:
        if self.has_layers:
            groups = self.groups_frame
            by_name = pd.Series(groups[DURATION].to_numpy(),
                                index=groups.iloc[:, 0].astype(str).to_numpy())
        else:
            by_name = (self.frame.groupby(NAME, sort=False)[DURATION].sum()
                       .sort_values(ascending=False, kind="stable"))
        if len(by_name) > self.top_k:
            head = by_name.iloc[:self.top_k]
            by_name = pd.concat([head, pd.Series({"other": by_name.iloc[self.top_k:].sum()})])
        return by_name

    def _update_bar_and_share(self) -> None:
        if self.has_layers:
            self.groups_frame = self._current_groups()
            self.groups_html.value = _frame_html(self.groups_frame)
        by_name = self._time_by_name()
        names, values = [str(n) for n in by_name.index], [float(v) for v in by_name.values]
        with self.bar_figure.batch_update():
            self.bar_figure.layout.title.text = _CHART_TITLES[self.group_dropdown.value]
            self.bar_figure.data[0].x = values
            self.bar_figure.data[0].y = names
        with self.share_figure.batch_update():
            self.share_figure.data[0].labels = names
            self.share_figure.data[0].values = values

    def _update_timeline(self) -> None:
        text = self.filter_text.value.strip().lower()
        builtins = self.builtins_check.value
        spans = [s for s in call_spans(self.report)
                 if (builtins or not is_vm_builtin(s.name))
                 and (text in s.name.lower() or text in str(s.metrics.get(LAYER, "")).lower())]
        colours = {}
        for s in spans:
            colours.setdefault(s.name, _PALETTE[len(colours) % len(_PALETTE)])

        def hover(s: Any) -> str:
            layer = s.metrics.get(LAYER)
            where = f" ({layer})" if layer else ""
            return f"{s.name}{where}: {s.duration:.2f} us at {s.start:.2f} us"

        with self.timeline_figure.batch_update():
            bar = self.timeline_figure.data[0]
            bar.x = [s.duration for s in spans]
            bar.base = [s.start for s in spans]
            bar.y = [s.device for s in spans]
            bar.hovertext = [hover(s) for s in spans]
            bar.marker.color = [colours[s.name] for s in spans]

    def _update_roofline(self) -> None:
        ranking = self.ranking
        text = self.filter_text.value.strip()
        if text:
            ranking = ranking[ranking.index.str.contains(text, case=False, regex=False)]
        self.ranking_shown = ranking
        update_roofline_figure(self.roofline_figure, ranking)
        saved = ranking["Score"].sum(skipna=True)
        self.ranking_html.value = (
            f"<b>Where to tune next</b>: kernels by time x (1 - achieved / roofline bound), "
            f"the time tuning could save ({saved:.1f} us in all); bytes count each argument "
            f"once (a lower bound of the traffic)" + _frame_html(ranking_frame(ranking)))

    def _update_diff(self) -> None:
        b, n = self.baseline_name, self.name
        by, depth = self._grouping()
        if self.has_layers and by != "name":
            # Matched by layer / op type: a tuned build may rename kernels or re-lay out
            # weights, the layers stay.
            diff = self.baseline.diff(self.report, baseline_name=b, name=n, by=by, depth=depth)
        else:
            diff = self.baseline.diff(self.report, aggregate=self.aggregate_toggle.value,
                                      baseline_name=b, name=n)
        headline = diff.attrs["title"]
        if not self.builtins_check.value:
            diff = _without_builtins(diff)
        if self.filter_text.value.strip():
            diff = diff[_name_mask(diff, self.filter_text.value)].reset_index(drop=True)
        self.diff_frame = diff
        if "Occurrence" not in diff.columns:
            labels = [str(c) for c in diff.iloc[:, 0]]
        elif self.aggregate_toggle.value:
            labels = [str(c) for c in diff[NAME]]
        else:
            names = diff[LAYER] if LAYER in diff.columns else diff[NAME]
            labels = [f"{c} #{o}" for c, o in zip(names, diff["Occurrence"])]
        known = diff["Speedup"].notna()
        colours = ["#54a24b" if c == "faster" else "#e45756" if c == "slower" else "#bab0ac"
                   for c in diff["Change"][known]]
        self.diff_summary_html.value = (
            f"<b class='wb-diff-headline'>{html.escape(headline)}</b> (total time of the calls "
            f"in both runs; each bar is {html.escape(b)} time / {html.escape(n)} time, green "
            f"where {html.escape(n)} is faster)")
        shown = diff.rename(columns={"Speedup": f"Speedup ({b} / {n})",
                                     "Change": f"{n} vs {b}",
                                     "Delta (us)": f"Delta (us, {n} - {b})"})
        self.diff_html.value = _frame_html(shown)
        with self.diff_figure.batch_update():
            self.diff_figure.data[0].x = [float(v) for v in diff["Speedup"][known]]
            self.diff_figure.data[0].y = [lab for lab, k in zip(labels, known) if k]
            self.diff_figure.data[0].marker.color = colours

    # ---- static fallback ------------------------------------------------------------------------

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        # Where widgets cannot render (nbconvert, GitHub), the report's own table still shows.
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/html"] = self.report._repr_html_()
        bundle["text/plain"] = str(self.report)
        return bundle
