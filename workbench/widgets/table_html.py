"""Wide DataFrames as compact HTML tables for the notebook widgets.

A real model's report has long cells: a fused convolution's argument shapes
(``float32[1, 64, 56, 56], float32[4, 4, 3, 3, 16, 16], ...``), layer labels such as
``layer1.0.conv1 + bn1 + relu (+3 more)``, lists of kernels. Wrapped, one row grows to ten
lines and a 22-row table to many screens. So here:

- every row is one line: cells do not wrap, a cell longer than :data:`MAX_CELL_EM` ends in an
  ellipsis and carries its full text in a ``title`` (shown on hover);
- argument shapes are condensed (:func:`condense_shapes`: ``4 args: 1x64x56x56 ... ->
  1x64x56x56``) with the full list in the ``title``;
- the table sits in a container that scrolls horizontally when its columns do not fit.
"""
from __future__ import annotations

import html
import math
import re
from typing import Any, Sequence

import pandas as pd

__all__ = ["condense_shapes", "frame_table_html", "TABLE_STYLE", "MAX_CELL_EM"]

#: Widest a cell may grow before its text is cut with an ellipsis (its title keeps it all).
MAX_CELL_EM = 22
#: Texts longer than this many characters get a ``title`` with the full text, cut or not.
_TITLE_OVER = 16
_SHAPE = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\[([^\]]*)\]")
_SHAPE_COLUMNS = ("Argument Shapes",)

#: One style block for every table rendered here (class ``wb-table``): rows one line tall,
#: long cells cut with an ellipsis, the container scrolling sideways.
#: The HTML widget lays its content out as a flex item, which grows to the table's width
#: unless allowed to shrink (``min-width: 0``): then the container scrolls instead of running
#: past the output's edge.
TABLE_STYLE = f"""<style>
.widget-html-content:has(> .wb-table-scroll) {{ min-width: 0; flex: 1 1 auto; }}
.wb-table-scroll {{ overflow-x: auto; max-width: 100%; }}
table.wb-table {{ border-collapse: collapse; font-size: 12px; line-height: 1.4; }}
table.wb-table th, table.wb-table td {{
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
  max-width: {MAX_CELL_EM}em; padding: 2px 8px; text-align: right; }}
table.wb-table td.wb-text, table.wb-table th.wb-text {{ text-align: left; }}
table.wb-table tbody tr:nth-child(odd) {{ background: rgba(127, 127, 127, 0.08); }}
</style>"""


def condense_shapes(text: str) -> str:
    """``"float32[1, 64, 56, 56], float32[64, 64, 3, 3], float32[1, 64, 56, 56]"`` ->
    ``"3 args: 1x64x56x56 ... -> 1x64x56x56"``: how many arguments, the first one and the
    last (a kernel writes its result into its last argument). One or two arguments are
    shown whole (``1x128x1x1 -> 1x128``). The dtype is written only when it is not float32.
    A text that is not a list of shapes is returned as it is."""
    found = _SHAPE.findall(text or "")
    if not found:
        return text

    def short(dtype: str, dims: str) -> str:
        parts = [d.strip() for d in dims.split(",") if d.strip()]
        shape = "x".join(parts) if parts else "scalar"
        return shape if dtype == "float32" else f"{dtype} {shape}"

    shapes = [short(dtype, dims) for dtype, dims in found]
    if len(shapes) == 1:
        return shapes[0]
    if len(shapes) == 2:
        return f"{shapes[0]} -> {shapes[1]}"
    return f"{len(shapes)} args: {shapes[0]} ... -> {shapes[-1]}"


def _cell_text(value: Any, float_format: str, na_rep: str) -> str:
    if value is None or value is pd.NA:
        return na_rep
    if isinstance(value, float):
        return na_rep if math.isnan(value) else float_format.format(value)
    return str(value)


def _cell(value: Any, column: str, float_format: str, numeric: bool, na_rep: str) -> str:
    text = _cell_text(value, float_format, na_rep)
    shown = condense_shapes(text) if column in _SHAPE_COLUMNS else text
    title = f" title='{html.escape(text, quote=True)}'" \
        if shown != text or len(text) > _TITLE_OVER else ""
    return f"<td{_align(numeric)}{title}>{html.escape(shown)}</td>"


def _align(numeric: bool) -> str:
    # numbers right-aligned (the default style), text left-aligned
    return "" if numeric else " class='wb-text'"


def frame_table_html(frame: pd.DataFrame, *, classes: str = "", float_format: str = "{:.2f}",
                     right: Sequence[str] | None = None, na_rep: str = "") -> str:
    """``frame`` as a one-line-per-row HTML table (see the module docstring) inside a
    horizontally scrolling ``div``; ``classes`` are added to the table's ``wb-table`` class.
    Numeric columns are right-aligned, or the columns in ``right`` when given (for a frame
    already formatted as text). Missing values read ``na_rep``."""
    numeric = {c: (c in right) if right is not None else pd.api.types.is_numeric_dtype(frame[c])
               for c in frame.columns}
    head = "".join(f"<th{_align(numeric[c])}>{html.escape(str(c))}</th>"
                   for c in frame.columns)
    rows = []
    for values in frame.itertuples(index=False, name=None):
        cells = "".join(_cell(v, c, float_format, numeric[c], na_rep)
                        for c, v in zip(frame.columns, values))
        rows.append(f"<tr>{cells}</tr>")
    table_classes = " ".join(["wb-table", *classes.split()])
    return (f"{TABLE_STYLE}<div class='wb-table-scroll'>"
            f"<table class='{table_classes}'><thead><tr>{head}</tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>")
