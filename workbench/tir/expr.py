"""TIR expressions: variables, constants, arithmetic, comparisons, loads, vectors and calls.

Python operators on expressions build nodes (``a + 1``, ``i < n``, ``x[i]`` on buffers) with
dtype promotion and constant folding done by :mod:`workbench.tir.op`. ``a == b`` builds an
``EQ`` node; its truth value (``bool(a == b)``) is identity, so expressions still work as dict
keys and in ``in`` tests, as in TVM.
"""
from __future__ import annotations

from typing import Any, Iterator

from workbench.ir import dtype as _dt
from workbench.ir.node import Node, field_names, node


class PrimExpr(Node):
    """Base class of scalar/vector expressions; every expression has a ``dtype`` string."""

    __slots__ = ()
    dtype: str

    # Arithmetic builds nodes through tir.op, which promotes dtypes and folds constants.
    def __add__(self, other): return _op().add(self, other)
    def __radd__(self, other): return _op().add(other, self)
    def __sub__(self, other): return _op().sub(self, other)
    def __rsub__(self, other): return _op().sub(other, self)
    def __mul__(self, other): return _op().mul(self, other)
    def __rmul__(self, other): return _op().mul(other, self)
    def __truediv__(self, other): return _op().div(self, other)
    def __rtruediv__(self, other): return _op().div(other, self)
    def __floordiv__(self, other): return _op().floordiv(self, other)
    def __rfloordiv__(self, other): return _op().floordiv(other, self)
    def __mod__(self, other): return _op().floormod(self, other)
    def __rmod__(self, other): return _op().floormod(other, self)
    def __neg__(self): return _op().neg(self)
    def __lt__(self, other): return _op().lt(self, other)
    def __le__(self, other): return _op().le(self, other)
    def __gt__(self, other): return _op().gt(self, other)
    def __ge__(self, other): return _op().ge(self, other)
    def __eq__(self, other):  # type: ignore[override]
        return _compare_or_identity(self, other, True)

    def __ne__(self, other):  # type: ignore[override]
        return _compare_or_identity(self, other, False)
    def __and__(self, other): return _op().bitwise_and(self, other)
    def __rand__(self, other): return _op().bitwise_and(other, self)
    def __or__(self, other): return _op().bitwise_or(self, other)
    def __ror__(self, other): return _op().bitwise_or(other, self)
    def __xor__(self, other): return _op().bitwise_xor(self, other)
    def __rxor__(self, other): return _op().bitwise_xor(other, self)
    def __invert__(self): return _op().bitwise_not(self)
    def __lshift__(self, other): return _op().shift_left(self, other)
    def __rshift__(self, other): return _op().shift_right(self, other)
    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise ValueError(
            f"cannot use the expression {self!r} as a Python bool; use tir.if_then_else, "
            "tir.all/any or compare constants with .value")

    def astype(self, dtype: str) -> "PrimExpr":
        return _op().cast(dtype, self)


def _compare_or_identity(a: "PrimExpr", b: Any, equal: bool):
    """``a == b`` builds an EQ node; where no comparison node can exist (a handle, a value of
    another kind) it falls back to identity, so ``x in tuple_of_exprs`` never raises."""
    if not isinstance(b, (PrimExpr, int, float)) or a.dtype == "handle" or \
            getattr(b, "dtype", None) == "handle":
        return (a is b) == equal
    try:
        return _op().eq(a, b) if equal else _op().ne(a, b)
    except TypeError:
        return (a is b) == equal


def _op():
    # tir.op imports this module; look it up lazily so operator methods can reach it.
    from workbench.tir import op
    return op


@node
class Var(PrimExpr):
    """A variable, compared by identity. ``dtype`` is ``"handle"`` for buffer data pointers."""

    name: str
    dtype: str = "int32"


@node
class SizeVar(Var):
    """A variable known to be non-negative (shape dimensions)."""


@node
class IntImm(PrimExpr):
    dtype: str
    value: int


@node
class FloatImm(PrimExpr):
    dtype: str
    value: float


@node
class StringImm(PrimExpr):
    value: str
    dtype: str = "handle"


@node
class BinaryOp(PrimExpr):
    a: PrimExpr
    b: PrimExpr
    dtype: str


@node
class Add(BinaryOp): pass
@node
class Sub(BinaryOp): pass
@node
class Mul(BinaryOp): pass
@node
class Div(BinaryOp):
    """Float division, or C-style truncating division for integers (``truncdiv``)."""
@node
class Mod(BinaryOp):
    """C-style remainder for integers (``truncmod``); ``fmod`` for floats."""
@node
class FloorDiv(BinaryOp): pass
@node
class FloorMod(BinaryOp): pass
@node
class Min(BinaryOp): pass
@node
class Max(BinaryOp): pass


@node
class CmpOp(BinaryOp):
    """Comparisons produce ``bool`` (or ``boolxN`` for vectors)."""


@node
class EQ(CmpOp):
    def __bool__(self) -> bool:
        return self.a is self.b
@node
class NE(CmpOp):
    def __bool__(self) -> bool:
        return self.a is not self.b
@node
class LT(CmpOp): pass
@node
class LE(CmpOp): pass
@node
class GT(CmpOp): pass
@node
class GE(CmpOp): pass
@node
class And(BinaryOp): pass
@node
class Or(BinaryOp): pass


@node
class Not(PrimExpr):
    a: PrimExpr
    dtype: str = "bool"


@node
class Cast(PrimExpr):
    dtype: str
    value: PrimExpr


@node
class Select(PrimExpr):
    """``condition ? true_value : false_value`` with both sides evaluated."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr
    dtype: str


@node
class BufferLoad(PrimExpr):
    buffer: Any  # workbench.tir.buffer.Buffer
    indices: tuple[PrimExpr, ...]
    dtype: str
    predicate: PrimExpr | None = None


@node
class Ramp(PrimExpr):
    """The vector ``base, base + stride, ..., base + (lanes - 1) * stride``."""

    base: PrimExpr
    stride: PrimExpr
    lanes: int
    dtype: str


@node
class Broadcast(PrimExpr):
    value: PrimExpr
    lanes: int
    dtype: str


@node
class Shuffle(PrimExpr):
    """Concatenate ``vectors`` and pick the lanes listed in ``indices``."""

    vectors: tuple[PrimExpr, ...]
    indices: tuple[int, ...]
    dtype: str


@node
class Let(PrimExpr):
    var: Var
    value: PrimExpr
    body: PrimExpr
    dtype: str


@node
class Call(PrimExpr):
    """An intrinsic call by name: ``exp``, ``sqrt``, ``if_then_else``, ``shift_left``, ..."""

    dtype: str
    op: str
    args: tuple[PrimExpr, ...]


@node
class Reduce(PrimExpr):
    """A reduction over ``axis`` used by te.compute before create_prim_func turns it into a block.

    ``combiner`` is a :class:`workbench.te.CommReducer`; ``value_index`` picks one result of a
    multi-value reducer (argmax keeps index and value).
    """

    combiner: Any
    source: tuple[PrimExpr, ...]
    axis: tuple[Any, ...]  # IterVar
    condition: PrimExpr
    value_index: int
    dtype: str
    init: tuple[PrimExpr, ...] = ()


def is_const_int(e: Any, value: int | None = None) -> bool:
    return isinstance(e, IntImm) and (value is None or e.value == value)


def const_value(e: Any):
    """The Python value of an IntImm/FloatImm, else ``None``."""
    if isinstance(e, (IntImm, FloatImm)):
        return e.value
    return None


def dtype_of(e: PrimExpr) -> _dt.DataType:
    return _dt.parse(e.dtype)


def expr_children(e: Node) -> Iterator[PrimExpr]:
    """The expressions directly inside ``e`` (its PrimExpr fields and the PrimExprs of its tuple
    fields, in field order): the step of a walk over an expression with an explicit stack."""
    for name in field_names(type(e)):
        v = getattr(e, name)
        if isinstance(v, PrimExpr):
            yield v
        elif isinstance(v, tuple):
            yield from (x for x in v if isinstance(x, PrimExpr))
