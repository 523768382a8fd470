"""Metric values of a profiling Report and the per-kind rules every format uses.

A metric value is one of ``Count``, ``Duration`` (microseconds), ``Percent`` (0-100 scale),
``Ratio`` or a plain ``str``, as in TVM. The values are immutable; equal when they have the same
type and payload; ordered only against the same type. How each kind is written to JSON, CSV and
the text table, and how it is combined when calls are aggregated, is kept in one table
(:data:`KINDS`) so that formats dispatch on it instead of testing types one by one.
"""
from __future__ import annotations

import functools
import math
import numbers
import operator
from dataclasses import dataclass
from typing import Any, Callable, Sequence

# Well-known metric names (exact spelling matters: TVM's tools and tests look for them).
NAME = "Name"
DURATION = "Duration (us)"
PERCENT = "Percent"
DEVICE = "Device"
COUNT = "Count"
ARGUMENT_SHAPES = "Argument Shapes"
HASH = "Hash"
# Start of a call in microseconds since the profiling run began. Stored as an ordinary Duration
# metric so that TVM's reader accepts our JSON; the text table leaves it out (see formats).
START = "Start (us)"
# Where a call came from in the user's model (beyond TVM; string metrics the Relax VM adds to
# calls of executables that know their calls' sources, see relax_vm.CallOrigin):
# LAYER names the model layers a kernel implements ("layer1.0.conv1 + bn1 + relu", or ONNX
# node names), MODULE is their innermost common module path ("layer1.0"; "" when none) and
# OP_TYPE the model operations ("convolution + batch_norm + relu", "Conv + Relu").
LAYER = "Layer"
MODULE = "Module"
OP_TYPE = "Op Type"

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def _as_int64(value: Any, what: str) -> int:
    if isinstance(value, bool):
        raise TypeError(f"{what} takes an integer, got bool {value!r}")
    try:
        result = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} takes an integer, got {type(value).__name__} {value!r}") from None
    if not _INT64_MIN <= result <= _INT64_MAX:
        raise ValueError(f"{what} must fit in int64, got {result}")
    return result


def _as_finite_float(value: Any, what: str) -> float:
    # Non-finite values are refused so that every Report serialises to strict JSON.
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} takes a real number, got {type(value).__name__} {value!r}")
    result = float(value)
    if not math.isfinite(result):
        raise ValueError(f"{what} must be finite, got {result}")
    return result


@functools.total_ordering
class _Metric:
    """Base of the four numeric metric types: one immutable payload, compared by type+payload."""

    __slots__ = ("_value",)
    _convert: Callable[[Any, str], Any]

    def __init__(self, value: Any) -> None:
        object.__setattr__(self, "_value", type(self)._convert(value, f"{type(self).__name__}()"))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    @property
    def value(self) -> Any:
        """The payload as a plain Python number."""
        return self._value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Metric):
            return NotImplemented
        return type(other) is type(self) and other._value == self._value

    def __lt__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self._value < other._value  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self._value))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._value!r})"

    def __reduce__(self) -> tuple:
        return (type(self), (self._value,))


class Count(_Metric):
    """An integer count of something (int64). ``Count(3).value == 3``."""

    __slots__ = ()
    _convert = staticmethod(_as_int64)

    def __int__(self) -> int:
        return self._value


class Duration(_Metric):
    """A span of time in microseconds. ``Duration(12.5).microseconds == 12.5``."""

    __slots__ = ()
    _convert = staticmethod(_as_finite_float)

    @property
    def microseconds(self) -> float:
        return self._value

    def __float__(self) -> float:
        return self._value


class Percent(_Metric):
    """A share of something on a 0-100 scale: ``Percent(10.0)`` is ten percent."""

    __slots__ = ()
    _convert = staticmethod(_as_finite_float)

    @property
    def percent(self) -> float:
        return self._value

    def __float__(self) -> float:
        return self._value


class Ratio(_Metric):
    """A ratio of two quantities (e.g. instructions per cycle)."""

    __slots__ = ()
    _convert = staticmethod(_as_finite_float)

    @property
    def ratio(self) -> float:
        return self._value

    def __float__(self) -> float:
        return self._value


# TVM's device-type names (DLPack codes); the Device metric is name + id, e.g. "cpu0".
DEVICE_TYPE_NAMES: dict[int, str] = {
    1: "cpu", 2: "cuda", 3: "cuda_host", 4: "opencl", 7: "vulkan", 8: "metal", 9: "vpi",
    10: "rocm", 11: "rocm_host", 12: "ext_dev", 13: "cuda_managed", 14: "oneapi", 15: "webgpu",
    16: "hexagon",
}


@dataclass(frozen=True, slots=True)
class DeviceWrapper:
    """Boxes a runtime Device (anything with ``device_type`` and ``device_id``).

    Hashable and equal by (device_type, device_id), so it can key a dict, as TVM's does.
    """

    dev: Any

    def __post_init__(self) -> None:
        for attr in ("device_type", "device_id"):
            if not isinstance(getattr(self.dev, attr, None), int):
                raise TypeError(
                    f"DeviceWrapper needs a Device with an int {attr!r}, got {self.dev!r}")

    @property
    def device_type(self) -> int:
        return self.dev.device_type

    @property
    def device_id(self) -> int:
        return self.dev.device_id

    @property
    def name(self) -> str:
        """TVM's device string used in reports: type name and id, no separator ("cpu0")."""
        return device_string(self.dev)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DeviceWrapper):
            return NotImplemented
        return (self.device_type, self.device_id) == (other.device_type, other.device_id)

    def __hash__(self) -> int:
        return hash((self.device_type, self.device_id))

    def __repr__(self) -> str:
        return f"DeviceWrapper({self.dev})"


def device_string(dev: Any) -> str:
    """"cpu0" for cpu(0): the form TVM uses for the Device metric and device_metrics keys."""
    if isinstance(dev, DeviceWrapper):
        dev = dev.dev
    kind = DEVICE_TYPE_NAMES.get(dev.device_type, f"device{dev.device_type}_")
    return f"{kind}{dev.device_id}"


# ----------------------------------------------------------------------------------------------
# Per-kind rules. Formats look a value's kind up here rather than testing types themselves.

def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _common_string(values: Sequence[str]) -> str:
    return values[0] if all(v == values[0] for v in values) else ""


@dataclass(frozen=True)
class MetricKind:
    """How one metric type is serialised, printed and combined."""

    cls: type
    json_tag: str
    to_payload: Callable[[Any], Any]       # value -> JSON payload
    from_payload: Callable[[Any], Any]     # JSON payload -> value (raises TypeError/ValueError)
    csv_cell: Callable[[Any], str]         # TVM's CSV: %g for doubles, quoted strings
    table_cell: Callable[[Any], str]       # TVM's table: 2 decimals, %.2g for ratios
    combine: Callable[[list], Any]         # aggregation of one group's values
    summable: bool                         # included in the table's Sum row


def _string_payload(payload: Any) -> str:
    if not isinstance(payload, str):
        raise TypeError(f"a string metric needs a JSON string, got {type(payload).__name__}")
    return payload


def _strict_int(payload: Any) -> Count:
    # JSON floats (1.0) and booleans are not counts, even though Python could convert them.
    if isinstance(payload, bool) or not isinstance(payload, int):
        raise TypeError(f"a count needs a JSON integer, got {type(payload).__name__} {payload!r}")
    return Count(payload)


def _number(cls: type) -> Callable[[Any], Any]:
    def parse(payload: Any) -> Any:
        if isinstance(payload, bool) or not isinstance(payload, (int, float)):
            raise TypeError(
                f"a {cls.__name__} needs a JSON number, got {type(payload).__name__} {payload!r}")
        return cls(float(payload))
    return parse


def _csv_string(s: str) -> str:
    # TVM does not escape inner quotes (its CSV is then unreadable); we double them (RFC 4180).
    return '"' + s.replace('"', '""') + '"'


def _float_kind(cls: type, tag: str, table_cell: Callable[[float], str],
                combine: Callable[[Sequence[float]], float], summable: bool) -> MetricKind:
    return MetricKind(
        cls=cls, json_tag=tag, to_payload=lambda m: m.value, from_payload=_number(cls),
        csv_cell=lambda m: format(m.value, "g"), table_cell=lambda m: table_cell(m.value),
        combine=lambda ms: cls(combine([m.value for m in ms])), summable=summable)


KINDS: dict[type, MetricKind] = {
    str: MetricKind(
        cls=str, json_tag="string", to_payload=lambda s: s, from_payload=_string_payload,
        csv_cell=_csv_string, table_cell=lambda s: s, combine=_common_string, summable=False),
    Count: MetricKind(
        cls=Count, json_tag="count", to_payload=lambda m: m.value, from_payload=_strict_int,
        csv_cell=lambda m: str(m.value), table_cell=lambda m: str(m.value),
        combine=lambda ms: Count(sum(m.value for m in ms)), summable=True),
    Duration: _float_kind(Duration, "microseconds", lambda x: f"{x:.2f}", sum, True),
    Percent: _float_kind(Percent, "percent", lambda x: f"{x:.2f}", sum, True),
    Ratio: _float_kind(Ratio, "ratio", lambda x: f"{x:.2g}", _mean, False),
}
KINDS_BY_TAG: dict[str, MetricKind] = {kind.json_tag: kind for kind in KINDS.values()}

MetricValue = Count | Duration | Percent | Ratio | str


def kind_of(value: Any, where: str = "metric") -> MetricKind:
    """The rules for ``value``; TypeError naming ``where`` if it is not a metric value."""
    kind = KINDS.get(type(value))
    if kind is None:
        raise TypeError(
            f"{where}: a metric value must be Count, Duration, Percent, Ratio or str, "
            f"got {type(value).__name__} {value!r}")
    return kind


def plain(value: MetricValue) -> Any:
    """The value as a plain Python int/float/str (what DataFrames and traces hold)."""
    return value if isinstance(value, str) else value.value
