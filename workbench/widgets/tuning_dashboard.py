"""``TuningDashboard``: live view of a tuning run, and the measure callback that feeds it.

It is a ``MeasureCallback`` (TVM's ``apply(task_scheduler, task_id, measure_candidates,
builder_results, runner_results)``), so it goes into ``measure_callbacks`` like any other,
after ``AddToDatabase``; ``tune_tir(..., dashboard=True)`` does that through
:func:`attach_dashboard`, which this module registers for the tuner
(:mod:`workbench.meta_schedule.dashboard_hook`).

In a notebook (an IPython kernel) it is a widget tree built once, in the thread that creates
the dashboard, and then only mutated:

- a header: a progress bar over the trial budget, totals (trials, errors, elapsed, ETA, total
  weighted latency, status) and a **Stop** button; measurements after the search (the
  post-optimization's, the confirmation's re-measurements; :meth:`TuningDashboard.begin_phase`)
  are counted apart from the budget: "16/16 trials + 9 re-measurements";
- the task table with TVM's statistics columns plus ``Errors``;
- on a cluster ("rpc" runner), which worker measured what: one row per worker with its
  measurements, errors and per-task counts, and each candidate's worker in its hover text;
- the task table's ``Bound (GFLOPS)`` and ``% of bound``: each task's roofline bound on this
  machine (measured limits, cached; see :mod:`.tuning_progress`) and how close its best is;
- "Best so far": the running best GFLOPS of each task against the trial index, with each
  task's roofline bound as a dotted line in its colour;
- "Candidates": every measured candidate (trial index vs GFLOPS or latency), errors marked
  with red crosses at y = 0.

The tables are one line per row with padded columns (:mod:`.table_html`); the two plots sit
side by side where there is room for both (about 800 px) and stack below that, their legends
to the right of the plotting area.

``apply`` only records the batch (a lock-protected model, :mod:`.tuning_progress`) and asks a
:class:`~.throttle.Throttle` for a render, so renders happen at most every ``interval``
seconds, intermediate states are coalesced and the last one is always drawn (the trailing
render, and :meth:`TuningDashboard.finish`). Rendering changes trait values of existing
widgets only, grouped by ``hold_sync`` / ``batch_update``: that is safe from the tuner's thread
(ipywidgets sends trait changes on IOPub from any thread), while creating or displaying
widgets is not and happens only in the constructor / :func:`attach_dashboard`.

Outside a notebook the same callback prints one compact line per measured batch instead.

**Stop**: the button (or :meth:`TuningDashboard.request_stop`, from any thread) only sets a
flag. The next ``apply`` -- which runs after ``AddToDatabase`` has stored the batch -- calls
TVM's public ``task_scheduler.terminate_task(i)`` for every task still alive, so the loop
ends after the current batch and everything measured stays in the database. A task with a
batch still in flight is left alone until that batch is joined (its own ``apply`` then
terminates it), so no measured result is dropped.

In a notebook the click must reach the kernel while the cell that runs ``tune_tir`` keeps the
main shell busy. JupyterLab (4.4+) sends widget messages on a kernel *subshell* (one per comm
target), but ipykernel (7.x) hands a comm message to the shell that last sent on that comm --
the busy main shell, for a widget a cell created -- so the click would wait for the cell to
end. The dashboard's own controls (Stop, the y-axis toggle) therefore opt out of that
routing (:func:`handle_on_frontend_subshell`): their messages are handled on the subshell the
frontend chose, at once, while ``tune_tir`` runs in the cell. With a frontend or kernel
without subshells (classic Notebook < 7, ipykernel 6) the click still waits for the cell;
tuning in a ``threading.Thread`` works everywhere, and a kernel interrupt stops a run too
(every measured record is kept). tests/browser/test_widgets_browser.py checks Stop in the
running cell and in a thread.
"""
from __future__ import annotations

import html
import math
import sys
import threading
from typing import Any, Iterable, Sequence, TextIO

import ipywidgets as widgets
import plotly.graph_objects as go

from workbench.meta_schedule.dashboard_hook import AS_DASHBOARD, ATTACH_DASHBOARD
from workbench.runtime.registry import register_func
from workbench.widgets.table_html import frame_table_html
from workbench.widgets.throttle import Throttle
from workbench.widgets.tuning_progress import (
    ProgressSnapshot, TuningProgress, format_seconds,
)

try:  # the tuner is finished concurrently; keep the widget importable without it
    from workbench.meta_schedule.measure_callback import MeasureCallback, PyMeasureCallback
    from workbench.meta_schedule.utils import derived_object
except ImportError:  # pragma: no cover - only while meta_schedule is incomplete
    MeasureCallback = object  # type: ignore[assignment,misc]

    class PyMeasureCallback:  # type: ignore[no-redef]
        """Stand-in with the same ``apply`` interface."""

    def derived_object(cls):  # type: ignore[no-redef]
        return cls

__all__ = ["TuningDashboard", "attach_dashboard", "as_dashboard", "DashboardAttachment",
           "in_notebook", "handle_on_frontend_subshell"]

_PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#eeca3b", "#b279a2",
            "#ff9da6", "#9d755d", "#bab0ac")
_ERROR_COLOUR = "#d62728"
GFLOPS = "GFLOPS"
LATENCY = "Latency (us)"
#: Narrowest a plot gets beside the other one; below twice that they stack.
PLOT_MIN_WIDTH = "400px"
# Legends right of the plotting area, never over the data or the axis titles.
_PLOT_LAYOUT = dict(height=320, margin=dict(l=50, r=10, t=40, b=40), autosize=True,
                    legend=dict(x=1.02, xanchor="left", y=1, yanchor="top"))


def in_notebook() -> bool:
    """True inside an IPython *kernel* (Jupyter, VS Code, nbclient), where widgets can show;
    False in plain Python or terminal IPython."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with ipywidgets
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def handle_on_frontend_subshell(widget: widgets.Widget) -> bool:
    """Have the kernel handle ``widget``'s messages from the frontend on the subshell the
    frontend sent them on, instead of on the shell that last sent on the widget's comm (the
    main shell, busy while a cell runs; see the module docstring). The widget's handlers then
    run on that subshell's thread, concurrently with the cell: they must be thread-safe (the
    dashboard's only set an event and request a render). Returns whether the kernel has such
    routing to change (ipykernel 7.x); elsewhere nothing changes."""
    comm = getattr(widget, "comm", None)
    if comm is None or not hasattr(comm, "_reply_subshell_for"):
        return False
    comm._reply_subshell_for = _frontend_subshell
    return True


def _frontend_subshell(data: Any, default: str | None) -> str | None:
    # ipykernel's hook: ``default`` is the subshell id in the incoming message's header.
    return default


def _colour(task_id: int) -> str:
    return _PALETTE[task_id % len(_PALETTE)]


def _legend_label(task_id: int, name: str, limit: int = 24) -> str:
    """``#3 fused_conv...add4_relu2``: a legend beside a plot takes its width from the plot,
    and the task table above names every task in full. The middle goes: kernels of a model
    share their beginnings (``fused_conv2d_winograd``) and differ at the end."""
    label = f"#{task_id} {name}"
    if len(label) <= limit:
        return label
    keep = limit - 3
    return label[:keep - keep // 2] + "..." + label[len(label) - keep // 2:]


def _fmt(value: float, digits: int = 4) -> str:
    return "N/A" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _first_line(text: str | None, limit: int = 160) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[:limit - 3] + "..."


@derived_object
class TuningDashboard(PyMeasureCallback):
    """TuningDashboard(mode="auto", interval=0.25, max_trials_global=None,
    max_trials_per_task=None, file=None): live tuning progress (see the module docstring).

    ``mode``: "widget" (the ipywidgets view), "text" (one printed line per batch, to ``file``
    or the current ``sys.stdout``) or "auto" (widget inside an IPython kernel, else text).
    ``interval``: minimum seconds between two renders of the widget view.
    ``max_trials_global`` / ``max_trials_per_task``: the trial budget, for the progress bar and
    the ETA (:func:`attach_dashboard` fills them from ``tune_tir``'s arguments).
    ``limits``: the MachineLimits for the tasks' roofline bounds; "auto" (default) uses this
    machine's (measured once, about 1.5 s, when the first real task appears; then cached);
    None shows no bounds.

    State for code and tests: ``progress`` (the model; ``progress.snapshot()``), ``throttle``
    (``throttle.renders`` counts renders), ``frame`` (the task table now), and in
    widget mode ``widget``, ``table_html``, ``summary_html``, ``progress_bar``,
    ``stop_button``, ``metric_toggle``, ``best_figure``, ``scatter_figure``.
    """

    def __init__(self, mode: str = "auto", *, interval: float = 0.25,
                 max_trials_global: int | None = None, max_trials_per_task: int | None = None,
                 file: TextIO | None = None, limits: Any = "auto") -> None:
        if mode not in ("auto", "widget", "text"):
            raise ValueError(f"TuningDashboard: mode must be 'auto', 'widget' or 'text', got "
                             f"{mode!r}")
        self.mode = ("widget" if in_notebook() else "text") if mode == "auto" else mode
        self.progress = TuningProgress(max_trials_global, max_trials_per_task, limits)
        self.file = file
        self._stop = threading.Event()
        self._scheduler: Any = None
        self._batches = 0
        self._displayed = False
        self._render_lock = threading.RLock()
        self.throttle = Throttle(self.render, interval)
        self.widget: widgets.VBox | None = None
        if self.mode == "widget":
            self._build_widgets()
            self.render()
        # Building the figures takes a moment; the run's clock starts after it.
        self.progress.restart_clock()

    # ---- the measure callback -------------------------------------------------------------

    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: Sequence[Any],
              builder_results: Sequence[Any], runner_results: Sequence[Any]) -> None:
        """Record one measured batch of task ``task_id``; honour a pending stop request.

        Never raises for display problems: a broken view must not end a tuning run.
        """
        self._scheduler = task_scheduler
        batch = self.progress.record_batch(task_scheduler, task_id, measure_candidates,
                                           builder_results, runner_results)
        self._batches += 1
        if self._stop.is_set():
            self._terminate_tasks(task_scheduler, task_id)
        if self.mode == "text":
            self._print(self.text_line(task_id, len(batch)))
        else:
            self.throttle.request()

    def _terminate_tasks(self, task_scheduler: Any, current: int) -> None:
        terminate = getattr(task_scheduler, "terminate_task", None)
        if terminate is None:
            return
        for tid, record in enumerate(list(getattr(task_scheduler, "tasks_", None) or ())):
            if getattr(record, "is_terminated", False):
                continue
            # Another task's batch in flight is joined later; terminating it now would make
            # the scheduler skip that join and lose measured results.
            if tid != current and getattr(record, "runner_futures", None):
                continue
            terminate(tid)
        self.progress.sync_tasks(task_scheduler)

    def attach_scheduler(self, task_scheduler: Any) -> None:
        """Tuning starts (the scheduler calls this): show its tasks before the first batch,
        and read their notes when the run ends even if no batch was ever measured."""
        self._scheduler = task_scheduler
        self.progress.sync_tasks(task_scheduler)
        if self.mode == "widget":
            self.throttle.request()

    # ---- run control ----------------------------------------------------------------------

    def begin(self, max_trials_global: int | None = None,
              max_trials_per_task: int | None = None) -> None:
        """A run starts: set the budget (None keeps the old one) and restart the clock.
        A dashboard shows one run: make a new one for the next run."""
        self.progress.set_budget(max_trials_global, max_trials_per_task)
        self.progress.restart_clock()
        if self.mode == "widget":
            self.throttle.request()

    def begin_phase(self, phase: str) -> None:
        """The run enters ``phase``: "post-optimization" or "confirmation" (``tune_tasks``
        calls this); their measurements are counted apart from the trial budget."""
        self.progress.begin_phase(phase)
        if self.mode == "widget":
            self.throttle.request()

    def set_task_layers(self, layers: Any) -> None:
        """``{task name: [layer label per call site]}``: the task table gets a ``Layers``
        column (``tune_relax`` passes its tasks' ``ExtractedTask.layers``)."""
        self.progress.set_task_layers(layers)
        if self.mode == "widget":
            self.throttle.request()

    def request_stop(self) -> None:
        """Ask the run to end after the batch being measured (safe from any thread)."""
        self._stop.set()
        self.progress.stop_requested = True
        if self.mode == "widget":
            self.throttle.request()
        else:
            self._print("Stop requested: tuning ends after the current batch; measured "
                        "records are kept.")

    @property
    def frame(self) -> Any:
        """The task table now, as a DataFrame (TVM's columns; NaN where TVM prints N/A)."""
        return self.progress.snapshot().table()

    @property
    def workers_frame(self) -> Any:
        """Which worker measured what, as a DataFrame (empty unless measured on a cluster)."""
        return self.progress.snapshot().workers_table()

    @property
    def stop_requested(self) -> bool:
        return self._stop.is_set()

    def finish(self, task_scheduler: Any = None) -> None:
        """The run is over: copy the final done flags and render the final state now."""
        self.progress.mark_finished(task_scheduler if task_scheduler is not None
                                    else self._scheduler)
        if self.mode == "widget":
            self.throttle.request()
            self.throttle.flush()
        else:
            snap = self.progress.snapshot()
            self._print(f"Tuning {'stopped' if snap.stop_requested else 'finished'}: "
                        f"{snap.trials} trials{snap.extra_text()}, {snap.errors} errors in "
                        f"{format_seconds(snap.elapsed_s)}; total weighted latency "
                        f"{_fmt(snap.total_latency_us, 3)} us")
            for note in snap.notes:
                self._print("Warning: " + note)
            workers = snap.workers_table()
            if len(workers):
                self._print("Measured on:\n" + workers.to_string(index=False))

    # ---- text output ----------------------------------------------------------------------

    def text_line(self, task_id: int, batch_size: int) -> str:
        """The compact progress line printed for one batch outside a notebook."""
        snap = self.progress.snapshot()
        task = next((t for t in snap.tasks if t.task_id == task_id), None)
        if task is None:
            return f"[Task #{task_id}] +{batch_size} trials"
        stop = " | stopping" if snap.stop_requested else ""
        workers = snap.workers_table()
        on = f" | on {len(workers)} worker{'s' if len(workers) != 1 else ''}" \
            if len(workers) else ""
        again = f" + {task.remeasured} re-measured" if task.remeasured else ""
        bound = ""
        if math.isfinite(task.percent_of_bound):
            # A kernel that only moves data (a reshape) has no GFLOPS roof worth printing.
            roof = f" of {task.bound_gflops:.1f} GFLOPS" if task.bound_gflops >= 0.1 else ""
            bound = f" ({task.percent_of_bound:.1f}% of the roofline{roof})"
        return (f"[Task #{task_id}: {task.name}] +{batch_size} -> {task.trials} trials{again} "
                f"(total {snap.budget_text()}{snap.extra_text()}) | best {_fmt(task.best_gflops)} GFLOPS{bound} "
                f"({_fmt(task.best_latency_ms * 1e3, 2)} us) | errors {task.errors} | "
                f"elapsed {format_seconds(snap.elapsed_s)} | ETA {format_seconds(snap.eta_s)}"
                f"{on}{stop}")

    def _print(self, line: str) -> None:
        out = self.file if self.file is not None else sys.stdout
        print(line, file=out, flush=True)

    # ---- widgets --------------------------------------------------------------------------

    def _build_widgets(self) -> None:
        self.progress_bar = widgets.IntProgress(value=0, min=0, max=1, description="Trials",
                                                bar_style="info")
        self.summary_html = widgets.HTML()
        self.stop_button = widgets.Button(description="Stop", icon="stop", button_style="danger",
                                          tooltip="end tuning after the current batch; "
                                                  "measured records are kept")
        self.stop_button.on_click(lambda _button: self.request_stop())
        self.table_html = widgets.HTML()
        self.workers_html = widgets.HTML()
        self.metric_toggle = widgets.ToggleButtons(options=[GFLOPS, LATENCY], value=GFLOPS,
                                                   description="y axis")
        self.metric_toggle.observe(lambda _change: self.throttle.request(), names="value")
        self.best_figure = go.FigureWidget(layout=dict(
            title=dict(text="Best so far"), xaxis_title="trial", yaxis_title=GFLOPS,
            **_PLOT_LAYOUT))
        self.scatter_figure = go.FigureWidget(
            data=[go.Scatter(x=[], y=[], mode="markers", name="errors",
                             marker=dict(symbol="x", color=_ERROR_COLOUR, size=8),
                             hovertext=[], hoverinfo="x+text")],
            layout=dict(title=dict(text="Candidates"), xaxis_title="trial", yaxis_title=GFLOPS,
                        **_PLOT_LAYOUT))
        for fig in (self.best_figure, self.scatter_figure):
            # plotly's own window-resize handler: the figure follows its box when the window
            # (and with it the notebook) changes width; FigureWidget has no public setter
            fig._config = {**fig._config, "responsive": True}
        self._task_traces: dict[int, tuple[int, int]] = {}  # task -> (best idx, scatter idx)
        # Each plot takes half the row but never less than PLOT_MIN_WIDTH (or the whole
        # output, when narrower): below that the row wraps and they stack. In a VBox a figure
        # stretches to the box's width and sizes itself to it (plotly's autosize, redone on
        # resize) instead of keeping its 700 px default and running over its neighbour.
        cell = dict(flex="1 1 0", min_width=f"min({PLOT_MIN_WIDTH}, 100%)", overflow="hidden")
        charts = widgets.HBox(
            [widgets.VBox([self.best_figure], layout=widgets.Layout(**cell)),
             widgets.VBox([self.metric_toggle, self.scatter_figure],
                          layout=widgets.Layout(**cell))],
            layout=widgets.Layout(flex_flow="row wrap", width="100%"))
        header = widgets.HBox([self.progress_bar, self.summary_html, self.stop_button],
                              layout=widgets.Layout(flex_flow="row wrap",
                                                    align_items="center"))
        self.widget = widgets.VBox([header, self.table_html, self.workers_html, charts])
        for control in (self.stop_button, self.metric_toggle):
            handle_on_frontend_subshell(control)

    def _ensure_traces(self, snap: ProgressSnapshot) -> None:
        # Traces are added as tasks appear (add_traces cannot run inside batch_update).
        for task in snap.tasks:
            if task.task_id in self._task_traces:
                continue
            colour = _colour(task.task_id)
            label = _legend_label(task.task_id, task.name)
            self.best_figure.add_trace(go.Scatter(
                x=[], y=[], mode="lines+markers", line_shape="hv", name=label,
                line=dict(color=colour), marker=dict(size=4)))
            self.scatter_figure.add_trace(go.Scatter(
                x=[], y=[], mode="markers", name=label, marker=dict(color=colour, size=6)))
            self._task_traces[task.task_id] = (len(self.best_figure.data) - 1,
                                               len(self.scatter_figure.data) - 1)

    def render(self) -> None:
        """Draw the current state (the throttle calls this; callable directly too, from any
        thread: renders are serialised, so traces are added once per task)."""
        if self.widget is None:
            return
        with self._render_lock:
            self._render()

    def _render(self) -> None:
        snap = self.progress.snapshot()
        self._ensure_traces(snap)
        with self.table_html.hold_sync(), self.summary_html.hold_sync(), \
                self.workers_html.hold_sync(), self.progress_bar.hold_sync(), \
                self.stop_button.hold_sync():
            self.table_html.value = table_html(snap.table())
            self.workers_html.value = workers_html(snap.workers_table())
            self.summary_html.value = summary_html(snap)
            self.progress_bar.max = max(1, snap.budget or snap.trials)
            self.progress_bar.value = min(snap.trials, self.progress_bar.max)
            self.progress_bar.bar_style = "success" if snap.finished else "info"
            over = snap.finished or snap.stop_requested
            self.stop_button.disabled = over
            self.stop_button.description = "Stopping" if snap.stop_requested and \
                not snap.finished else "Stop"
        self._render_best(snap)
        self._render_scatter(snap)

    def _render_best(self, snap: ProgressSnapshot) -> None:
        # The roofline bound of each task: a dotted line across the plot in its colour.
        bounds = [dict(type="line", xref="paper", x0=0, x1=1, y0=t.bound_gflops,
                       y1=t.bound_gflops, line=dict(color=_colour(t.task_id), dash="dot",
                                                    width=1))
                  for t in snap.tasks if math.isfinite(t.bound_gflops)]
        with self.best_figure.batch_update():
            if len(bounds) != len(self.best_figure.layout.shapes or ()):
                self.best_figure.layout.shapes = bounds
            for task in snap.tasks:
                xs, ys = snap.best_so_far(task.task_id)
                trace = self.best_figure.data[self._task_traces[task.task_id][0]]
                trace.x, trace.y = xs, ys

    def _render_scatter(self, snap: ProgressSnapshot) -> None:
        latency = self.metric_toggle.value == LATENCY
        by_task: dict[int, tuple[list[int], list[float]]] = {t.task_id: ([], []) for t in
                                                             snap.tasks}
        texts: dict[int, list[str]] = {t.task_id: [] for t in snap.tasks}
        err_x, err_text = [], []
        for m in snap.measurements:
            where = f" (on {m.worker})" if m.worker else ""
            if m.error is not None:
                err_x.append(m.trial)
                err_text.append(f"task #{m.task_id}: {_first_line(m.error)}{where}")
                continue
            xs, ys = by_task.setdefault(m.task_id, ([], []))
            xs.append(m.trial)
            ys.append(m.latency_ms * 1e3 if latency else m.gflops)
            texts.setdefault(m.task_id, []).append(f"measured on {m.worker}" if m.worker
                                                   else "")
        with self.scatter_figure.batch_update():
            self.scatter_figure.layout.yaxis.title.text = LATENCY if latency else GFLOPS
            errors = self.scatter_figure.data[0]
            errors.x, errors.y, errors.hovertext = err_x, [0.0] * len(err_x), err_text
            for task_id, (xs, ys) in by_task.items():
                if task_id in self._task_traces:
                    trace = self.scatter_figure.data[self._task_traces[task_id][1]]
                    trace.x, trace.y = xs, ys
                    trace.hovertext = texts.get(task_id, [])

    # ---- display --------------------------------------------------------------------------

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        # The widget view where widgets render, plus a static table for nbconvert/GitHub.
        self._displayed = True
        snap = self.progress.snapshot()
        bundle: dict[str, Any] = {}
        if self.widget is not None:
            bundle = self.widget._repr_mimebundle_(**kwargs) or {}
        bundle["text/html"] = summary_html(snap) + table_html(snap.table()) + \
            workers_html(snap.workers_table())
        bundle["text/plain"] = self._text_table(snap)
        return bundle

    def _text_table(self, snap: ProgressSnapshot) -> str:
        frame = snap.table()
        lines = [f"TuningDashboard: {snap.trials} trials, {snap.errors} errors, elapsed "
                 f"{format_seconds(snap.elapsed_s)}, ETA {format_seconds(snap.eta_s)}"]
        lines.extend("Warning: " + note for note in snap.notes)
        if len(frame):
            lines.append(frame.to_string(index=False, na_rep="N/A"))
        workers = snap.workers_table()
        if len(workers):
            lines.append("Measured on:\n" + workers.to_string(index=False))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"TuningDashboard(mode={self.mode!r}, trials={self.progress.snapshot().trials})"


# ---- HTML pieces (pure functions of the state) ---------------------------------------------

def table_html(frame: Any) -> str:
    """The task table as HTML: TVM's formatting (4 decimals, N/A, Done as Y), one line per
    row with padded columns."""
    shown = frame.copy()
    for column in ("Speed (GFLOPS)", "Latency (us)", "Weighted Latency (us)"):
        shown[column] = [_fmt(v) for v in frame[column]]
    for column in ("Bound (GFLOPS)", "% of bound"):
        if column in frame.columns:
            shown[column] = [_fmt(v, 1) for v in frame[column]]
    shown["Weight"] = [f"{v:g}" for v in frame["Weight"]]
    numbers = {"ID", "FLOP", "Weight", "Speed (GFLOPS)", "Bound (GFLOPS)", "% of bound",
               "Latency (us)",
               "Weighted Latency (us)", "Trials", "Re-measured", "Errors"}
    return frame_table_html(shown, classes="wb-tuning-table",
                            right=[c for c in shown.columns if c in numbers])


def workers_html(frame: Any) -> str:
    """The "which worker measured what" table as HTML ("" when nothing ran on a cluster)."""
    if not len(frame):
        return ""
    return ("<div class='wb-tuning-workers'><b>Measured on</b>"
            + frame_table_html(frame, classes="wb-tuning-table") + "</div>")


def summary_html(snap: ProgressSnapshot) -> str:
    """One line of totals: trials/budget, errors, elapsed, ETA, total latency, status."""
    status = "finished" if snap.finished else "stopping" if snap.stop_requested else "running"
    errors = f"<span style='color:{_ERROR_COLOUR}'>{snap.errors}</span>" if snap.errors \
        else "0"
    notes = "".join(
        f"<div class='wb-tuning-note' style='color:{_ERROR_COLOUR};white-space:pre-wrap'>"
        f"&#9888; {html.escape(note)}</div>" for note in snap.notes)
    return (f"<b>{snap.budget_text()}</b> trials{html.escape(snap.extra_text())} &middot; errors {errors} &middot; elapsed "
            f"{format_seconds(snap.elapsed_s)} &middot; ETA {format_seconds(snap.eta_s)} "
            f"&middot; total latency {_fmt(snap.total_latency_us, 3)} us &middot; "
            f"<i>{html.escape(status)}</i>{notes}")


# ---- tune_tir / tune_tasks integration -----------------------------------------------------

class DashboardAttachment:
    """What :func:`attach_dashboard` returns: the callbacks to tune with and the dashboard.

    Use it as a context manager around the tuning call; leaving the block (normally or by
    an exception, e.g. a KeyboardInterrupt) calls ``dashboard.finish()`` so the final state
    is drawn::

        with attach_dashboard(measure_callbacks, dashboard, max_trials_global=n) as callbacks:
            task_scheduler.tune(..., measure_callbacks=callbacks, ...)
    """

    def __init__(self, measure_callbacks: Any, dashboard: TuningDashboard | None) -> None:
        self.measure_callbacks = measure_callbacks
        self.dashboard = dashboard

    def __enter__(self) -> Any:
        return self.measure_callbacks

    def __exit__(self, *exc: object) -> None:
        if self.dashboard is not None:
            self.dashboard.finish()


def _as_callback_list(measure_callbacks: Any) -> list:
    if measure_callbacks is None or isinstance(measure_callbacks, str):
        from workbench.meta_schedule.measure_callback import MeasureCallback as _MC
        return list(_MC.create(measure_callbacks or "default"))
    if isinstance(measure_callbacks, Iterable) and not hasattr(measure_callbacks, "apply"):
        return list(measure_callbacks)
    return [measure_callbacks]


def as_dashboard(dashboard: Any) -> TuningDashboard | None:
    """The ``dashboard=`` argument of the tuning entry points as a dashboard: False/None ->
    None, True -> a new one in "auto" mode, "widget"/"text" -> a new one in that mode, a
    :class:`TuningDashboard` as it is."""
    if dashboard is None or dashboard is False:
        return None
    if dashboard is True:
        return TuningDashboard()
    if isinstance(dashboard, str):
        return TuningDashboard(dashboard)
    if not isinstance(dashboard, TuningDashboard):
        raise TypeError(f"dashboard must be a bool, 'widget', 'text' or a TuningDashboard, "
                        f"got {type(dashboard).__name__}")
    return dashboard


def attach_dashboard(measure_callbacks: Any, dashboard: Any, *,
                     max_trials_global: int | None = None,
                     max_trials_per_task: int | None = None) -> DashboardAttachment:
    """Add a dashboard to ``measure_callbacks`` for ``tune_tir``/``tune_tasks``.

    ``dashboard``: False/None (nothing changes: the callbacks are returned as given), True
    (a new :class:`TuningDashboard` in "auto" mode), "widget"/"text" (a new one in that mode)
    or a :class:`TuningDashboard`. ``measure_callbacks``: TVM's forms ("default", one
    callback, or a list). The dashboard is appended last, after ``AddToDatabase``, so a stop
    request acts once the batch is stored; a dashboard already in the list is not added
    twice. In a notebook a new (or not yet displayed) widget dashboard is displayed here --
    call this from the notebook's main thread.
    """
    dashboard = as_dashboard(dashboard)
    if dashboard is None:
        return DashboardAttachment(measure_callbacks, None)
    callbacks = _as_callback_list(measure_callbacks)
    if not any(cb is dashboard for cb in callbacks):
        callbacks.append(dashboard)
    dashboard.begin(max_trials_global, max_trials_per_task)
    if dashboard.mode == "widget" and not dashboard._displayed and in_notebook():
        from IPython.display import display
        display(dashboard)
    return DashboardAttachment(callbacks, dashboard)


def _attach_for_tuner(measure_callbacks: Any, dashboard: Any, max_trials_global: int,
                      max_trials_per_task: int) -> DashboardAttachment:
    return attach_dashboard(measure_callbacks, dashboard, max_trials_global=max_trials_global,
                            max_trials_per_task=max_trials_per_task)


# The tuner reaches the dashboard through these names only (it never imports this package);
# override: they replace the loaders ``import workbench`` registers, and a reload replaces them.
register_func(AS_DASHBOARD, as_dashboard, override=True)
register_func(ATTACH_DASHBOARD, _attach_for_tuner, override=True)
