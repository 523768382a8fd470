"""``R``: the Relax names of TVMScript (``from workbench.script import relax as R``).

Struct info (``R.Tensor((n, 4), "float32")``, ``R.Tuple``, ``R.Shape``, ``R.Object``,
``R.Prim``, ``R.Callable``), scopes (``R.dataflow()``, ``R.output``), bindings helpers
(``R.match_cast``, ``R.func_attr``, ``R.const``, ``R.shape``, ``R.prim_value``, ``R.str``,
``R.call_packed``) and every registered Relax op: ``R.<name>`` / ``R.nn.<name>`` resolve
through the op registry, so any op the printer writes reads back without a hand list.
"""
from __future__ import annotations

import builtins as _b
import contextvars
import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from workbench.relax.expr import (
    Call as _Call, Constant as _Constant, Expr, ExternFunc as _ExternFunc,
    PrimValue as _PrimValue, ShapeExpr as _ShapeExpr, StringImm as _StringImm,
    Tuple as _TupleExpr, const as _const,
)
from workbench.relax.op.registry import get_op, list_ops, op_constructor
from workbench.relax.struct_info import (
    FuncStructInfo, ObjectStructInfo, PrimStructInfo, ShapeStructInfo, StructInfo,
    TensorStructInfo, TupleStructInfo,
)
from workbench.script.parser.core import Directive
from workbench.tir.expr import PrimExpr, Var as _TirVar

# While a function is parsed, string dims ("n") name one symbolic var per function.
_STRING_DIMS: contextvars.ContextVar[Callable[[str], PrimExpr] | None] = \
    contextvars.ContextVar("workbench_script_string_dims", default=None)


def function(func: Callable | None = None, *, pure: bool = True, private: bool = False) -> Any:
    """Parse the decorated function's source into a Relax ``Function`` (TVM's ``R.function``).

    ``pure=False`` marks side effects; ``private=True`` leaves out ``global_symbol``.
    """
    def deco(f: Callable) -> Any:
        from workbench.script.parser.entry import deferred_or_parse
        return deferred_or_parse(f, "relax", pure=pure, private=private)
    return deco(func) if func is not None else deco


# ---- struct info ------------------------------------------------------------------------------


def _dim(v: Any) -> Any:
    if isinstance(v, _b.str):
        hook = _STRING_DIMS.get()
        return hook(v) if hook is not None else _TirVar(v, "int64")
    return v


def Tensor(shape: Any = None, dtype: str | None = None, ndim: int = -1) -> TensorStructInfo:
    """``R.Tensor((n, 4), "float32")``; a name as a dim (``"n"``) is a symbolic var."""
    if isinstance(shape, _b.str) and dtype is None and shape in _DTYPE_WORDS:
        shape, dtype = None, shape  # R.Tensor("float32"): TVM accepts the dtype alone
    if isinstance(shape, (ShapeStructInfo,)):
        shape = shape.values
    if isinstance(shape, _ShapeExpr):
        shape = shape.values
    if shape is not None and not isinstance(shape, (list, _b.tuple)):
        raise TypeError(f"R.Tensor: the shape must be a tuple or list, got {shape!r}")
    values = None if shape is None else _b.tuple(_dim(v) for v in shape)
    return TensorStructInfo(values, dtype or "", ndim)


_DTYPE_WORDS = {"float16", "float32", "float64", "bfloat16", "int8", "int16", "int32", "int64",
                "uint8", "uint16", "uint32", "uint64", "bool"}


def Shape(values: Any = None, ndim: int = -1) -> ShapeStructInfo:
    """``R.Shape([n, 4])`` or ``R.Shape(ndim=2)``."""
    vals = None if values is None else _b.tuple(_dim(v) for v in values)
    return ShapeStructInfo(vals, ndim)


def Tuple(*fields: Any) -> TupleStructInfo:
    """``R.Tuple(R.Tensor(...), ...)``: a tuple's struct info."""
    if len(fields) == 1 and isinstance(fields[0], (list, _b.tuple)):
        fields = _b.tuple(fields[0])
    return TupleStructInfo(_b.tuple(as_struct_info(f) for f in fields))


def Object() -> ObjectStructInfo:
    return ObjectStructInfo()


def Prim(dtype: str = "int64", value: Any = None) -> PrimStructInfo:
    if value is not None and not isinstance(value, PrimExpr):
        from workbench.tir import op as tir_op
        value = tir_op.convert(value)
    return PrimStructInfo(value.dtype if value is not None else dtype, value)


def Callable_(params: Any = None, ret: Any = None, purity: bool = True) -> FuncStructInfo:
    ps = None if params is None or params is Ellipsis else \
        _b.tuple(as_struct_info(p) for p in params)
    return FuncStructInfo(ps, as_struct_info(ret) if ret is not None else ObjectStructInfo(),
                          purity)


globals()["Callable"] = Callable_

# A bare ``R.Tensor`` / ``R.Object`` / ``R.Shape`` annotation means "any such value".
_BARE: dict[Any, Callable[[], StructInfo]] = {
    Tensor: Tensor, Shape: Shape, Object: Object, Tuple: Tuple, Prim: Prim,
}


def as_struct_info(v: Any) -> StructInfo:
    """A struct info from an annotation value (``R.Tensor`` alone included)."""
    if isinstance(v, StructInfo):
        return v
    maker = _BARE.get(v) if callable(v) else None
    if maker is not None:
        return maker()
    raise TypeError(f"expected a struct info annotation such as R.Tensor((2, 3), 'float32'), "
                    f"got {v!r}")


# ---- directives -------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataflowScope(Directive):
    """``with R.dataflow():``."""


@dataclass(frozen=True)
class Output(Directive):
    vars: tuple[Any, ...]


@dataclass(frozen=True)
class FuncAttr(Directive):
    attrs: dict


@dataclass(frozen=True)
class MatchCastSpec(Directive):
    value: Any
    struct_info: StructInfo


def dataflow() -> DataflowScope:
    return DataflowScope()


def output(*vars: Any) -> Output:
    return Output(vars)


def func_attr(attrs: dict) -> FuncAttr:
    return FuncAttr(dict(attrs))


def match_cast(value: Any, struct_info: Any) -> MatchCastSpec:
    return MatchCastSpec(value, as_struct_info(struct_info))


# ---- values -----------------------------------------------------------------------------------


def const(value: Any, dtype: str | None = None) -> _Constant:
    return _const(value, dtype)


def shape(values: Sequence[Any]) -> _ShapeExpr:
    return _ShapeExpr(_b.tuple(_dim(v) for v in values))


def prim_value(value: Any) -> _PrimValue:
    from workbench.tir import op as tir_op
    return _PrimValue(tir_op.convert(value))


def str(value: Any) -> _StringImm:  # noqa: A001 - TVMScript's name
    return _StringImm(value)


def dtype(value: Any) -> Any:
    """A dtype as a Relax value (``relax.DataTypeImm``; VM shape checks pass them)."""
    from workbench.relax.transform.lowered_ops import DataTypeImm
    return DataTypeImm(value)


def null_value() -> Any:
    """The VM's void value (``relax.NullValue``, not a call of the ``relax.null_value`` op:
    that is what the printer writes for the node)."""
    from workbench.relax.transform.lowered_ops import NullValue
    return NullValue()


def tuple(*fields: Any) -> _TupleExpr:  # noqa: A001
    return _TupleExpr(fields)


def ExternFunc(name: Any) -> _ExternFunc:
    return _ExternFunc(name)


def call_packed(name: Any, *args: Any, sinfo_args: Any = None) -> _Call:
    """A call of the packed function registered as ``name``."""
    sinfo = () if sinfo_args is None else (
        (sinfo_args,) if isinstance(sinfo_args, StructInfo) else
        _b.tuple(as_struct_info(s) for s in sinfo_args))
    return _Call(_ExternFunc(name), _b.tuple(_as_arg(a) for a in args), {}, sinfo)


def _as_arg(a: Any) -> Any:
    if isinstance(a, Expr):
        return a
    if isinstance(a, (list, _b.tuple)):
        return _TupleExpr(_b.tuple(_as_arg(x) for x in a))
    if isinstance(a, (int, float, bool, np.generic)):
        return _const(a)
    return a


# ---- ops, by registry name --------------------------------------------------------------------


def _attr_value(v: Any) -> Any:
    """An op attribute as printed (tuples print as lists) back in its stored form."""
    if isinstance(v, list):
        return _b.tuple(_attr_value(x) for x in v)
    return v


class OpCaller:
    """``R.<op>(...)``: the op's constructor when it takes these arguments, else a plain call
    of the registered op with the keywords as its attributes."""

    def __init__(self, name: Any) -> None:
        self.name = name
        self.__name__ = "R." + name[len("relax."):]

    def _constructor(self) -> Callable | None:
        return op_constructor(self.name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        args = _b.tuple(_as_arg(a) for a in args)
        attrs = {k: _attr_value(v) for k, v in kwargs.items()}
        make = self._constructor()
        if make is not None:
            sig = inspect.signature(make)
            known = {k: v for k, v in kwargs.items() if k in sig.parameters}
            try:  # the arguments the constructor knows must fit it
                sig.bind(*args, **known)
            except TypeError as exc:
                raise TypeError(f"wrong arguments to {self.__name__}: {exc}") from None
            if len(known) == len(kwargs):
                call = make(*args, **kwargs)
                if isinstance(call, _Call) and getattr(call.op, "name", None) == self.name:
                    # A scalar written for a sequence attribute (inplace_indices=0) is the
                    # constructor's to normalise: it stored the tuple.
                    given = {k: v for k, v in attrs.items() if k in call.attrs and not (
                        isinstance(call.attrs[k], _b.tuple) and not isinstance(v, _b.tuple))}
                    if given:
                        call = call.replace(attrs={**call.attrs, **given})
                return call
        # A registered-only op's result comes from its sinfo_args (the printer writes them).
        sinfo = attrs.pop("sinfo_args", None)
        sinfo = () if sinfo is None else _b.tuple(as_struct_info(x) for x in (
            (sinfo,) if isinstance(sinfo, StructInfo) else sinfo))
        return _Call(get_op(self.name), args, attrs, sinfo)

    def __repr__(self) -> str:
        return self.__name__


class OpNamespace:
    """``R.nn``, ``R.image``, ...: ops whose registered names share a prefix."""

    def __init__(self, prefix: Any) -> None:
        self._prefix = prefix

    def __getattr__(self, name: Any) -> Any:
        return _lookup(self._prefix + name)


@functools.lru_cache(maxsize=None)  # found names only: a miss raises, and is not kept
def _lookup(full: Any) -> Any:
    ops = list_ops()
    if full in ops:
        return OpCaller(full)
    if any(o.startswith(full + ".") for o in ops):
        return OpNamespace(full + ".")
    raise AttributeError(f"R has no op {full[len('relax.'):]!r}")


def __getattr__(name: Any) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    return _lookup("relax." + name)


__all__ = ["function", "Tensor", "Shape", "Tuple", "Object", "Prim", "Callable",
           "as_struct_info", "dataflow", "output", "func_attr", "match_cast", "const", "shape",
           "prim_value", "str", "dtype", "null_value", "tuple", "ExternFunc", "call_packed", "OpCaller", "OpNamespace",
           "DataflowScope", "Output", "FuncAttr", "MatchCastSpec"]
