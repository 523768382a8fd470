"""ExtractedTask: a tuning task found in a high-level (graph) IR."""
from __future__ import annotations

from typing import Sequence

from workbench.ir.module import IRModule
from workbench.target import Target

__all__ = ["ExtractedTask"]


class ExtractedTask:
    """``task_name``; the high-level ``mod``; the ``target``; the low-level modules it may
    dispatch to (``dispatched``, the first is tuned); and its ``weight`` (how many call sites
    share it). Beyond TVM, ``layers`` names the model layers of each call site, for an
    imported model (``["layer1.0.conv1 + bn1 + relu", "layer1.1.conv1 + bn1 + relu"]``;
    empty when the calls have no recorded source), and ``kernel_names`` the names of the
    compiled kernels it stands for (``["transpose", "transpose1", "transpose2"]`` for three
    equal transposes; the first is ``task_name``): the names a profiling Report shows.
    ``alternative_of`` (empty for a kernel of the model's build) names the model's kernels a
    kernel of another implementation would replace (a Winograd convolution's direct
    counterpart, or the reverse)."""

    def __init__(self, task_name: str, mod: IRModule, target: Target | str,
                 dispatched: Sequence[IRModule], weight: int,
                 layers: Sequence[str] = (), kernel_names: Sequence[str] = (),
                 alternative_of: Sequence[str] = ()) -> None:
        self.task_name = task_name
        self.mod = mod
        self.target = target if isinstance(target, Target) else Target(target)
        self.dispatched = list(dispatched)
        self.weight = int(weight)
        self.layers = list(layers)
        self.kernel_names = list(dict.fromkeys([task_name, *kernel_names]))
        self.alternative_of = list(alternative_of)

    def __repr__(self) -> str:
        return f"ExtractedTask({self.task_name!r}, weight={self.weight})"
