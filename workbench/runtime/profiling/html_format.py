"""The notebook HTML view of a Report: TVM's default table, sortable by clicking a header.

Rows are the aggregated calls (by descending duration) in ``<tbody>``; the Sum and per-device
Total rows sit in ``<tfoot>`` so sorting never moves them. Numeric cells carry their raw value in
``data-v`` so the browser sorts numbers, not text. Without JavaScript it is a plain table.
"""
from __future__ import annotations

import html
import uuid
from typing import TYPE_CHECKING, Mapping, Sequence

from .metrics import MetricValue, plain
from .text_format import SEPARATOR_NAME, format_cell, table_columns, table_rows

if TYPE_CHECKING:
    from .report import Report

_STYLE = (".wb-report table{border-collapse:collapse;font-family:monospace;font-size:12px}"
          ".wb-report th,.wb-report td{padding:2px 8px;text-align:right;"
          "border-bottom:1px solid #ddd}"
          ".wb-report th:first-child,.wb-report td:first-child{text-align:left}"
          ".wb-report th{cursor:pointer;user-select:none}"
          ".wb-report tfoot td{font-weight:bold}")

# Sorts the body rows by the clicked column; numbers by data-v, text otherwise; toggles order.
_SCRIPT = """(function(){var root=document.getElementById("%s");if(!root)return;
var t=root.querySelector("table.wb-calls"),ths=t.tHead.rows[0].cells;
function key(c){var v=c.getAttribute("data-v");return v===null?null:(v===""?-Infinity:+v);}
Array.prototype.forEach.call(ths,function(th,i){th.onclick=function(){
var body=t.tBodies[0],rows=Array.prototype.slice.call(body.rows),
asc=th.getAttribute("data-dir")!=="asc";
Array.prototype.forEach.call(ths,function(h){h.removeAttribute("data-dir");});
th.setAttribute("data-dir",asc?"asc":"desc");
rows.sort(function(a,b){var x=key(a.cells[i]),y=key(b.cells[i]),r;
if(x!==null&&y!==null){r=x<y?-1:(x>y?1:0);}
else{r=a.cells[i].textContent.localeCompare(b.cells[i].textContent);}
return asc?r:-r;});rows.forEach(function(r){body.appendChild(r);});};});})();"""


def _cell(value: MetricValue | None, column: str, tag: str = "td") -> str:
    text = html.escape(format_cell(value, column))
    if value is None or isinstance(value, str):
        numeric = ' data-v=""' if value is None else ""
        return f"<{tag}{numeric}>{text}</{tag}>"
    return f'<{tag} data-v="{plain(value)!r}">{text}</{tag}>'


def _rows_html(rows: Sequence[Mapping[str, MetricValue]], columns: Sequence[str]) -> str:
    return "".join("<tr>" + "".join(_cell(row.get(c), c) for c in columns) + "</tr>"
                   for row in rows)


def to_html(report: "Report") -> str:
    try:
        rows = table_rows(report.calls, report.device_metrics, sort=True, aggregate_calls=True,
                          col_sums=True)
    except ValueError:  # a call without a Duration cannot be sorted: keep appearance order
        rows = table_rows(report.calls, report.device_metrics, sort=False, aggregate_calls=True,
                          col_sums=True)
    columns = table_columns(rows)
    # table_rows puts the separator, Sum and the Totals after the groups; split them off.
    n_groups = next(i for i, r in enumerate(rows) if r.get("Name") == SEPARATOR_NAME)
    groups, footer = rows[:n_groups], rows[n_groups + 1:]
    root = f"wb-report-{uuid.uuid4().hex[:12]}"
    head = "".join(f'<th title="sort by {html.escape(c)}">{html.escape(c)}</th>' for c in columns)
    config = "".join(f"<tr><td>{html.escape(k)}</td><td>{html.escape(format_cell(v, k))}</td></tr>"
                     for k, v in report.configuration.items())
    return (f'<div class="wb-report" id="{root}"><style>{_STYLE}</style>'
            f'<table class="wb-calls"><thead><tr>{head}</tr></thead>'
            f"<tbody>{_rows_html(groups, columns)}</tbody>"
            f"<tfoot>{_rows_html(footer, columns)}</tfoot></table>"
            f'<table class="wb-config"><thead><tr><th>Configuration</th><th></th></tr></thead>'
            f"<tbody>{config}</tbody></table>"
            f"<script>{_SCRIPT % root}</script></div>")
