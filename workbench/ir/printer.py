"""Placeholder text forms until the TVMScript-style printer lands."""
from __future__ import annotations

import html
from typing import Any


def short_repr(node: Any) -> str:
    from workbench.ir.node import field_names
    parts = ", ".join(f"{n}={getattr(node, n)!r}" for n in field_names(type(node)))
    return f"{type(node).__name__}({parts})"


def script(mod: Any) -> str:
    return "\n".join(f"# {name}\n{f!r}" for name, f in mod.items())


def html_highlight(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"
