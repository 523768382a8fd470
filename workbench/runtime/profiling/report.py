"""``Report``: what a profiling run gathered, with TVM's formats and notebook views.

The data model is TVM's: ``calls`` (one metrics dict per profiled call, in completion order),
``device_metrics`` (whole-run metrics per device name such as "cpu0") and ``configuration``
(how the run was set up). Formats live in sibling modules; this class checks its inputs once so
that they may assume valid data.
"""
from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

from .metrics import MetricValue, device_string, kind_of

REPORT_MIME_TYPE = "application/vnd.workbench.report+json"

Metrics = dict[str, MetricValue]


def _check_metrics(metrics: Any, where: str) -> Metrics:
    if not isinstance(metrics, Mapping):
        raise TypeError(f"Report: {where} must be a dict of metrics, got {type(metrics).__name__}")
    checked: Metrics = {}
    for name, value in metrics.items():
        if not isinstance(name, str):
            raise TypeError(f"Report: {where} has a non-string metric name {name!r}")
        if isinstance(value, str):
            value = str(value)  # plain str, so the kind table finds it (not a subclass)
        kind_of(value, f"Report: {where}[{name!r}]")
        checked[name] = value
    return checked


def _device_key(key: Any) -> str:
    # TVM's Python docs say Dict[str, ...] while its attribute is keyed by Device; accept both.
    if isinstance(key, str):
        return key
    if hasattr(key, "device_type") and hasattr(key, "device_id"):
        return device_string(key)
    raise TypeError(f"Report: device_metrics keys must be device names like 'cpu0' or Devices, "
                    f"got {key!r}")


def _check_consistent_kinds(calls: Sequence[Metrics]) -> None:
    # Aggregation and DataFrame columns need one type per metric name across calls.
    seen: dict[str, tuple[type, int]] = {}
    for i, call in enumerate(calls):
        for name, value in call.items():
            first = seen.setdefault(name, (type(value), i))
            if first[0] is not type(value):
                raise TypeError(
                    f"Report: calls[{i}][{name!r}] is {type(value).__name__} but "
                    f"calls[{first[1]}][{name!r}] is {first[0].__name__}; a metric keeps one type")


class Report:
    """A container for information gathered during a profiling run.

    ``Report(calls, device_metrics, configuration)``: every metric value must be a ``Count``,
    ``Duration``, ``Percent``, ``Ratio`` or ``str`` (TypeError naming the place otherwise).
    """

    __slots__ = ("calls", "device_metrics", "configuration")

    def __init__(self, calls: Sequence[Mapping[str, MetricValue]],
                 device_metrics: Mapping[Any, Mapping[str, MetricValue]],
                 configuration: Mapping[str, MetricValue]) -> None:
        if isinstance(calls, (str, bytes, Mapping)) or not isinstance(calls, Sequence):
            raise TypeError(f"Report: calls must be a list of dicts, got {type(calls).__name__}")
        if not isinstance(device_metrics, Mapping):
            raise TypeError("Report: device_metrics must be a dict keyed by device, "
                            f"got {type(device_metrics).__name__}")
        self.calls: list[Metrics] = [_check_metrics(c, f"calls[{i}]") for i, c in enumerate(calls)]
        _check_consistent_kinds(self.calls)
        self.device_metrics: dict[str, Metrics] = {}
        for key, metrics in device_metrics.items():
            name = _device_key(key)
            self.device_metrics[name] = _check_metrics(metrics, f"device_metrics[{name!r}]")
        self.configuration: Metrics = _check_metrics(configuration, "configuration")

    # ---- TVM's formats ------------------------------------------------------------------------

    def json(self) -> str:
        """The report in TVM's JSON layout (see json_format)."""
        from .json_format import to_json
        return to_json(self.calls, self.device_metrics, self.configuration)

    @classmethod
    def from_json(cls, s: str | bytes) -> "Report":
        """Rebuild a report from ``json()`` output (ours or TVM's); ValueError says where."""
        from .json_format import from_json
        parts = from_json(s)
        try:
            return cls(*parts)
        except TypeError as err:  # well-formed JSON, inconsistent report (e.g. mixed types)
            raise ValueError(f"Report.from_json: {err}") from None

    def csv(self) -> str:
        """The calls (not device metrics or configuration) as CSV, columns in byte order."""
        from .text_format import to_csv
        return to_csv(self.calls)

    def table(self, sort: bool = True, aggregate: bool = True, col_sums: bool = True) -> str:
        """TVM's human-readable table.

        aggregate: one row per (name, argument shapes, device), metrics combined.
        sort: rows by descending duration (otherwise call / first-appearance order).
        col_sums: a separator and a ``Sum`` row summing Count, Duration and Percent columns.
        Per-device ``Total`` rows and the Configuration block always follow.
        """
        from .text_format import to_table
        for flag, value in (("sort", sort), ("aggregate", aggregate), ("col_sums", col_sums)):
            if not isinstance(value, bool):
                raise TypeError(f"Report.table: {flag} must be a bool, got {value!r}")
        return to_table(self.calls, self.device_metrics, self.configuration,
                        sort=sort, aggregate_calls=aggregate, col_sums=col_sums)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        devices = ", ".join(self.device_metrics) or "no devices"
        return f"<Report: {len(self.calls)} calls on {devices}>"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Report):
            return NotImplemented
        return (self.calls == other.calls and self.device_metrics == other.device_metrics
                and self.configuration == other.configuration)

    __hash__ = None  # type: ignore[assignment]

    # ---- beyond TVM ---------------------------------------------------------------------------

    @staticmethod
    def fastest_of(reports: Sequence["Report"]) -> "Report":
        """Per call, the fastest of several profiled runs of the same program (the calls
        must match in order; see :mod:`.combine`): ``Report.fastest_of([vm.profile("main",
        x) for _ in range(5)])``. Load on a shared machine only adds time to a call, so this
        is steadier than any single run."""
        from .combine import fastest_of
        return fastest_of(reports)

    def to_dataframe(self, aggregate: bool = False):
        """Calls (or aggregated groups) as a pandas DataFrame with numeric columns in fixed
        units: ``Duration (us)`` and ``Percent`` floats, ``Count`` integers, strings as-is."""
        from .frames import to_dataframe
        return to_dataframe(self, aggregate=aggregate)

    def group_by(self, by: str = "layer", depth: int | None = None, *, builtins: bool = True):
        """Time per model layer (``by="layer"``), per operation type (``"op_type"``) or per
        kernel (``"name"``), as a DataFrame sorted by descending time: the group, ``Duration
        (us)``, ``Percent`` and ``Count`` summed over its calls, and its ``Kernels``.

        Calls of an imported model carry ``Layer`` / ``Op Type`` metrics (the VM adds them
        from the executable's call origins); other calls fall back to the kernel name (for
        op types: the name without ``fused_`` and its counters, ``conv2d_add_relu``).
        ``depth`` (layers only) groups by module path cut to that many parts
        (``depth=1``: ``layer1``, ``layer2``, ...); a call spanning several modules at that
        depth keeps its own layer label.

        ``builtins=False`` leaves out the VM's own helper calls (``vm.builtin.match_shape``,
        ``vm.builtin.check_tensor_info``, ``vm.builtin.make_tuple``, ...), which are not
        layers of the model: what a plot of the model's layers wants. By default every call
        is counted, so the groups add up to the report's total.
        """
        from .frames import group_by
        return group_by(self, by=by, depth=depth, builtins=builtins)

    def diff(self, other: "Report", aggregate: bool = False, threshold: float = 0.05, *,
             baseline_name: str = "Baseline", name: str = "New", by: str | None = None,
             depth: int | None = None):
        """How ``other`` (the new run) compares with this report (the baseline), call by call:
        ``naive.diff(tiled, baseline_name="naive", name="tiled")``.

        Calls are matched by (name, argument shapes, device) and their order among equal keys.
        Returns a DataFrame with both durations (columns ``"<baseline_name> (us)"`` and
        ``"<name> (us)"``), ``Delta (us)`` (new - baseline), ``Speedup`` (baseline time / new
        time: > 1 means ``other`` is faster) and ``Change`` in {"faster", "slower", "same",
        "added", "removed"} (from ``other``'s point of view); ``threshold`` is the relative
        change below which a call counts as "same". ``frame.attrs`` holds both names, the
        total ``speedup`` over the calls in both runs and a ``title`` such as
        ``"naive -> tiled: 5.50x faster"``. Calls of an imported model add a ``Layer``
        column.

        ``by`` ("layer", "op_type" or "name", with ``depth`` for layers as in
        :meth:`group_by`) compares the groups of :meth:`group_by` instead, matched by the
        group alone (columns: the group, both durations, ``Delta (us)``, ``Speedup``,
        ``Change``): a tuned build's kernels may differ in name or argument shapes
        (pre-packed weights) while the layers stay.
        """
        from .frames import diff
        return diff(self, other, aggregate=aggregate, threshold=threshold,
                    baseline_name=baseline_name, name=name, by=by, depth=depth)

    def to_chrome_trace(self, path: str | os.PathLike | None = None) -> str:
        """Chrome trace-event JSON (opens in Perfetto / chrome://tracing); written to ``path``
        if given, and returned either way."""
        from .timeline import to_chrome_trace
        return to_chrome_trace(self, path)

    # ---- notebook -----------------------------------------------------------------------------

    def _repr_html_(self) -> str:
        from .html_format import to_html
        return to_html(self)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        """HTML table, our JSON MIME type (payload: ``json()`` as an object) and plain text."""
        import json
        return {
            "text/plain": str(self),
            "text/html": self._repr_html_(),
            REPORT_MIME_TYPE: json.loads(self.json()),
        }
