"""Data types: strings such as ``"float32"``, ``"int8"``, ``"bool"``, ``"float32x8"``, ``"handle"``.

A dtype is kept as a plain string everywhere in the IR (readable, JSON-friendly, cheap to
compare); :func:`parse` turns it into a :class:`DataType` with ``code``, ``bits`` and ``lanes``
when a pass needs the parts.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np

_SCALAR_BITS = {
    "bool": ("bool", 1),
    "int8": ("int", 8), "int16": ("int", 16), "int32": ("int", 32), "int64": ("int", 64),
    "uint8": ("uint", 8), "uint16": ("uint", 16), "uint32": ("uint", 32), "uint64": ("uint", 64),
    "float16": ("float", 16), "float32": ("float", 32), "float64": ("float", 64),
    "bfloat16": ("bfloat", 16),
    "handle": ("handle", 64), "void": ("void", 0),
}
_LANES = re.compile(r"^([a-z]+[0-9]*)x([0-9]+)$")


@dataclass(frozen=True, slots=True)
class DataType:
    """The parts of a dtype string: ``code`` is one of bool/int/uint/float/handle/void."""

    code: str
    bits: int
    lanes: int
    scalar: str

    def __str__(self) -> str:
        return self.scalar if self.lanes == 1 else f"{self.scalar}x{self.lanes}"

    @property
    def is_float(self) -> bool:
        return self.code == "float"

    @property
    def is_bfloat(self) -> bool:
        """bfloat16: stored as 16 bits (numpy: ``ml_dtypes.bfloat16``); arithmetic on it is
        done in float32 (codegen legalizes it)."""
        return self.code == "bfloat"

    @property
    def is_int(self) -> bool:
        return self.code == "int"

    @property
    def is_uint(self) -> bool:
        return self.code == "uint"

    @property
    def is_integer(self) -> bool:
        """Signed or unsigned integer (not bool)."""
        return self.code in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        return self.code == "bool"

    @property
    def is_handle(self) -> bool:
        return self.code == "handle"

    @property
    def bytes(self) -> int:
        return max(1, self.bits // 8) * self.lanes


@functools.lru_cache(maxsize=None)
def parse(dtype: str) -> DataType:
    """Parse a dtype string; raises ``ValueError`` naming the bad string."""
    if not isinstance(dtype, str):
        raise TypeError(f"dtype must be a string such as 'float32', got {dtype!r}")
    lanes = 1
    scalar = dtype
    m = _LANES.match(dtype)
    if m:
        scalar, lanes = m.group(1), int(m.group(2))
    if scalar == "float":
        scalar = "float32"
    if scalar == "int":
        scalar = "int32"
    if scalar not in _SCALAR_BITS or lanes < 1:
        raise ValueError(
            f"unknown dtype {dtype!r}; expected one of {sorted(_SCALAR_BITS)} "
            "optionally with lanes, e.g. 'float32x8'")
    code, bits = _SCALAR_BITS[scalar]
    return DataType(code, bits, lanes, scalar)


def normalize(dtype) -> str:
    """Accept a dtype string, a numpy dtype or a Python type and return the canonical string."""
    if isinstance(dtype, str):
        return str(parse(dtype))
    if getattr(dtype, "__name__", None) == "bfloat16" or str(dtype) == "bfloat16":
        return "bfloat16"
    if dtype is bool:
        return "bool"
    if dtype is int:
        return "int32"
    if dtype is float:
        return "float32"
    try:
        return str(parse(str(np.dtype(dtype))))
    except TypeError as e:
        raise TypeError(f"cannot interpret {dtype!r} as a dtype") from e


def with_lanes(dtype: str, lanes: int) -> str:
    t = parse(dtype)
    return t.scalar if lanes == 1 else f"{t.scalar}x{lanes}"


def element_of(dtype: str) -> str:
    """The scalar dtype of a (possibly vector) dtype."""
    return parse(dtype).scalar


def lanes_of(dtype: str) -> int:
    return parse(dtype).lanes


def to_numpy(dtype: str) -> np.dtype:
    t = parse(dtype)
    if t.lanes != 1 or t.code in ("handle", "void"):
        raise TypeError(f"dtype {dtype!r} has no numpy equivalent")
    if t.is_bfloat:
        return bfloat16_numpy()
    return np.dtype(t.scalar)


def bfloat16_numpy() -> np.dtype:
    """numpy's view of bfloat16: ``ml_dtypes.bfloat16`` (importing ml_dtypes also makes
    ``np.dtype("bfloat16")`` work)."""
    import ml_dtypes
    return np.dtype(ml_dtypes.bfloat16)


_RANK = {"bool": 0, "uint": 1, "int": 2, "bfloat": 3, "float": 3}


def promote(a: str, b: str) -> str:
    """The dtype both operands of a binary operation are converted to.

    float beats int beats bool; within a kind the wider type wins; signed beats unsigned at equal
    width (as TVM does for index arithmetic). Lanes must agree, or one side must be scalar.
    """
    if a == b:
        return a
    ta, tb = parse(a), parse(b)
    lanes = max(ta.lanes, tb.lanes)
    if ta.lanes != tb.lanes and min(ta.lanes, tb.lanes) != 1:
        raise TypeError(f"cannot combine vector dtypes {a!r} and {b!r}: lanes differ")
    if ta.code == "handle" or tb.code == "handle":
        raise TypeError(f"cannot do arithmetic between {a!r} and {b!r}")
    ka, kb = _RANK[ta.code], _RANK[tb.code]
    if ka != kb:
        win = ta if ka > kb else tb
        return with_lanes(win.scalar, lanes)
    win = ta if ta.bits >= tb.bits else tb
    return with_lanes(win.scalar, lanes)
