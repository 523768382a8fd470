"""Relax expressions, bindings and functions (TVM's ``relax.Expr`` family).

Every expression node has a ``struct_info`` field: ``None`` until the BlockBuilder normalises
the expression (``bb.normalize`` / ``bb.emit``), then the inferred
:class:`~workbench.relax.struct_info.StructInfo`. Vars carry the struct info given when they are
made. Nodes are frozen ``@node`` dataclasses compared by identity; ``structural_equal`` maps
variables (``workbench.relax.structural_rules`` declares which fields define them).

A normalised function is in A-normal form: the body is a :class:`SeqExpr` of binding blocks
whose bindings bind a Var to one non-nested expression (call arguments are leaves: Vars,
Constants, ShapeExprs, PrimValues, or Tuples of those), and ``SeqExpr.body`` is a leaf.
"""
from __future__ import annotations

import base64
from typing import Any, Mapping, Sequence

import numpy as np

from workbench.ir.module import GlobalVar
from workbench.ir.node import NO_VALUE, FrozenDict, Node, attrs_with, frozen, merge_attrs, node
from workbench.relax.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo, as_dims,
)
from workbench.tir.expr import FloatImm, IntImm, PrimExpr


def _set(obj: Any, name: str, value: Any) -> None:
    object.__setattr__(obj, name, value)


class Expr(Node):
    """Base class of Relax expressions. Arithmetic operators build op calls, as in TVM."""

    __slots__ = ()
    struct_info: StructInfo | None

    def _op(self):
        from workbench.relax import op
        return op

    def __add__(self, other: Any) -> "Call": return self._op().add(self, _lift(other))
    def __radd__(self, other: Any) -> "Call": return self._op().add(_lift(other), self)
    def __sub__(self, other: Any) -> "Call": return self._op().subtract(self, _lift(other))
    def __rsub__(self, other: Any) -> "Call": return self._op().subtract(_lift(other), self)
    def __mul__(self, other: Any) -> "Call": return self._op().multiply(self, _lift(other))
    def __rmul__(self, other: Any) -> "Call": return self._op().multiply(_lift(other), self)
    def __truediv__(self, other: Any) -> "Call": return self._op().divide(self, _lift(other))
    def __neg__(self) -> "Call": return self._op().negative(self)

    def __getitem__(self, index: int) -> "TupleGetItem":
        return TupleGetItem(self, index)

    def astype(self, dtype: str) -> "Call":
        return self._op().astype(self, dtype)

    def script(self) -> str:
        from workbench.ir.printer import script
        return script(self)

    def show(self, style: str | None = None, black_format: bool = False) -> None:
        """Print the expression's script, highlighted when Pygments is installed."""
        from workbench.ir.highlight import cprint
        cprint(self.script(), style=style, black_format=black_format)

    def __str__(self) -> str:
        return self.script()


def _lift(v: Any) -> "Expr":
    """A Python number next to a Relax value becomes a scalar constant."""
    if isinstance(v, Expr):
        return v
    if isinstance(v, (int, float, bool, np.generic)):
        return const(v)
    raise TypeError(f"cannot use {v!r} ({type(v).__name__}) as a Relax expression")


# ---- leaves -----------------------------------------------------------------------------------

@node
class Var(Expr):
    """A variable bound by a function parameter or a binding; compared by identity."""

    name_hint: str
    struct_info: StructInfo | None = None

    __hash__ = object.__hash__

    def __post_init__(self) -> None:
        if not isinstance(self.name_hint, str):
            raise TypeError(f"Var: name_hint must be a str, got {self.name_hint!r}")
        if self.struct_info is not None and not isinstance(self.struct_info, StructInfo):
            raise TypeError(f"Var {self.name_hint!r}: struct_info must be a StructInfo "
                            f"(e.g. relax.TensorStructInfo((2, 3), 'float32')), "
                            f"got {self.struct_info!r}")


@node
class DataflowVar(Var):
    """A variable local to a dataflow block (not visible after it)."""


@node
class TensorValue(Node):
    """The value of a Constant: dtype, shape and the raw little-endian bytes.

    Constants compare by value (``structural_equal`` compares the bytes, ``structural_hash``
    digests them) and survive ``save_json`` / ``load_json`` (as base64 text). Raw bytes, not
    text, so a model's weights (hundreds of MB) are not re-encoded on every use; a base64
    ``payload`` (older JSON) is decoded on construction.
    """

    dtype: str
    shape: tuple[int, ...]
    payload: bytes

    def __post_init__(self) -> None:
        if isinstance(self.payload, str):
            _set(self, "payload", base64.b64decode(self.payload))
        elif not isinstance(self.payload, bytes):
            _set(self, "payload", bytes(self.payload))

    @staticmethod
    def from_numpy(arr: np.ndarray) -> "TensorValue":
        # np.asarray keeps 0-d arrays 0-d (np.ascontiguousarray would make them 1-d).
        arr = np.asarray(arr)
        if arr.dtype.byteorder == ">":
            arr = arr.astype(arr.dtype.newbyteorder("<"))
        return TensorValue(str(arr.dtype), tuple(int(s) for s in arr.shape),
                           np.ascontiguousarray(arr).tobytes() if arr.ndim else arr.tobytes())

    def numpy(self) -> np.ndarray:
        """A fresh (writable) array of the value."""
        from workbench.runtime.ndarray import numpy_dtype
        return np.frombuffer(self.payload, dtype=numpy_dtype(self.dtype)).reshape(self.shape).copy()

    asnumpy = numpy

    @property
    def ndim(self) -> int:
        return len(self.shape)


@node
class Constant(Expr):
    """A constant tensor. ``Constant(np_array_or_NDArray)``; ``.data.numpy()`` gives it back."""

    data: Any  # TensorValue after construction
    struct_info: StructInfo | None = None

    def __post_init__(self) -> None:
        data = self.data
        if not isinstance(data, TensorValue):
            arr = data.numpy() if hasattr(data, "numpy") and not isinstance(data, np.ndarray) \
                else np.asarray(data)
            data = TensorValue.from_numpy(arr)
            _set(self, "data", data)
        if self.struct_info is None:
            _set(self, "struct_info", TensorStructInfo(data.shape, data.dtype))


def const(value: Any, dtype: str | None = None) -> Constant:
    """A constant from a number, a nested list, a numpy array or an NDArray (TVM's ``relax.const``).

    Without ``dtype``, Python floats become float32 and ints int32, as in TVM.
    """
    if hasattr(value, "numpy") and not isinstance(value, np.ndarray):
        value = value.numpy()
    arr = np.array(value, dtype=dtype)
    if dtype is None:
        if arr.dtype == np.float64 and not isinstance(value, np.ndarray):
            arr = arr.astype("float32")
        elif arr.dtype == np.int64 and not isinstance(value, np.ndarray):
            arr = arr.astype("int32")
    return Constant(arr)


@node
class PrimValue(Expr):
    """A scalar TIR value used as a Relax value (``R.prim_value``)."""

    value: PrimExpr
    struct_info: StructInfo | None = None

    def __post_init__(self) -> None:
        v = self.value
        if isinstance(v, bool):
            v = IntImm("bool", int(v))
        elif isinstance(v, int):
            v = IntImm("int64", v)
        elif isinstance(v, float):
            v = FloatImm("float64", v)
        _set(self, "value", v)
        if self.struct_info is None:
            _set(self, "struct_info", PrimStructInfo(v.dtype, v))


@node
class StringImm(Expr):
    """A string value (``R.str``)."""

    value: str
    struct_info: StructInfo | None = None

    def __post_init__(self) -> None:
        if self.struct_info is None:
            _set(self, "struct_info", ObjectStructInfo())


@node
class ShapeExpr(Expr):
    """A shape tuple of int64 TIR expressions (``R.shape([n, 8])``); iterable like a tuple."""

    values: tuple[PrimExpr, ...]
    struct_info: StructInfo | None = None

    def __post_init__(self) -> None:
        _set(self, "values", as_dims(self.values, "ShapeExpr"))
        if self.struct_info is None:
            _set(self, "struct_info", ShapeStructInfo(self.values))

    def __getitem__(self, i: int) -> PrimExpr:  # type: ignore[override]
        return self.values[i]

    def __len__(self) -> int:
        return len(self.values)

    def __iter__(self):
        return iter(self.values)


@node
class ExternFunc(Expr):
    """A function found by name at run time (a PackedFunc registered with the runtime)."""

    global_symbol: str
    struct_info: StructInfo | None = None


@node
class Op(Expr):
    """A primitive operator, by its registered name (``relax.add``). Get one with ``Op.get``."""

    name: str
    struct_info: StructInfo | None = None

    @staticmethod
    def get(name: str) -> "Op":
        from workbench.relax.op.registry import get_op
        return get_op(name)


# ---- compound expressions ---------------------------------------------------------------------

@node
class Tuple(Expr):
    """A tuple of values (``(a, b)``)."""

    fields: tuple[Expr, ...]
    struct_info: StructInfo | None = None

    def __post_init__(self) -> None:
        _set(self, "fields", tuple(self.fields))
        if self.struct_info is None and all(f.struct_info is not None for f in self.fields):
            _set(self, "struct_info", TupleStructInfo(tuple(f.struct_info for f in self.fields)))

    def __len__(self) -> int:
        return len(self.fields)


@node
class TupleGetItem(Expr):
    """Field ``index`` of a tuple value (``t[0]``)."""

    tuple_value: Expr
    index: int
    struct_info: StructInfo | None = None


@node
class Call(Expr):
    """A call of an Op, a GlobalVar (a function of the module), an ExternFunc or a Var.

    ``attrs`` are the op's attributes (plain values, in a FrozenDict); ``sinfo_args`` are struct
    infos the op needs to know its result (``call_tir``'s output). ``span`` (a
    :class:`workbench.relax.span.Span` or None) says which operations of an imported model the
    call implements; it takes no part in structural equality and passes carry it along.
    """

    op: Any  # Op | GlobalVar | ExternFunc | Var
    args: tuple[Expr, ...] = ()
    attrs: FrozenDict = FrozenDict()
    sinfo_args: tuple[StructInfo, ...] = ()
    struct_info: StructInfo | None = None
    span: Any = None  # workbench.relax.span.Span | None

    def __post_init__(self) -> None:
        _set(self, "args", tuple(self.args))
        _set(self, "attrs", frozen(self.attrs))
        _set(self, "sinfo_args", tuple(self.sinfo_args))


@node
class If(Expr):
    """``if cond: true_branch else: false_branch``; branches are SeqExprs after normalisation."""

    cond: Expr
    true_branch: Expr
    false_branch: Expr
    struct_info: StructInfo | None = None


# ---- bindings, blocks, sequences, functions ---------------------------------------------------

class Binding(Node):
    """Base class of bindings: ``var`` is defined by the binding."""

    __slots__ = ()
    var: Var


@node
class VarBinding(Binding):
    """``var = value``."""

    var: Var
    value: Expr


@node
class MatchCast(Binding):
    """``var = R.match_cast(value, struct_info)``: check ``value`` against ``struct_info`` at run
    time and define the symbolic dims that appear there for the first time."""

    var: Var
    value: Expr
    struct_info: StructInfo


@node
class BindingBlock(Node):
    """A list of bindings run in order."""

    bindings: tuple[Binding, ...]

    def __post_init__(self) -> None:
        _set(self, "bindings", tuple(self.bindings))


@node
class DataflowBlock(BindingBlock):
    """A binding block without side effects; DataflowVars in it are local to it."""


@node
class SeqExpr(Expr):
    """Binding blocks followed by a result expression."""

    blocks: tuple[BindingBlock, ...]
    body: Expr
    struct_info: StructInfo | None = None

    def __post_init__(self) -> None:
        _set(self, "blocks", tuple(self.blocks))
        if self.struct_info is None and self.body.struct_info is not None:
            _set(self, "struct_info", self.body.struct_info)


@node
class Function(Expr):
    """A Relax function: parameters (Vars with struct info), a body and the result struct info.

    ``attrs`` hold ``global_symbol`` for public functions (and ``num_input`` from the nn
    frontend). ``is_pure=False`` marks functions with side effects.
    """

    params: tuple[Var, ...]
    body: Expr
    ret_struct_info: StructInfo | None = None
    is_pure: bool = True
    attrs: FrozenDict = FrozenDict()
    struct_info: StructInfo | None = None

    def __post_init__(self) -> None:
        _set(self, "params", tuple(self.params))
        _set(self, "attrs", frozen(self.attrs))
        if self.ret_struct_info is None and self.body.struct_info is not None:
            _set(self, "ret_struct_info", self.body.struct_info)
        if self.struct_info is None:
            ret = self.ret_struct_info or ObjectStructInfo()
            params = tuple(p.struct_info or ObjectStructInfo() for p in self.params)
            _set(self, "struct_info", FuncStructInfo(params, ret, self.is_pure))

    def with_attr(self, key_or_dict: Any, value: Any = NO_VALUE) -> "Function":
        """A copy with attribute ``key`` set to ``value``, or with every entry of a dict set
        (TVM's ``with_attr(key, value)`` and ``with_attr({key: value, ...})``)."""
        return self.replace(attrs=attrs_with(self.attrs, key_or_dict, value,
                                             "relax.Function.with_attr"))

    def with_attrs(self, attrs: Mapping[str, Any]) -> "Function":
        """A copy with every ``key: value`` of ``attrs`` set."""
        return self.replace(attrs=merge_attrs(self.attrs, attrs, "relax.Function.with_attrs"))

    def without_attr(self, key: str) -> "Function":
        """A copy without attribute ``key`` (unchanged if it has none)."""
        return self.replace(attrs=self.attrs.without(key))

    def script(self, name: str | None = None) -> str:
        from workbench.relax.printer import function_text
        return function_text(self, name or self.attrs.get("global_symbol", "main"))

    def show(self, style: str | None = None, black_format: bool = False,
             name: str | None = None) -> None:
        """Print the function's script, highlighted when Pygments is installed."""
        from workbench.ir.highlight import cprint
        cprint(self.script(name), style=style, black_format=black_format)

    def _repr_html_(self) -> str:
        from workbench.ir.printer import html_highlight
        return html_highlight(self.script())


# ---- classification -----------------------------------------------------------------------------

LEAF_TYPES = (Var, Constant, ShapeExpr, PrimValue, StringImm, Op, ExternFunc, GlobalVar)


def is_leaf(e: Any) -> bool:
    """True for expressions that may appear as call arguments without a binding: leaves and
    tuples of leaves (TVM's ``IsLeafOrTuple``)."""
    if isinstance(e, Tuple):
        return all(is_leaf(f) for f in e.fields)
    return isinstance(e, LEAF_TYPES) or isinstance(e, _EXTRA_LEAVES)


# Leaf nodes defined above this module (the VM-form values of relax.transform.lowered_ops).
_EXTRA_LEAVES: tuple[type, ...] = ()


def register_leaf_type(cls: type) -> None:
    """Make ``cls`` a leaf for :func:`is_leaf` (TVM's LeafExpr subclasses defined elsewhere,
    e.g. ``DataTypeImm``): normalisation then keeps it inline as a call argument."""
    global _EXTRA_LEAVES
    if cls not in _EXTRA_LEAVES:
        _EXTRA_LEAVES = _EXTRA_LEAVES + (cls,)


def get_struct_info(e: Any) -> StructInfo:
    """The struct info of a normalised expression; raises when it has none yet."""
    si = getattr(e, "struct_info", None)
    if si is None:
        raise ValueError(f"{type(e).__name__} has no struct info yet; normalise it first "
                         f"(BlockBuilder.normalize or BlockBuilder.emit)")
    return si


def tuple_fields(e: Expr) -> Sequence[Expr]:
    """The fields of a tuple expression (a Tuple node)."""
    if isinstance(e, Tuple):
        return e.fields
    raise TypeError(f"expected a relax.Tuple, got {type(e).__name__}")


__all__ = ["Expr", "Var", "DataflowVar", "Constant", "TensorValue", "const", "PrimValue",
           "StringImm", "ShapeExpr", "ExternFunc", "Op", "Tuple", "TupleGetItem", "Call", "If",
           "Binding", "VarBinding", "MatchCast", "BindingBlock", "DataflowBlock", "SeqExpr",
           "Function", "GlobalVar", "is_leaf", "get_struct_info", "LEAF_TYPES"]
