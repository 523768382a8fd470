"""``show()``: print IR text, coloured by Pygments when it is installed (TVM's ``cprint``).

In a notebook (IPython kernel running) the text is displayed as HTML, coloured like the
objects' ``_repr_html_`` (or by Pygments when a ``style`` is named); in a terminal it is
printed with 256-colour escapes. When standard output is not a terminal (a pipe, a log file)
and no ``style`` was asked for, the text is printed plain: escape codes would only garble
the file. Without Pygments the text is printed plain too, with a one-time hint.
"""
from __future__ import annotations

import importlib.util
import sys
import warnings
from typing import Any

__all__ = ["cprint"]

_warned_no_pygments = False


def cprint(printable: Any, style: str | None = None, black_format: bool = False) -> None:
    """Print ``printable`` (a string, or anything with ``script()``) highlighted.

    ``style`` is a Pygments style name (Pygments' "default" when not given);
    ``black_format`` reformats the text with Black when it is installed.
    """
    if hasattr(printable, "script") and callable(printable.script):
        text = printable.script()
    elif isinstance(printable, str):
        text = printable
    else:
        raise TypeError(f"cprint: expects a string or an object with script(), got "
                        f"{type(printable).__name__}")
    if black_format:
        text = _black(text)
    in_notebook = _in_kernel()
    if in_notebook and style is None:
        # The same colouring as the objects' own _repr_html_, so a notebook reads alike
        # whether a cell shows ``mod`` or calls ``mod.show()``.
        from IPython import display

        from workbench.ir.printer import html_highlight
        display.display(display.HTML(html_highlight(text)))
        return
    if not _has_pygments():
        _hint_pygments()
        print(text)
        return
    if not in_notebook and style is None and not _stdout_is_terminal():
        print(text)
        return
    from pygments import highlight
    from pygments.formatters import HtmlFormatter, Terminal256Formatter
    from pygments.lexers.python import Python3Lexer

    if in_notebook:
        from IPython import display

        html = highlight(text, Python3Lexer(), HtmlFormatter(style=style or "default",
                                                             noclasses=True))
        display.display(display.HTML(html))
    else:
        print(highlight(text, Python3Lexer(), Terminal256Formatter(style=style or "default")),
              end="")


def _in_kernel() -> bool:
    """A Jupyter kernel is running this process (not merely ipykernel imported: a test suite
    or a script may import the widgets without any kernel)."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def _has_pygments() -> bool:
    return importlib.util.find_spec("pygments") is not None


def _hint_pygments() -> None:
    global _warned_no_pygments
    if not _warned_no_pygments:
        _warned_no_pygments = True
        warnings.warn("show(): install Pygments (pip install pygments) for coloured output",
                      UserWarning, stacklevel=3)


def _stdout_is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed streams
        return False


def _black(text: str) -> str:
    try:
        import black
    except ImportError:
        warnings.warn("show(black_format=True): Black is not installed; printing unformatted",
                      UserWarning, stacklevel=3)
        return text
    return black.format_str(text, mode=black.FileMode())
