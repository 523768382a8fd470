"""``s_tir``: the names newer TVM releases (after v0.21) give the schedulable-TIR tools.

TVM moved ``tvm.tir.schedule``, ``tvm.meta_schedule`` and ``tvm.dlight`` under
``tvm.s_tir``; code written for those releases (``from tvm.s_tir.meta_schedule.relax_integration
import extract_tasks``, ``tvm.s_tir.Schedule``) runs here through this package. It adds
nothing: every ``workbench.s_tir.<name>`` module *is* the Workbench module it names (the same
module object, so classes and registries are shared), imported on first use.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
from typing import Any

# TVM's s_tir subpackage -> the Workbench package that holds it.
ALIASES = {
    "meta_schedule": "workbench.meta_schedule",
    "schedule": "workbench.tir.schedule",
    "dlight": "workbench.dlight",
    "tensor_intrin": "workbench.tir.tensor_intrin",
}
_PREFIX = __name__ + "."


def _real_name(fullname: str) -> str | None:
    head, _, rest = fullname[len(_PREFIX):].partition(".")
    if head not in ALIASES:
        return None
    return ALIASES[head] + ("." + rest if rest else "")


class _AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports ``workbench.s_tir.x.y`` as the module ``workbench.<alias of x>.y`` itself."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if not fullname.startswith(_PREFIX) or _real_name(fullname) is None:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: Any) -> Any:
        # The real module keeps its own name and spec; the import system files it under the
        # alias too (sys.modules[spec.name]).
        return importlib.import_module(_real_name(spec.name))

    def exec_module(self, module: Any) -> None:
        pass  # already executed under its real name


if not any(isinstance(f, _AliasFinder) for f in sys.meta_path):
    sys.meta_path.append(_AliasFinder())


def __getattr__(name: str) -> Any:
    """``s_tir.meta_schedule`` etc. as attributes, and the schedule's classes
    (``s_tir.Schedule``, ``Trace``, ``ScheduleError``) as TVM exports them."""
    if name in ALIASES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in ("Schedule", "Trace", "ScheduleError", "BlockRV", "LoopRV", "ExprRV",
                "SBlockRV"):
        schedule = importlib.import_module(ALIASES["schedule"])
        return getattr(schedule, "BlockRV" if name == "SBlockRV" else name)
    if name == "TensorIntrin":
        from workbench.tir import TensorIntrin
        return TensorIntrin
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = sorted(ALIASES) + ["Schedule", "Trace", "ScheduleError", "TensorIntrin"]
