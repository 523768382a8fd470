"""Struct info: what Relax knows statically about a value (TVM's ``relax.StructInfo``).

- ``ObjectStructInfo()``: anything.
- ``PrimStructInfo(dtype, value=None)``: a scalar (``R.Prim``).
- ``ShapeStructInfo(values=None, ndim=-1)``: a shape tuple (``R.Shape``).
- ``TensorStructInfo(shape=None, dtype="float32", ndim=-1)``: a tensor. ``shape`` is a
  :class:`~workbench.relax.expr.ShapeExpr` (or ``None`` when unknown); ``ndim`` is ``-1`` when
  even the rank is unknown. ``dtype=""`` means the dtype is unknown (TVM's ``void``).
- ``TupleStructInfo(fields)``, ``FuncStructInfo(params, ret, purity)``.

Dimensions are int64 TIR expressions: constants are ``IntImm("int64", v)``; a symbolic dimension
is a ``tir.Var`` (usually ``tir.SizeVar(name, "int64")``), shared by every struct info that
mentions it, so ``(n, 8)`` in a parameter and ``(n, 16)`` in a result talk about the same ``n``.
Plain ints given to the constructors are converted.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.ir.node import Node, node
from workbench.tir.expr import IntImm, PrimExpr, Var

INDEX_DTYPE = "int64"


class StructInfo(Node):
    """Base class of struct info nodes."""

    __slots__ = ()

    def __str__(self) -> str:
        from workbench.relax.printer import sinfo_text
        return sinfo_text(self)


def as_dim(v: Any, what: str = "shape") -> PrimExpr:
    """``v`` as an int64 dimension expression (ints become ``IntImm``)."""
    if isinstance(v, bool):
        raise TypeError(f"{what}: a dimension cannot be a bool ({v!r})")
    if isinstance(v, int):
        return IntImm(INDEX_DTYPE, v)
    if isinstance(v, np.integer):
        return IntImm(INDEX_DTYPE, int(v))
    if isinstance(v, IntImm):
        return v if v.dtype == INDEX_DTYPE else IntImm(INDEX_DTYPE, v.value)
    if isinstance(v, PrimExpr):
        if not v.dtype.startswith(("int", "uint")):
            raise TypeError(f"{what}: a dimension must be an integer expression, got {v!r} "
                            f"of dtype {v.dtype}")
        return v
    if isinstance(v, str):
        raise TypeError(f"{what}: a dimension cannot be the string {v!r}; make a symbolic "
                        f"dimension with tir.SizeVar({v!r}, 'int64') (or use nn.spec.Tensor, "
                        "which accepts names)")
    raise TypeError(f"{what}: a dimension must be an int or a tir integer expression, "
                    f"got {v!r} ({type(v).__name__})")


def as_dims(values: Sequence[Any], what: str = "shape") -> tuple[PrimExpr, ...]:
    if isinstance(values, (int, PrimExpr)):
        values = (values,)
    return tuple(as_dim(v, what) for v in values)


def _set(obj: Any, name: str, value: Any) -> None:
    # Constructors normalise their inputs once; the node is frozen afterwards.
    object.__setattr__(obj, name, value)


@node
class ObjectStructInfo(StructInfo):
    """Any value (``R.Object``)."""


@node
class PrimStructInfo(StructInfo):
    """A scalar of ``dtype``, optionally with a known value (``R.Prim``)."""

    dtype: str = "int64"
    value: PrimExpr | None = None


@node
class ShapeStructInfo(StructInfo):
    """A shape tuple; ``values`` when known, else only ``ndim`` (``-1``: unknown rank)."""

    values: tuple[PrimExpr, ...] | None = None
    ndim: int = -1

    def __post_init__(self) -> None:
        if self.values is not None:
            vals = as_dims(self.values, "ShapeStructInfo")
            _set(self, "values", vals)
            if self.ndim not in (-1, len(vals)):
                raise ValueError(f"ShapeStructInfo: ndim={self.ndim} but {len(vals)} values")
            _set(self, "ndim", len(vals))


@node
class TensorStructInfo(StructInfo):
    """A tensor: ``shape`` (a ShapeExpr, or None when unknown), ``dtype``, ``ndim``."""

    shape: Any = None  # workbench.relax.expr.ShapeExpr | None
    dtype: str = "float32"
    ndim: int = -1

    def __post_init__(self) -> None:
        if self.shape is not None:
            from workbench.relax.expr import ShapeExpr
            shape = self.shape if isinstance(self.shape, ShapeExpr) else ShapeExpr(self.shape)
            _set(self, "shape", shape)
            if self.ndim not in (-1, len(shape.values)):
                raise ValueError(f"TensorStructInfo: ndim={self.ndim} but the shape has "
                                 f"{len(shape.values)} dimensions")
            _set(self, "ndim", len(shape.values))
        if self.dtype == "void":
            _set(self, "dtype", "")

    @property
    def values(self) -> tuple[PrimExpr, ...] | None:
        """The dimensions when the shape is known, else None."""
        return None if self.shape is None else self.shape.values


@node
class TupleStructInfo(StructInfo):
    """A tuple whose fields have the given struct info (``R.Tuple``)."""

    fields: tuple[StructInfo, ...] = ()

    def __post_init__(self) -> None:
        _set(self, "fields", tuple(self.fields))


@node
class FuncStructInfo(StructInfo):
    """A function taking ``params`` (None: unknown) and returning ``ret`` (``R.Callable``)."""

    params: tuple[StructInfo, ...] | None = None
    ret: StructInfo = ObjectStructInfo()
    purity: bool = True

    def __post_init__(self) -> None:
        if self.params is not None:
            _set(self, "params", tuple(self.params))


# ---- helpers used by inference rules and evaluators -------------------------------------------

def static_shape(sinfo: StructInfo) -> tuple[int, ...] | None:
    """The shape as ints when every dimension is a constant, else None."""
    vals = getattr(sinfo, "values", None)
    if vals is None or not all(isinstance(v, IntImm) for v in vals):
        return None
    return tuple(v.value for v in vals)


def symbolic_vars(sinfo: Any) -> list[Var]:
    """The tir Vars that appear in ``sinfo`` (in first-appearance order)."""
    from workbench.tir.functor import post_order_visit
    found: list[Var] = []
    seen: set[int] = set()

    def visit(n: Any) -> None:
        if isinstance(n, Var) and id(n) not in seen:
            seen.add(id(n))
            found.append(n)

    for e in _prim_exprs(sinfo):
        post_order_visit(e, visit)
    return found


def _prim_exprs(sinfo: Any):
    if isinstance(sinfo, TensorStructInfo):
        yield from (sinfo.values or ())
    elif isinstance(sinfo, ShapeStructInfo):
        yield from (sinfo.values or ())
    elif isinstance(sinfo, PrimStructInfo):
        if sinfo.value is not None:
            yield sinfo.value
    elif isinstance(sinfo, TupleStructInfo):
        for f in sinfo.fields:
            yield from _prim_exprs(f)


__all__ = ["StructInfo", "ObjectStructInfo", "PrimStructInfo", "ShapeStructInfo",
           "TensorStructInfo", "TupleStructInfo", "FuncStructInfo", "as_dim", "as_dims",
           "static_shape", "symbolic_vars", "INDEX_DTYPE"]
