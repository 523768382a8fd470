"""Profiler: where tuning time goes (TVM's ``meta_schedule.Profiler``).

::

    with ms.Profiler() as prof:          # pushes prof; times "Total" until exit
        with ms.Profiler.timeit("SendToBuilder"):
            ...
    print(prof.table())

``Profiler.timeit(name)`` adds the elapsed seconds of its block to ``stats[name]`` of the
innermost active profiler of the calling thread, and does nothing when none is active (so
library code can time itself unconditionally). Each thread has its own stack, as in TVM; a
worker process has its own too, so its scopes never reach the parent.
"""
from __future__ import annotations

import contextlib
import threading
import time
from typing import Iterator

__all__ = ["Profiler"]

_STACK = threading.local()


def _stack() -> list["Profiler"]:
    s = getattr(_STACK, "items", None)
    if s is None:
        s = _STACK.items = []
    return s


class Profiler:
    """Accumulates seconds per scope name; ``"Total"`` is the time inside the ``with``."""

    def __init__(self) -> None:
        self.stats_sec: dict[str, float] = {}
        self._total_start: float | None = None

    # -- scope ---------------------------------------------------------------------------------
    def __enter__(self) -> "Profiler":
        _stack().append(self)
        self._total_start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._total_start is not None:
            self._add("Total", time.perf_counter() - self._total_start)
            self._total_start = None
        stack = _stack()
        if stack and stack[-1] is self:
            stack.pop()
        elif self in stack:  # exited out of order: remove this very profiler
            stack.remove(self)

    @staticmethod
    def current() -> "Profiler | None":
        """The innermost active profiler of this thread, or None."""
        stack = _stack()
        return stack[-1] if stack else None

    @staticmethod
    @contextlib.contextmanager
    def timeit(name: str) -> Iterator[None]:
        """Time a block into the current profiler under ``name`` (no-op without one)."""
        prof = Profiler.current()
        if prof is None:
            yield
            return
        start = time.perf_counter()
        try:
            yield
        finally:
            prof._add(name, time.perf_counter() - start)

    def _add(self, name: str, seconds: float) -> None:
        self.stats_sec[name] = self.stats_sec.get(name, 0.0) + seconds

    # -- results -------------------------------------------------------------------------------
    def get(self) -> dict[str, float]:
        """Seconds per scope name (a copy)."""
        return dict(self.stats_sec)

    def table(self) -> str:
        """TVM's text table: ``ID | Name | Time (min) | Percentage``, sorted by percentage
        (descending). Like TVM, the first row (normally "Total") is written without an ID
        cell, so its values sit one column to the left. Raises ``ValueError`` when nothing was
        recorded or "Total" is missing (i.e. when called inside the ``with`` scope)."""
        if not self.stats_sec:
            raise ValueError("The stats are empty. Please run the profiler first.")
        if "Total" not in self.stats_sec:
            raise ValueError("The total time is not recorded. This method should be called "
                             "only after exiting the profiler's with scope.")
        total = self.stats_sec["Total"]
        entries = [(name, sec / 60.0, sec / total * 100.0 if total > 0 else 0.0)
                   for name, sec in self.stats_sec.items()]
        entries.sort(key=lambda e: -e[2])  # stable: ties keep insertion order
        rows: list[list[str] | None] = [["ID", "Name", "Time (min)", "Percentage"], None]
        for i, (name, minutes, pct) in enumerate(entries):
            if i == 0:
                rows.append([name, f"{minutes:.4f}", f"{pct:.4f}", ""])
            else:
                rows.append([str(i), name, f"{minutes:.4f}", f"{pct:.4f}"])
        rows.append(None)
        return _render_table(rows)

    def _repr_html_(self) -> str:
        import html
        total = self.stats_sec.get("Total")
        items = sorted(self.stats_sec.items(), key=lambda kv: -kv[1])
        body = "".join(
            f"<tr><td>{html.escape(n)}</td><td>{s / 60:.4f}</td>"
            f"<td>{(s / total * 100 if total else float('nan')):.2f}</td></tr>"
            for n, s in items)
        return ("<table class='workbench-profiler'><tr><th>Name</th><th>Time (min)</th>"
                f"<th>Percentage</th></tr>{body}</table>")

    def __repr__(self) -> str:
        return f"Profiler({', '.join(f'{k}={v:.3f}s' for k, v in self.stats_sec.items())})"


def _render_table(rows: list[list[str] | None]) -> str:
    """TVM's TablePrinter: cells right-aligned, ``" | "`` between columns, a leading and a
    trailing space per row, separator rows of ``-`` as wide as a row."""
    cells = [r for r in rows if r is not None]
    ncols = max(len(r) for r in cells)
    widths = [max(len(r[j]) if j < len(r) else 0 for r in cells) for j in range(ncols)]
    total_width = sum(widths) + 3 * ncols - 1
    lines = []
    for r in rows:
        if r is None:
            lines.append("-" * total_width)
        else:
            padded = [(r[j] if j < len(r) else "").rjust(widths[j]) for j in range(ncols)]
            lines.append(" " + " | ".join(padded) + " ")
    return "\n".join(lines) + "\n"
