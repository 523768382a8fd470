"""``DatabaseBrowser``: a tuning database as a DataFrame, filtered, sorted, and drilled into.

One row per tuning record (:func:`records_frame`): its trial index (commit order, 1-based,
so it matches the dashboard's trial index for a database filled by one run), the workload's
name, buffer arguments and hash, the mean run time in us, GFLOPS (from the tuner's FLOP
estimate of the workload, NaN if none), whether it failed, the number of run times and of
trace instructions.
A failed build or run is stored by TVM as ``run_secs=[1e10]``: its run time and GFLOPS are
NaN and ``Error`` is True (the database keeps no error message).

The widget adds a text filter on the workload (name, arguments or hash), a sort column and direction,
a best-only toggle (the fastest valid record of each workload), and a record selector that
shows the selected record's trace as Python and the scheduled IR (the trace replayed on a
fresh ``tir.Schedule`` of the workload, postprocessing included, as ``query_schedule``
does). Every control recomputes ``frame`` once, so it is usable from code and tests.
"""
from __future__ import annotations

import html
import math
from typing import Any

import ipywidgets as widgets
import pandas as pd

from workbench.meta_schedule.database.database import (
    FAILED_RUN_SECS, Database, TuningRecord, Workload, workload_key,
)
from workbench.tir.schedule import Schedule
from workbench.widgets.table_html import frame_table_html

__all__ = ["DatabaseBrowser", "records_frame", "records_in_commit_order", "workload_name",
           "workload_arguments"]

COLUMNS = ("Trial", "Workload", "Arguments", "Hash", "Run time (us)", "GFLOPS", "Error", "Runs",
           "Instructions")
_MAX_TABLE_ROWS = 200


def records_in_commit_order(database: Database) -> list[TuningRecord]:
    """Every record, oldest first. ``get_all_tuning_records`` of TVM's JSON database is
    sorted by speed; a database that knows its commit order says so through
    ``records_in_commit_order()`` (Workbench's JSON database does), else the database's own
    order is taken as commit order."""
    ordered = getattr(database, "records_in_commit_order", None)
    if callable(ordered):
        return list(ordered())
    return list(database.get_all_tuning_records())


def workload_name(workload: Workload) -> str:
    """The workload's function names: each PrimFunc's ``global_symbol`` (else its key)."""
    names = []
    for key, func in workload.mod.items():
        attrs = getattr(func, "attrs", None) or {}
        names.append(str(attrs.get("global_symbol", key)) if hasattr(attrs, "get") else key)
    return ", ".join(names) or "-"


def workload_arguments(workload: Workload) -> str:
    """The entry function's buffer arguments, e.g. ``float32[128,128], ...`` (shapes tell
    tasks apart that share a function name)."""
    try:
        from workbench.meta_schedule.arg_info import ArgInfo
        infos = ArgInfo.from_entry_func(workload.mod)
    except Exception:  # scalars or symbolic shapes: no short signature
        return ""
    return ", ".join(f"{a.dtype}[{','.join(str(d) for d in a.shape)}]" for a in infos)


def _flop(workload: Workload) -> float:
    try:
        from workbench.meta_schedule.utils import estimate_tir_flops
    except ImportError:  # pragma: no cover - the estimate lives in the tuner
        return math.nan
    try:
        flop = float(estimate_tir_flops(workload.mod))
    except Exception:  # an exotic workload: no GFLOPS rather than no browser
        return math.nan
    return flop if flop > 0 else math.nan


def _failed(record: TuningRecord) -> bool:
    return not record.run_secs or all(s == FAILED_RUN_SECS for s in record.run_secs)


def records_frame(database: Database) -> tuple[pd.DataFrame, list[TuningRecord]]:
    """The database as rows (see the module docstring) and the records, row for row."""
    records = records_in_commit_order(database)
    groups: dict[int, Workload] = {}
    flops: dict[int, float] = {}
    signatures: dict[int, str] = {}
    rows = []
    for trial, record in enumerate(records, start=1):
        key = workload_key(record.workload, groups)
        if key not in flops:
            flops[key] = _flop(groups[key])
            signatures[key] = workload_arguments(groups[key])
        wl = groups[key]
        failed = _failed(record)
        secs = math.nan if failed else record.mean_run_secs
        gflops = flops[key] / secs / 1e9 if not failed and secs > 0 else math.nan
        rows.append((trial, workload_name(wl), signatures[key], f"{wl.shash & 0xFFFFFFFFFFFFFFFF:016x}",
                     secs * 1e6, gflops, failed, len(record.run_secs or ()),
                     len(record.trace.insts)))
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame["_key"] = [workload_key(r.workload, groups) for r in records]
    frame["_valid"] = [r.is_valid() for r in records]
    return frame, records


class DatabaseBrowser(widgets.VBox):
    """DatabaseBrowser(database): browse ``database`` (see the module docstring).

    State for code and tests: ``all_frame`` (every record), ``frame`` (rows shown, in order),
    the controls ``filter_text``, ``sort_dropdown``, ``ascending_check``, ``best_toggle``,
    ``record_select`` (value: a trial index or None), and the views ``table_html``,
    ``trace_html``, ``ir_html``. :meth:`refresh` re-reads the database (it may still grow).
    """

    def __init__(self, database: Database, **kwargs: Any) -> None:
        if not isinstance(database, Database):
            raise TypeError(f"DatabaseBrowser: database must be a meta_schedule Database, got "
                            f"{type(database).__name__}")
        self.database = database
        self.filter_text = widgets.Text(value="", placeholder="name, arguments or hash",
                                        description="Filter")
        self.sort_dropdown = widgets.Dropdown(options=list(COLUMNS), value="Trial",
                                              description="Sort by")
        self.ascending_check = widgets.Checkbox(value=True, description="Ascending")
        self.best_toggle = widgets.ToggleButton(value=False, description="Best only",
                                                tooltip="the fastest valid record per workload")
        self.record_select = widgets.Dropdown(options=[], value=None, description="Record")
        self.summary_html = widgets.HTML()
        self.table_html = widgets.HTML()
        self.trace_html = widgets.HTML()
        self.ir_html = widgets.HTML()
        detail = widgets.Tab(children=[self.trace_html, self.ir_html],
                             titles=["Trace (Python)", "Scheduled IR"])
        controls = widgets.HBox([self.filter_text, self.sort_dropdown, self.ascending_check,
                                 self.best_toggle])
        super().__init__([controls, self.summary_html, self.table_html, self.record_select,
                          detail], **kwargs)
        self._updating = False
        for control in (self.filter_text, self.sort_dropdown, self.ascending_check,
                        self.best_toggle):
            control.observe(lambda _change: self._update_view(), names="value")
        self.record_select.observe(lambda _change: self._show_selected(), names="value")
        self.refresh()

    # ---- data ---------------------------------------------------------------------------------

    def refresh(self) -> None:
        """Re-read the database and update every view."""
        self.all_frame, self._records = records_frame(self.database)
        self._update_view()

    def record(self, trial: int) -> TuningRecord:
        """The record of trial index ``trial`` (1-based commit order)."""
        if not 1 <= trial <= len(self._records):
            raise IndexError(f"DatabaseBrowser: no record with trial index {trial}; the "
                             f"database has {len(self._records)} record(s)")
        return self._records[trial - 1]

    def _current_frame(self) -> pd.DataFrame:
        frame = self.all_frame
        if self.best_toggle.value and len(frame):
            valid = frame[frame["_valid"]]
            best = valid.sort_values(["Run time (us)", "Trial"], kind="stable") \
                .drop_duplicates("_key")
            frame = frame[frame["Trial"].isin(best["Trial"])]
        text = self.filter_text.value.strip()
        if text and len(frame):
            # A case-insensitive substring of the name, arguments or hash: users paste any.
            mask = pd.Series(False, index=frame.index)
            for column in ("Workload", "Arguments", "Hash"):
                mask |= frame[column].str.contains(text, case=False, regex=False)
            frame = frame[mask]
        column = self.sort_dropdown.value
        frame = frame.sort_values(column, ascending=self.ascending_check.value,
                                  kind="stable", na_position="last")
        return frame.drop(columns=["_key", "_valid"]).reset_index(drop=True)

    # ---- views --------------------------------------------------------------------------------

    def _update_view(self) -> None:
        self.frame = self._current_frame()
        shown = self.frame.head(_MAX_TABLE_ROWS)
        more = len(self.frame) - len(shown)
        options = [(f"#{t}  {w}  {_us(r)}", int(t)) for t, w, r in
                   zip(shown["Trial"], shown["Workload"], shown["Run time (us)"])]
        keep = self.record_select.value if self.record_select.value in \
            [v for _, v in options] else (options[0][1] if options else None)
        with self.table_html.hold_sync(), self.summary_html.hold_sync(), \
                self.record_select.hold_sync():
            self.summary_html.value = self._summary(more)
            self.table_html.value = frame_table_html(
                shown, classes="wb-database-browser", float_format="{:.3f}", na_rep="N/A")
            self.record_select.options = options
            self.record_select.value = keep
        self._show_selected()

    def _summary(self, more: int) -> str:
        frame = self.all_frame
        n_err = int(frame["Error"].sum()) if len(frame) else 0
        n_wl = frame["_key"].nunique() if len(frame) else 0
        extra = f" (first {_MAX_TABLE_ROWS} shown)" if more > 0 else ""
        return (f"<b>{len(self.frame)}</b> of {len(frame)} record(s){extra}; {n_wl} "
                f"workload(s); {n_err} failed")

    def _show_selected(self) -> None:
        trial = self.record_select.value
        if trial is None:
            self.trace_html.value = self.ir_html.value = "<i>no record selected</i>"
            return
        with self.trace_html.hold_sync(), self.ir_html.hold_sync():
            self.trace_html.value = _highlight(self.trace_python(trial))
            try:
                self.ir_html.value = _highlight(self.scheduled_ir(trial).script())
            except Exception as err:  # a trace that no longer replays: say why
                self.ir_html.value = (f"<pre>could not replay the trace: "
                                      f"{html.escape(type(err).__name__)}: "
                                      f"{html.escape(str(err))}</pre>")

    def trace_python(self, trial: int) -> str:
        """The record's trace as Python statements over ``sch`` (postprocessing included)."""
        return str(self.record(trial).trace)

    def schedule(self, trial: int) -> Schedule:
        """A fresh schedule of the record's workload with its trace replayed."""
        record = self.record(trial)
        sch = Schedule(record.workload.mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        return sch

    def scheduled_ir(self, trial: int) -> Any:
        """The scheduled IRModule of the record (its trace replayed on the workload)."""
        return self.schedule(trial).mod

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/html"] = self.summary_html.value + self.table_html.value
        bundle["text/plain"] = self.frame.to_string(index=False, na_rep="N/A", max_rows=40)
        return bundle


def _us(value: float) -> str:
    return "failed" if not math.isfinite(value) else f"{value:.2f} us"


def _highlight(text: str) -> str:
    from workbench.ir.printer import html_highlight
    return html_highlight(text)
