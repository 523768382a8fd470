"""What travels between a client and its remote session: plain data and a few markers.

Objects that live in the session process (arrays, modules, VMs, functions) never travel;
the client holds *handles* (ints) to them. Arguments going out are plain values (numpy
arrays, numbers, strings, tuples) or markers:

- :class:`Ref` -- "the remote object with this handle" (a RemoteNDArray, RemoteModule, ...);
- :class:`DeviceRef` -- a device of the session (``session.cpu(0)``).

Results coming back are plain values or :class:`Handle` markers describing a new remote object
(``kind`` "ndarray" with ``shape``/``dtype``, "function", "object"); the client wraps each in a
proxy. Tuples stay tuples, recursively (a VM function returning a tuple works over the wire).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Ref", "DeviceRef", "Handle"]


@dataclass(frozen=True)
class Ref:
    """An argument that is a remote object of the session (by handle)."""

    handle: int


@dataclass(frozen=True)
class DeviceRef:
    """An argument that is a device of the session."""

    device_type: int
    device_id: int


@dataclass(frozen=True)
class Handle:
    """A result that stays remote: ``kind`` ("ndarray", "function", "object") and facts the
    client shows without a round trip (``meta``: shape and dtype of an array, a type name)."""

    handle: int
    kind: str
    meta: dict = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash(self.handle)


def walk(value: Any, leaf: Any) -> Any:
    """Rebuild ``value`` with ``leaf`` applied to every non-tuple/list element (tuples stay
    tuples, lists stay lists)."""
    if type(value) is tuple:
        return tuple(walk(v, leaf) for v in value)
    if type(value) is list:
        return [walk(v, leaf) for v in value]
    return leaf(value)
