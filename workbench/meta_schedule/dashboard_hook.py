"""``dashboard=`` of the tuning entry points, without the tuner naming the view.

The live view of a tuning run (the notebook widgets' ``TuningDashboard``) sits on a higher
floor than the tuner and is a measure callback: the tuner only appends it to the callbacks.
The view's package builds that callback and registers two global functions (the runtime's
``register_func``, TVM's mechanism for late binding) under the names below; the tuner looks
them up when a dashboard is asked for:

- ``AS_DASHBOARD(dashboard) -> callback``: the ``dashboard=`` argument (True, "widget",
  "text", or a dashboard object) as the callback object; it has ``set_task_layers(layers)``.
- ``ATTACH_DASHBOARD(callbacks, dashboard, max_trials_global, max_trials_per_task)``: a
  context manager whose ``__enter__`` gives the callbacks with the dashboard appended and whose
  ``__exit__`` draws its final state.

``import workbench`` registers loaders under both names that import the view's package on first
use (its import then replaces them), so ``dashboard=True`` works without importing it first.
A false ``dashboard`` never looks anything up.
"""
from __future__ import annotations

import contextlib
from typing import Any

from workbench.runtime.registry import get_global_func

__all__ = ["AS_DASHBOARD", "ATTACH_DASHBOARD", "as_dashboard", "attach_dashboard"]

AS_DASHBOARD = "meta_schedule.as_dashboard"
ATTACH_DASHBOARD = "meta_schedule.attach_dashboard"


def as_dashboard(dashboard: Any) -> Any:
    """The callback object for ``dashboard=`` (None for a false value)."""
    if not dashboard:
        return None
    return _hook(AS_DASHBOARD)(dashboard)


def attach_dashboard(callbacks: list[Any], dashboard: Any, max_trials_global: int,
                     max_trials_per_task: int) -> Any:
    """A context giving ``callbacks`` with the dashboard appended, that draws the dashboard's
    final state on exit; ``callbacks`` as they are when ``dashboard`` is false."""
    if not dashboard:
        return contextlib.nullcontext(callbacks)
    return _hook(ATTACH_DASHBOARD)(callbacks, dashboard, max_trials_global, max_trials_per_task)


def _hook(name: str) -> Any:
    func = get_global_func(name, allow_missing=True)
    if func is None:
        raise RuntimeError(f"dashboard=: no tuning dashboard is registered ({name!r}); "
                           "import workbench.widgets, or pass measure_callbacks instead")
    return func
