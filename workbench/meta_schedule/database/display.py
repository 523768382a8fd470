"""Notebook display of databases: one table row per workload with its best record."""
from __future__ import annotations

import html
from typing import TYPE_CHECKING

from workbench.meta_schedule.database.database import TuningRecord, Workload, workload_key

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.database.database import Database

__all__ = ["database_html", "summarize"]

_MAX_ROWS = 50


def summarize(db: "Database") -> list[dict]:
    """Per workload: functions, hash, record count, valid count, best record (or None)."""
    groups: dict[int, Workload] = {}
    rows: dict[int, dict] = {}
    for wl in getattr(db, "workloads", lambda: [])():
        key = workload_key(wl, groups)
        rows.setdefault(key, {"workload": wl, "records": 0, "valid": 0, "best": None})
    for record in db.get_all_tuning_records():
        key = workload_key(record.workload, groups)
        row = rows.setdefault(key, {"workload": record.workload, "records": 0, "valid": 0,
                                    "best": None})
        row["records"] += 1
        if record.is_valid():
            row["valid"] += 1
            best: TuningRecord | None = row["best"]
            if best is None or record.mean_run_secs < best.mean_run_secs:
                row["best"] = record
    return list(rows.values())


def database_html(db: "Database") -> str:
    title = html.escape(type(db).__name__)
    members = getattr(db, "databases", None)
    try:
        rows = summarize(db)
    except NotImplementedError:
        inner = "".join(f"<li>{html.escape(repr(m))}</li>" for m in (members or []))
        return (f"<div class='workbench-database'><b>{title}</b>"
                + (f"<ul>{inner}</ul>" if inner else "") + "</div>")
    head = ("<tr><th>#</th><th>workload</th><th>hash</th><th>records</th><th>valid</th>"
            "<th>best mean (us)</th><th>best run_secs (us)</th></tr>")
    body = []
    for i, row in enumerate(rows[:_MAX_ROWS]):
        wl, best = row["workload"], row["best"]
        funcs = ", ".join(wl.mod) or "-"
        if best is None:
            mean, secs = "-", "-"
        else:
            mean = f"{best.mean_run_secs * 1e6:.3f}"
            secs = ", ".join(f"{s * 1e6:.3f}" for s in best.run_secs[:8])
            if len(best.run_secs) > 8:
                secs += ", ..."
        body.append(f"<tr><td>{i}</td><td><code>{html.escape(funcs)}</code></td>"
                    f"<td><code>{wl.shash:016x}</code></td><td>{row['records']}</td>"
                    f"<td>{row['valid']}</td><td>{mean}</td><td>{html.escape(secs)}</td></tr>")
    more = (f"<tr><td colspan='7'>... {len(rows) - _MAX_ROWS} more workload(s)</td></tr>"
            if len(rows) > _MAX_ROWS else "")
    total = sum(r["records"] for r in rows)
    return (f"<div class='workbench-database'><b>{title}</b>: {len(rows)} workload(s), "
            f"{total} record(s)<table>{head}{''.join(body)}{more}</table></div>")
