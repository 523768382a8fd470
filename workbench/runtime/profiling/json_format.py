"""TVM's JSON layout for a Report, and a strict reader for it.

Layout (no whitespace; top-level keys always in this order)::

    {"calls":[<metrics>,...],"device_metrics":{"<dev>":<metrics>,...},"configuration":<metrics>}

where ``<metrics>`` is ``{"<name>":{"<tag>":<payload>},...}`` and the tag is one of
``string``, ``count``, ``microseconds``, ``percent``, ``ratio``.

Differences from TVM's writer, on purpose (both are read by TVM's reader and by ours):
- floats are written as the shortest text that reads back to the same double (``12.5``), not
  with 17 fixed decimals (``12.50000000000000000``), which loses tiny values such as 1e-20;
- strings are escaped properly (TVM writes them raw, so a quote breaks its JSON).
"""
from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from .metrics import KINDS_BY_TAG, MetricValue, kind_of

TOP_LEVEL_KEYS = ("calls", "device_metrics", "configuration")
Metrics = dict[str, MetricValue]


def _encode_metrics(metrics: Mapping[str, MetricValue], where: str) -> dict[str, Any]:
    encoded = {}
    for name, value in metrics.items():
        kind = kind_of(value, f"{where}[{name!r}]")
        encoded[name] = {kind.json_tag: kind.to_payload(value)}
    return encoded


def to_json(calls: Sequence[Mapping[str, MetricValue]],
            device_metrics: Mapping[str, Mapping[str, MetricValue]],
            configuration: Mapping[str, MetricValue]) -> str:
    """The report as one line of JSON in TVM's layout (insertion order kept everywhere)."""
    document = {
        "calls": [_encode_metrics(c, f"calls[{i}]") for i, c in enumerate(calls)],
        "device_metrics": {dev: _encode_metrics(m, f"device_metrics[{dev!r}]")
                           for dev, m in device_metrics.items()},
        "configuration": _encode_metrics(configuration, "configuration"),
    }
    return json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


class _Malformed(ValueError):
    pass


def _fail(where: str, message: str) -> None:
    raise _Malformed(f"Report.from_json: at {where}: {message}")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # json.loads would silently keep the last of two equal keys; a report never has them.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Malformed(f"Report.from_json: duplicate key {key!r} in one object")
        result[key] = value
    return result


def _reject_constant(name: str) -> None:
    raise _Malformed(f"Report.from_json: {name} is not valid JSON (metrics must be finite)")


def _decode_value(raw: Any, where: str) -> MetricValue:
    if not isinstance(raw, dict):
        _fail(where, f"a metric value must be an object like {{\"count\": 1}}, "
                     f"got {type(raw).__name__} {raw!r}")
    if len(raw) != 1:
        _fail(where, f"a metric value must have exactly one key, got {len(raw)}: {sorted(raw)}")
    (tag, payload), = raw.items()
    kind = KINDS_BY_TAG.get(tag)
    if kind is None:
        _fail(where, f"cannot parse metric of type {tag!r}; expected one of "
                     f"{sorted(KINDS_BY_TAG)}")
    try:
        return kind.from_payload(payload)
    except (TypeError, ValueError) as err:
        _fail(f"{where}[{tag!r}]", str(err))
    raise AssertionError("unreachable")


def _decode_metrics(raw: Any, where: str) -> Metrics:
    if not isinstance(raw, dict):
        _fail(where, f"expected an object of metrics, got {type(raw).__name__}")
    return {name: _decode_value(value, f"{where}[{name!r}]") for name, value in raw.items()}


def from_json(s: str | bytes | bytearray) -> tuple[list[Metrics], dict[str, Metrics], Metrics]:
    """Parse TVM's layout into (calls, device_metrics, configuration).

    Missing top-level keys give empty parts. Anything else that is not in the layout raises
    ``ValueError`` whose message names the place (``calls[2]['Count']``) and the problem.
    """
    if not isinstance(s, (str, bytes, bytearray)):
        raise TypeError(f"Report.from_json takes a str, got {type(s).__name__}")
    try:
        document = json.loads(s, object_pairs_hook=_reject_duplicates,
                              parse_constant=_reject_constant)
    except _Malformed:
        raise
    except json.JSONDecodeError as err:
        raise ValueError(f"Report.from_json: not valid JSON at line {err.lineno} column "
                         f"{err.colno}: {err.msg}") from None
    except UnicodeDecodeError as err:
        raise ValueError(f"Report.from_json: input is not UTF-8 text: {err}") from None
    if not isinstance(document, dict):
        _fail("top level", f"expected an object, got {type(document).__name__}")
    unknown = [k for k in document if k not in TOP_LEVEL_KEYS]
    if unknown:
        # TVM's reader fails on these too; silently dropping data would hide a wrong file.
        _fail("top level", f"unknown key(s) {unknown}; expected only {list(TOP_LEVEL_KEYS)}")
    raw_calls = document.get("calls", [])
    if not isinstance(raw_calls, list):
        _fail("calls", f"expected an array of call objects, got {type(raw_calls).__name__}")
    raw_devices = document.get("device_metrics", {})
    if not isinstance(raw_devices, dict):
        _fail("device_metrics", f"expected an object keyed by device, "
                                f"got {type(raw_devices).__name__}")
    calls = [_decode_metrics(c, f"calls[{i}]") for i, c in enumerate(raw_calls)]
    devices = {dev: _decode_metrics(m, f"device_metrics[{dev!r}]")
               for dev, m in raw_devices.items()}
    configuration = _decode_metrics(document.get("configuration", {}), "configuration")
    return calls, devices, configuration
