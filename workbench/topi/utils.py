"""Shape helpers shared by the operator library (TVM's ``topi.utils``)."""
from __future__ import annotations

from typing import Any, Sequence

from workbench.tir import op
from workbench.tir.expr import IntImm, PrimExpr

Shape = tuple[PrimExpr, ...]


def get_const_int(x: Any) -> int:
    """The Python int of a constant expression; ``ValueError`` for a symbolic one."""
    if isinstance(x, bool):
        raise TypeError(f"expected an integer, got {x!r}")
    if isinstance(x, int):
        return x
    if isinstance(x, IntImm):
        return x.value
    var = getattr(x, "var", None)  # an IterVar
    raise ValueError(f"expected a constant integer, got the symbolic {var or x!r}")


def get_const_tuple(shape: Sequence[Any]) -> tuple:
    """The ints of ``shape``; symbolic dimensions are kept as expressions (TVM's contract)."""
    return tuple(s.value if isinstance(s, IntImm) else s for s in shape)


def is_const_int(x: Any, value: int | None = None) -> bool:
    """Whether ``x`` is a constant integer (equal to ``value`` when it is given)."""
    v = x if isinstance(x, int) and not isinstance(x, bool) else (
        x.value if isinstance(x, IntImm) else None)
    return v is not None and (value is None or v == value)


def prod(values: Sequence[Any]) -> PrimExpr:
    """The product of shape entries, folded when they are constants."""
    out: PrimExpr = op.const(1)
    for v in values:
        out = op.mul(out, v)
    return out


def normalize_axis(axis: int, ndim: int, what: str) -> int:
    """``axis`` in ``[-ndim, ndim)`` -> ``[0, ndim)``; ``ValueError`` naming ``what`` otherwise."""
    if isinstance(axis, bool) or not isinstance(axis, int):
        raise TypeError(f"{what}: axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{what}: axis {axis} is out of range for a {ndim}-d tensor")
    return axis + ndim if axis < 0 else axis


def normalize_axes(axis: Any, ndim: int, what: str) -> list[int]:
    """``None`` (all axes), an int, or a sequence of ints -> sorted unique axes in ``[0, ndim)``."""
    if axis is None:
        return list(range(ndim))
    items = [axis] if isinstance(axis, int) else list(axis)
    out = sorted({normalize_axis(a, ndim, what) for a in items})
    if len(out) != len(items):
        raise ValueError(f"{what}: axis {axis!r} repeats an axis")
    return out


def as_tuple(value: Any, n: int, what: str) -> tuple:
    """An int (repeated ``n`` times) or a sequence of length ``n`` -> a tuple of ints."""
    if isinstance(value, (int, IntImm)) and not isinstance(value, bool):
        return (get_const_int(value),) * n
    items = tuple(get_const_int(v) for v in value)
    if len(items) == 1:
        return items * n
    if len(items) != n:
        raise ValueError(f"{what}: expected 1 or {n} values, got {list(items)}")
    return items


def layout_dims(shape: Sequence[Any], layout: str, what: str,
                symbolic: str = "N") -> dict[str, Any]:
    """The dims of ``shape`` keyed by the letters of ``layout``: ints for constant dims, the
    expression itself for the dims named in ``symbolic`` (the batch, by default) when they are
    symbolic. Any other symbolic dim raises a ``ValueError`` naming it and ``what``."""
    out: dict[str, Any] = {}
    for letter, dim in zip(layout, shape):
        if is_const_int(dim):
            out[letter] = get_const_int(dim)
        elif letter in symbolic:
            out[letter] = dim
        else:
            allowed = " and ".join(repr(c) for c in symbolic) or "no dimension"
            raise ValueError(f"{what}: dimension {letter!r} of the {layout} shape "
                             f"{shape_str(shape)} is symbolic ({dim}); only {allowed} may be "
                             "symbolic, the others must be constants")
    return out


def shape_str(shape: Sequence[Any]) -> str:
    return "(" + ", ".join(str(s) for s in get_const_tuple(shape)) + ")"


def index_dtype(*tensors: Any) -> str:
    """The dtype for the axes and extents an operator creates: ``int64`` when any dimension
    of ``tensors`` is int64 (relax legalizes with int64 shapes), else ``int32``. Axes of one
    dtype keep schedules from mixing int32 and int64 when they move or inline stages."""
    for t in tensors:
        for dim in t.shape:
            if getattr(dim, "dtype", "int32") == "int64":
                return "int64"
    return "int32"


def index_const(value: Any, dtype: str) -> Any:
    """``value`` as an index of ``dtype``: ints become IntImm, expressions stay as they are."""
    from workbench.tir import op as _op
    return _op.const(value, dtype) if isinstance(value, int) else value
