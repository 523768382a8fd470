"""The one error type of the TVMScript parser."""
from __future__ import annotations


class ParserError(ValueError):
    """TVMScript that cannot be read: the message names the file and line and shows the line.

    ``filename``, ``lineno`` and ``source_line`` hold the location; ``reason`` the bare message.
    """

    def __init__(self, reason: str, filename: str = "<string>", lineno: int | None = None,
                 source_line: str | None = None, col: int | None = None) -> None:
        self.reason = reason
        self.filename = filename
        self.lineno = lineno
        self.source_line = source_line
        where = f"{filename}:{lineno}" if lineno is not None else filename
        text = f"{where}: {reason}"
        if source_line is not None:
            text += f"\n    {source_line.strip()}"
            if col is not None:
                lead = len(source_line) - len(source_line.lstrip())
                text += "\n    " + " " * max(0, col - lead) + "^"
        super().__init__(text)


__all__ = ["ParserError"]
