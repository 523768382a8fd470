"""ExtractedTask: a tuning task found in a high-level (graph) IR."""
from __future__ import annotations

from typing import Sequence

from workbench.ir.module import IRModule
from workbench.target import Target

__all__ = ["ExtractedTask"]


class ExtractedTask:
    """``task_name``; the high-level ``mod``; the ``target``; the low-level modules it may
    dispatch to (``dispatched``, the first is tuned); and its ``weight`` (how many call sites
    share it)."""

    def __init__(self, task_name: str, mod: IRModule, target: Target | str,
                 dispatched: Sequence[IRModule], weight: int) -> None:
        self.task_name = task_name
        self.mod = mod
        self.target = target if isinstance(target, Target) else Target(target)
        self.dispatched = list(dispatched)
        self.weight = int(weight)

    def __repr__(self) -> str:
        return f"ExtractedTask({self.task_name!r}, weight={self.weight})"
