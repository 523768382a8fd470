"""``runtime.convert``: a Python value as the runtime's immutable form (TVM's ``convert``).

TVM turns Python containers into its own immutable ``Array`` and ``Map`` and leaves scalars
alone; here the immutable forms are Python's own: a list or tuple becomes a tuple, a dict a
read-only mapping, each converted all the way down. A numpy array becomes an NDArray (a copy).
Numbers, strings, None, NDArrays, IR nodes and callables come back as they are.
"""
from __future__ import annotations

import types
from typing import Any

import numpy as np

from .ndarray import tensor

__all__ = ["convert"]


def convert(value: Any, span: Any = None) -> Any:
    """``value`` with every list/tuple made a tuple, every dict a read-only mapping
    (``types.MappingProxyType``) and every numpy array an NDArray; other values unchanged.
    ``span`` is accepted for TVM's signature and ignored (no source spans at runtime)."""
    if isinstance(value, (list, tuple)):
        return tuple(convert(v) for v in value)
    if isinstance(value, dict):
        return types.MappingProxyType({_key(k): convert(v) for k, v in value.items()})
    if isinstance(value, types.MappingProxyType):
        return value
    if isinstance(value, np.ndarray):
        return tensor(value)
    return value


def _key(k: Any) -> Any:
    if isinstance(k, (list, dict, np.ndarray)):
        raise TypeError(f"convert: a dict key must be hashable and immutable, got "
                        f"{type(k).__name__} {k!r}")
    return convert(k)

