"""``profile_function``: collector metrics for one call of one compiled function (TVM's contract).

Nothing runs when the profiler is made. Each call of the returned callable: looks the function
up, runs it ``warmup_iters`` times, ``init``s every collector with the device, ``start``s them
(dropping those that return None), runs the function once, ``stop``s them and returns their
metrics merged (a later collector wins on a duplicate name). The function's own result is
discarded, and no Duration is added unless a collector adds one.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from .collectors import MetricCollector, check_collectors
from .metrics import DeviceWrapper, MetricValue


class ProfiledFunction:
    """The callable ``profile_function`` returns: ``prof(*args) -> {metric name: value}``."""

    def __init__(self, mod: Any, dev: Any, collectors: list[MetricCollector], func_name: str,
                 warmup_iters: int) -> None:
        self.mod, self.dev, self.collectors = mod, dev, collectors
        self.func_name, self.warmup_iters = func_name, warmup_iters

    def _lookup(self) -> Callable[..., Any]:
        missing = f'There is no function called "{self.func_name}" in the module'
        try:
            func = self.mod[self.func_name]
        except (KeyError, AttributeError, IndexError) as err:
            raise ValueError(missing) from err  # the module's own message names what it has
        if not callable(func):
            raise ValueError(missing)
        return func

    def __call__(self, *args: Any) -> dict[str, MetricValue]:
        func = self._lookup()
        for _ in range(self.warmup_iters):
            func(*args)
        device = DeviceWrapper(self.dev)
        for collector in self.collectors:
            collector.init([device])
        running = [(c, s) for c in self.collectors if (s := c.start(device)) is not None]
        func(*args)
        metrics: dict[str, MetricValue] = {}
        for collector, state in running:
            metrics.update(collector.stop(state))
        return metrics

    def __repr__(self) -> str:
        return (f"<profile_function {self.func_name!r} on {self.dev} with "
                f"{[type(c).__name__ for c in self.collectors]}>")


def profile_function(mod: Any, dev: Any, collectors: Sequence[MetricCollector],
                     func_name: str | None = None, warmup_iters: int = 10) -> ProfiledFunction:
    """Collect performance information of one function execution.

    mod: module with ``mod[name]`` returning a callable and ``mod.entry_name``; dev: the device
    (``device_type``/``device_id``); collectors: MetricCollectors; func_name: defaults to
    ``mod.entry_name``; warmup_iters: calls before measuring (for warm caches), >= 0.
    Returns a callable taking the function's arguments and returning ``Dict[str, metric]``.
    """
    if getattr(mod, "type_key", None) == "rpc":
        raise ValueError("Profiling a module over RPC is not yet supported")
    if not hasattr(mod, "__getitem__"):
        raise TypeError(f"profile_function: mod must be a runtime Module, got {type(mod).__name__}")
    DeviceWrapper(dev)  # checks dev looks like a Device
    checked = check_collectors(collectors, "profile_function")
    if func_name is None:
        func_name = getattr(mod, "entry_name", None)
        if not isinstance(func_name, str):
            raise ValueError("profile_function: func_name not given and the module has no "
                             "entry_name")
    elif not isinstance(func_name, str):
        raise TypeError(f"profile_function: func_name must be a str, got {func_name!r}")
    if isinstance(warmup_iters, bool) or not isinstance(warmup_iters, int) or warmup_iters < 0:
        raise ValueError(f"profile_function: warmup_iters must be an int >= 0, "
                         f"got {warmup_iters!r}")
    return ProfiledFunction(mod, dev, checked, func_name, warmup_iters)
