"""``VMStepper``: step through a Relax VM run in the notebook, one Call instruction at a time.

``VMStepper(vm, "main", *args)`` starts the run in a worker thread, paused before the first
call, and shows: the status and bytecode position (VM function, instruction index, pc), the
pending call's arguments (shape, dtype, min/max/mean, NaN/Inf, first values), the last
completed call's values after it ran, the bytecode around the current instruction, and the
call history (with the model layer of each call, for an imported model). Buttons: Step, Skip,
Continue (to a breakpoint or the end), Run to <symbol>, Stop; breakpoints are edited as tags
(symbols, layers or fnmatch patterns).

Threads (ecosystem.md 3.1-3.2): button callbacks only hand a command to the stepping core
(:mod:`workbench.widgets._stepping`) and return, so the kernel is never blocked by a paused
run. The worker thread updates existing widgets' values (supported from threads); every
update re-renders from the core's current state under one lock, so a late refresh never
shows stale state, and refreshes while running are throttled (IOPub rate). All widgets are
created in the constructor (the caller's thread); none is displayed from the worker.

Everything the buttons do is a method (``step``, ``skip``, ``continue_``, ``run_to``,
``stop``, ``close``) and ``wait_paused`` waits for the result, so tests and scripts drive the
widget without a browser and read ``status_html.value``, ``call_html.value``, ...
"""
from __future__ import annotations

import fnmatch
import html
import threading
import time
from typing import Any, Iterable, Sequence

import ipywidgets as widgets
import pandas as pd

from workbench.runtime.relax_vm import VirtualMachine

from ._call_records import CallRecord, Trace, ValueInfo, describe
from ._stepping import ERROR, FINISHED, IDLE, PAUSED, RUNNING, STOPPED, Stepper, trace

__all__ = ["VMStepper"]

_CODE_BEFORE, _CODE_AFTER = 4, 8    # bytecode lines shown around the current instruction
_STATUS_TEXT = {IDLE: "Not started", RUNNING: "Running", PAUSED: "Paused",
                FINISHED: "Finished", ERROR: "Error", STOPPED: "Stopped"}
_CSS = ("<style>.wb-vmstep td,.wb-vmstep th{padding:1px 6px;text-align:right;"
        "font-family:monospace;font-size:12px}.wb-vmstep tr.wb-bad{background:#fde2e2}"
        ".wb-vmstep tr.wb-cur{background:#fff3c4}.wb-vmstep td.l{text-align:left}</style>")


# ---- rendering (pure functions of records) ---------------------------------------------------

def _num(x: float | None) -> str:
    return "" if x is None else f"{x:.4g}"


def _preview(info: ValueInfo) -> str:
    if not info.preview:
        return ""
    items = ", ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in info.preview)
    more = ", ..." if info.shape is not None and _size(info.shape) > len(info.preview) else ""
    return f"[{items}{more}]"


def _size(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _values_table(labels: Sequence[str], values: Sequence[ValueInfo]) -> str:
    head = ("<tr><th>value</th><th class='l'>summary</th><th>min</th><th>max</th>"
            "<th>mean</th><th>NaN</th><th>Inf</th><th class='l'>first values</th></tr>")
    rows = []
    for label, v in zip(labels, values):
        cls = " class='wb-bad'" if v.nonfinite else ""
        tensor = v.kind == "tensor"
        rows.append(
            f"<tr{cls}><td>{html.escape(label)}</td><td class='l'>{html.escape(v.text)}</td>"
            f"<td>{_num(v.min)}</td><td>{_num(v.max)}</td><td>{_num(v.mean)}</td>"
            f"<td>{v.nan if tensor else ''}</td><td>{v.inf if tensor else ''}</td>"
            f"<td class='l'>{html.escape(_preview(v))}</td></tr>")
    return f"<table class='wb-vmstep'>{head}{''.join(rows)}</table>"


def _where(rec: CallRecord) -> str:
    site = rec.site
    if site is None:
        return "position unknown"
    layer = f" for <b>{html.escape(rec.layer)}</b>" if rec.layer else ""
    return (f"<code>{html.escape(site.function)}</code> instruction {site.index} "
            f"(pc {site.pc}){layer}")


def _call_panel(pending: CallRecord | None, last: CallRecord | None) -> str:
    parts = []
    if pending is not None:
        parts.append(f"<b>Pending call #{pending.index}</b> <code>{html.escape(pending.symbol)}"
                     f"</code> at {_where(pending)} - arguments before the call"
                     + _values_table([f"arg {i}" for i in range(len(pending.args))],
                                     pending.args))
    if last is not None and last.args_after is not None:
        labels = [f"arg {i}" for i in range(len(last.args_after))] + ["result"]
        took = f", {last.duration * 1e6:.1f} us" if last.duration is not None else ""
        parts.append(f"<b>Last completed call #{last.index}</b> <code>"
                     f"{html.escape(last.symbol)}</code> at {_where(last)}{took} - values "
                     f"after the call" + _values_table(labels, [*last.args_after, last.result]))
    return _CSS + ("<br>".join(parts) if parts else "<i>no call yet</i>")


def _history_table(records: Sequence[CallRecord], rows: int, current: int | None) -> str:
    layers = any(r.layer for r in records)
    layer_head = "<th class='l'>layer</th>" if layers else ""
    head = (f"<tr><th>#</th><th class='l'>symbol</th>{layer_head}<th class='l'>position</th>"
            "<th class='l'>status</th><th class='l'>output</th><th>min</th><th>max</th>"
            "<th>mean</th><th>NaN</th><th>Inf</th><th>us</th></tr>")
    shown = records[-rows:]
    body = []
    for r in shown:
        out = r.output
        cls = ("wb-cur" if r.index == current else "wb-bad" if r.nan + r.inf else "")
        indent = "&nbsp;&nbsp;" * r.depth
        layer = f"<td class='l'>{html.escape(r.layer)}</td>" if layers else ""
        body.append(
            f"<tr class='{cls}'><td>{r.index}</td><td class='l'>{indent}"
            f"{html.escape(r.symbol)}</td>{layer}<td class='l'>{html.escape(r.position)}</td>"
            f"<td class='l'>{r.status}</td><td class='l'>"
            f"{html.escape(out.text) if out is not None else ''}</td>"
            f"<td>{_num(out.min if out else None)}</td><td>{_num(out.max if out else None)}</td>"
            f"<td>{_num(out.mean if out else None)}</td><td>{r.nan}</td><td>{r.inf}</td>"
            f"<td>{_num(r.duration * 1e6) if r.duration is not None else ''}</td></tr>")
    note = (f"<i>last {len(shown)} of {len(records)} calls (all in .frame)</i>"
            if len(records) > len(shown) else f"<i>{len(records)} calls</i>")
    return f"{_CSS}{note}<table class='wb-vmstep'>{head}{''.join(body)}</table>"


def _listings(vm: VirtualMachine) -> dict[str, list[str]]:
    """Each VM function's instructions as text lines (from ``Executable.as_text``)."""
    listings: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in vm.executable.as_text().splitlines():
        if line.startswith("@") and line.endswith(":"):
            current = listings.setdefault(line[1:-1], [])
        elif line.startswith("  ") and current is not None:
            current.append(line.strip())
        else:
            current = None
    return listings


def _code_panel(listings: dict[str, list[str]], rec: CallRecord | None) -> str:
    if rec is None or rec.site is None or rec.site.function not in listings:
        return "<i>no bytecode position</i>"
    lines, index = listings[rec.site.function], rec.site.index
    lo, hi = max(0, index - _CODE_BEFORE), min(len(lines), index + _CODE_AFTER + 1)
    out = []
    for i in range(lo, hi):
        text = f"{'=>' if i == index else '  '} {i:4d}  {html.escape(lines[i])}"
        out.append(f"<b style='background:#fff3c4'>{text}</b>" if i == index else text)
    return (f"<b>@{html.escape(rec.site.function)}</b> (pc {rec.site.pc})"
            f"<pre style='margin:0;font-size:12px'>{chr(10).join(out)}</pre>")


# ---- the widget --------------------------------------------------------------------------------

class VMStepper(widgets.VBox):
    """VMStepper(vm, func_name, *args, breakpoints=(), history_rows=30, start=True).

    Runs ``vm[func_name](*args)`` under control (see :mod:`workbench.widgets._stepping` for
    the semantics of each command, stop included). With ``start=True`` the run starts at once,
    paused before the first call. ``history_rows`` bounds the history table (``frame`` has
    every call). Widgets for code and tests: ``status_html``, ``call_html``, ``code_html``,
    ``history_html``, ``error_html``, ``step_button``, ``skip_button``, ``continue_button``,
    ``run_to_button``, ``run_to_dropdown``, ``stop_button``, ``breakpoints_input``.
    """

    min_interval = 0.25   # seconds between refreshes while running (IOPub rate limit)

    def __init__(self, vm: VirtualMachine, func_name: str, *args: Any,
                 breakpoints: Iterable[str] = (), history_rows: int = 30,
                 start: bool = True, **kwargs: Any) -> None:
        if isinstance(history_rows, bool) or not isinstance(history_rows, int) \
                or history_rows < 1:
            raise ValueError(f"VMStepper: history_rows must be an int >= 1, got "
                             f"{history_rows!r}")
        breakpoints = [breakpoints] if isinstance(breakpoints, str) else list(breakpoints)
        self.core = Stepper(vm, func_name, *args, breakpoints=breakpoints,
                            listener=self._on_event)
        self.history_rows = history_rows
        self._ui_lock = threading.RLock()
        self._last_refresh = 0.0
        self._message = ""
        self._listings = _listings(vm)
        symbols = sorted({f.name for f in vm.executable.func_table})
        # An imported model's layers are run-to targets too, in program order.
        layers = list(dict.fromkeys(o.layer for o in
                                    getattr(vm.executable, "call_origins", {}).values()))

        self.status_html = widgets.HTML()
        self.step_button = widgets.Button(description="Step", icon="step-forward",
                                          tooltip="run the pending call, pause at the next")
        self.skip_button = widgets.Button(description="Skip", icon="forward",
                                          tooltip="do not run the pending call (SKIP_RUN)")
        self.continue_button = widgets.Button(description="Continue", icon="play",
                                              tooltip="run to a breakpoint or the end")
        self.run_to_dropdown = widgets.Dropdown(options=symbols + layers, description="Run to",
                                                layout=widgets.Layout(width="260px"))
        self.run_to_button = widgets.Button(description="Go", icon="fast-forward",
                                            layout=widgets.Layout(width="60px"))
        self.stop_button = widgets.Button(description="Stop", icon="stop",
                                          button_style="danger", tooltip="abort the run")
        self.breakpoints_input = widgets.TagsInput(value=breakpoints, allow_duplicates=False,
                                                   placeholder="breakpoint: symbol, layer or "
                                                               "pattern")
        self.call_html = widgets.HTML()
        self.code_html = widgets.HTML(layout=widgets.Layout(min_width="360px"))
        self.history_html = widgets.HTML()
        self.error_html = widgets.HTML()

        buttons = widgets.HBox([self.step_button, self.skip_button, self.continue_button,
                                self.run_to_dropdown, self.run_to_button, self.stop_button])
        breakpoints_row = widgets.HBox([widgets.Label("Breakpoints:"), self.breakpoints_input])
        panels = widgets.HBox([self.call_html, self.code_html])
        super().__init__([self.status_html, buttons, breakpoints_row, panels,
                          self.history_html, self.error_html], **kwargs)

        self.step_button.on_click(lambda _: self._click(self.core.step))
        self.skip_button.on_click(lambda _: self._click(self.core.skip))
        self.continue_button.on_click(lambda _: self._click(self.core.continue_))
        self.run_to_button.on_click(
            lambda _: self._click(lambda: self.core.run_to(self.run_to_dropdown.value)))
        self.stop_button.on_click(lambda _: self._click(self.core.stop))
        self.breakpoints_input.observe(self._on_breakpoints, names="value")
        self.refresh()
        if start:
            self.core.start(pause=True)

    @classmethod
    def trace(cls, vm: VirtualMachine, func_name: str, *args: Any) -> Trace:
        """Run once without pausing, in the calling thread, and return the :class:`Trace`
        (``.frame`` DataFrame, ``.first_nonfinite()``, ``.result``, ``.error``)."""
        return trace(vm, func_name, *args)

    # ---- commands (what the buttons call) ----------------------------------------------------

    def start(self, pause: bool = True) -> None:
        """Start the run if ``start=False`` was given to the constructor."""
        self.core.start(pause=pause)
        self.refresh()

    def step(self) -> None:
        """Run the pending call, pause before the next. Non-blocking; see wait_paused."""
        self._command(self.core.step)

    def skip(self) -> None:
        """Skip the pending call (it does not run), pause before the next."""
        self._command(self.core.skip)

    def continue_(self, ignore_breakpoints: bool = False) -> None:
        """Run to the next breakpoint (unless ``ignore_breakpoints``) or the end."""
        self._command(lambda: self.core.continue_(ignore_breakpoints))

    def run_to(self, name: str) -> None:
        """Run to the next call matching ``name`` (symbol, layer or pattern) or a
        breakpoint."""
        self._command(lambda: self.core.run_to(name))

    def pause(self) -> None:
        """Pause a running run before its next call."""
        self._command(self.core.pause)

    def stop(self) -> None:
        """Abort the run (no later call runs; ``result`` stays None)."""
        self._command(self.core.stop)

    def wait_paused(self, timeout: float | None = None) -> bool:
        """Block until paused (True) or ended (False), widgets updated; TimeoutError after
        ``timeout`` seconds."""
        return self.core.wait_paused(timeout)

    def wait_done(self, timeout: float | None = None) -> bool:
        return self.core.wait_done(timeout)

    def run_trace(self, timeout: float | None = None) -> Trace:
        """Run the rest without pausing and return the Trace of every call."""
        result = self.core.run_trace(timeout)
        self.refresh()
        return result

    def close(self, timeout: float | None = 10.0) -> bool:  # type: ignore[override]
        """Stop the run, wait for the worker thread to end, then close the widgets. True if
        the worker ended within ``timeout``."""
        core = getattr(self, "core", None)   # Widget.__del__ calls close(), even after a
        ended = True                           # constructor that raised before core existed
        if core is not None:
            ended = core.close(timeout)
            self.refresh()
        for child in self._all_children():
            child.close()
        super().close()
        return ended

    def _all_children(self) -> list[widgets.Widget]:
        found, todo = [], list(self.children)
        while todo:
            w = todo.pop()
            found.append(w)
            todo.extend(getattr(w, "children", ()))
        return found

    def _command(self, action: Any) -> None:
        action()
        self.refresh()

    def _click(self, action: Any) -> None:
        # Exceptions in a click callback only reach the browser console: show them instead.
        try:
            action()
            self._message = ""
        except (RuntimeError, TypeError, ValueError) as err:
            self._message = str(err)
        self.refresh()

    def _on_breakpoints(self, change: dict) -> None:
        self.core.set_breakpoints(change["new"])

    def add_breakpoint(self, name: str) -> None:
        if name not in self.breakpoints_input.value:
            self.breakpoints_input.value = [*self.breakpoints_input.value, name]

    def remove_breakpoint(self, name: str) -> None:
        self.core.remove_breakpoint(name)   # KeyError for an unknown one
        self.breakpoints_input.value = [b for b in self.breakpoints_input.value if b != name]

    # ---- state -----------------------------------------------------------------------------

    @property
    def status(self) -> str:
        return self.core.status

    @property
    def result(self) -> Any:
        return self.core.result

    @property
    def error(self) -> BaseException | None:
        return self.core.error

    @property
    def pending(self) -> CallRecord | None:
        return self.core.pending

    @property
    def pending_values(self) -> tuple | None:
        return self.core.pending_values

    @property
    def history(self) -> list[CallRecord]:
        return self.core.history

    @property
    def breakpoints(self) -> frozenset[str]:
        return self.core.breakpoints

    @property
    def frame(self) -> pd.DataFrame:
        return self.core.frame

    def first_nonfinite(self) -> pd.Series | None:
        return self.core.first_nonfinite()

    # ---- refreshing ------------------------------------------------------------------------

    def _on_event(self, event: str, core: Stepper) -> None:
        """Listener, called in the worker thread."""
        if event == "call" and time.monotonic() - self._last_refresh < self.min_interval:
            return
        self.refresh()

    def refresh(self) -> None:
        """Re-render every view from the core's current state (any thread)."""
        with self._ui_lock:
            core = self.core
            status, pending = core.status, core.pending
            records = list(core.history)
            last = next((r for r in reversed(records) if r.args_after is not None), None)
            where = pending or (records[-1] if records and status == RUNNING else None)
            paused = status == PAUSED
            # One trait per child widget changes, so each child sends one message anyway
            # (hold_sync batches traits of one widget); unchanged values send nothing.
            self.status_html.value = self._status_text(status, pending, records)
            for button in (self.step_button, self.skip_button, self.continue_button,
                           self.run_to_button):
                button.disabled = not paused
            self.stop_button.disabled = status not in (PAUSED, RUNNING)
            self.call_html.value = _call_panel(pending, last)
            self.code_html.value = _code_panel(self._listings, where or last)
            self.history_html.value = _history_table(
                records, self.history_rows, pending.index if pending else None)
            self.error_html.value = (
                f"<pre style='color:#b00'>{html.escape(core.error_traceback)}</pre>"
                if core.error is not None else "")
            self._last_refresh = time.monotonic()

    def _status_text(self, status: str, pending: CallRecord | None,
                     records: Sequence[CallRecord]) -> str:
        text = f"<b>{_STATUS_TEXT[status]}</b>"
        if pending is not None:
            hit = any(fnmatch.fnmatchcase(pending.symbol, b) for b in self.core.breakpoints)
            reason = " (breakpoint)" if hit else ""
            text += (f" before call #{pending.index} <code>{html.escape(pending.symbol)}</code>"
                     f" at {_where(pending)}{reason}")
        elif status == FINISHED:
            result = self.core.result
            text += f" after {len(records)} calls; result: " + html.escape(
                describe(result).text)
        elif status == ERROR:
            text += f" after {len(records)} calls: <code>{html.escape(repr(self.core.error))}"\
                    "</code>"
        else:
            text += f" ({len(records)} calls)"
        if self._message:
            text += f"<br><span style='color:#b00'>{html.escape(self._message)}</span>"
        return text

    # ---- static fallback -------------------------------------------------------------------

    def _repr_mimebundle_(self, **kwargs: Any) -> dict[str, Any]:
        # Where widgets cannot render (nbconvert, GitHub): the status and history as HTML.
        bundle = super()._repr_mimebundle_(**kwargs) or {}
        bundle["text/html"] = self.status_html.value + self.history_html.value
        bundle["text/plain"] = repr(self.core)
        return bundle
