"""``T``: the TIR names of TVMScript (``from workbench.script import tir as T``).

Inside a ``@T.prim_func`` these names are read by the parser, never run as Python. They are
also plain functions that build IR (``T.int64()`` makes a symbolic var, ``T.Buffer(...)`` a
buffer), because Python evaluates annotations and module-level code such as
``n = T.int64(); R.Tensor((n, 4))`` before any parsing happens.

Expressions build nodes as written, without folding (``T.int64(2) + T.int64(3)`` stays an
``Add``), so a printed function reads back structurally equal.
"""
from __future__ import annotations

import builtins as _b
import contextvars
import re
from typing import Any, Callable, Sequence

from workbench.ir import dtype as dt
from workbench.script.tir_directives import (
    AllocateSpec, AllocBuffer, AttrScope, Axis, AxisRemap, BlockAttr, BlockScope,
    DeclBufferSpec, FuncAttr, Grid, InitScope, LoopSpec, MatchBuffer, Reads, Where, Writes,
)
from workbench.tir import op as _op
from workbench.tir.buffer import Buffer as _Buffer
from workbench.tir.expr import (
    Broadcast as _BroadcastNode, Call, Cast as _CastNode, Div as _DivNode, FloatImm, FloorDiv, FloorMod, IntImm,
    Let as _LetNode, Max, Min, Mod, PrimExpr, Ramp as _RampNode, Select as _SelectNode,
    Shuffle as _ShuffleNode, SizeVar, Var,
)
from workbench.tir.stmt import Evaluate, IterType

# ---- the decorator ----------------------------------------------------------------------------


def prim_func(func: Callable | None = None, *, private: bool = False, check_well_formed: bool = True,
              s_tir: bool = True) -> Any:
    """Parse the decorated function's source into a ``PrimFunc`` (TVM's ``T.prim_func``).

    Inside an ``@I.ir_module`` class the function is parsed with the module (so it can refer to
    the module's other functions); ``private=True`` leaves out the ``global_symbol`` attr.
    ``check_well_formed`` and ``s_tir`` (newer TVM's printouts write it) are accepted as TVM's.
    """
    def deco(f: Callable) -> Any:
        from workbench.script.parser.entry import deferred_or_parse
        return deferred_or_parse(f, "tir", private=private)
    return deco(func) if func is not None else deco


# ---- scalar types: T.int32, T.float32(0.5), T.int64(), T.handle ------------------------------


class _ScalarType:
    """``T.<dtype>``: an annotation, a literal (``T.int64(3)``) or a new var (``T.int64()``)."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype
        self.__name__ = dtype

    def __call__(self, value: Any = None, is_size_var: bool = False) -> PrimExpr:
        if value is None:
            return SizeVar("", self.dtype) if is_size_var else Var("", self.dtype)
        if isinstance(value, PrimExpr):
            return value if value.dtype == self.dtype else _CastNode(self.dtype, value)
        t = dt.parse(self.dtype)
        if isinstance(value, str):  # non-finite floats print quoted: T.float32("inf")
            value = float(value)
        if t.lanes > 1:
            return _op.const(value, self.dtype)
        if t.is_float or t.is_bfloat:
            return FloatImm(self.dtype, float(value))
        if t.is_bool:
            return IntImm("bool", int(_b.bool(value)))
        if t.is_integer:
            if isinstance(value, float) and not value.is_integer():
                raise TypeError(f"T.{self.dtype}({value!r}): not an integer")
            return _op.const(int(value), self.dtype)
        raise TypeError(f"T.{self.dtype} cannot hold the value {value!r}")

    def __repr__(self) -> str:
        return f"T.{self.dtype}"


_SCALARS = ["bool", "handle", "void"] + [f"int{b}" for b in (8, 16, 32, 64)] + \
    [f"uint{b}" for b in (1, 8, 16, 32, 64)] + ["float16", "float32", "float64", "bfloat16"]
for _name in _SCALARS:
    globals()[_name] = _ScalarType(_name)
_VECTOR = re.compile(r"^(u?int\d+|float\d+|bfloat16|bool)x\d+$")


def __getattr__(name: str) -> Any:
    # Vector dtypes (T.float32x4) exist for every width; made on first use.
    if _VECTOR.match(name):
        t = _ScalarType(name)
        globals()[name] = t
        return t
    raise AttributeError(f"T has no name {name!r}")


def _dtype_arg(dtype: Any) -> str:
    """A dtype given as a string or as ``T.float32``; checked."""
    if isinstance(dtype, _ScalarType):
        return dtype.dtype
    if not isinstance(dtype, str):
        raise TypeError(f"a dtype must be a string such as 'float32', got {dtype!r}")
    try:
        return dt.normalize(dtype)
    except (ValueError, KeyError, TypeError):
        raise ValueError(f"unknown dtype {dtype!r} (expected e.g. 'float32', 'int64', "
                         "'float16')") from None


# ---- buffers ---------------------------------------------------------------------------------


# While a function is parsed, a dim written as a string ("n", as newer TVM prints buffer
# params) is the function's var of that name.
STRING_DIMS: contextvars.ContextVar[Callable[[str], PrimExpr] | None] = \
    contextvars.ContextVar("workbench_script_tir_string_dims", default=None)


def _shape(shape: Any) -> tuple[PrimExpr, ...]:
    if isinstance(shape, (int, PrimExpr, str)):
        shape = (shape,)
    out = []
    for s in shape:
        if isinstance(s, str):
            hook = STRING_DIMS.get()
            s = hook(s) if hook is not None else Var(s, "int32")
        e = _op.convert(s)
        if not dt.parse(e.dtype).is_integer:
            raise TypeError(f"buffer shape entries must be integers, got {s!r}")
        out.append(e)
    return tuple(out)


def _make_buffer(shape: Any, dtype: Any = "float32", data: Any = None, strides: Any = None,
                 elem_offset: Any = None, scope: str = "global", align: int = 64,
                 offset_factor: int = 1, buffer_type: str = "", axis_separators: Any = None,
                 name: str = "buffer") -> _Buffer:
    dtype = _dtype_arg(dtype)
    if data is None:
        data = Var(name, "handle")
    return _Buffer(data, dtype, _shape(shape), name,
                   tuple(_op.convert(s) for s in strides or ()),
                   None if elem_offset is None else _op.convert(elem_offset), scope,
                   align if align > 0 else 64, offset_factor if offset_factor > 0 else 1,
                   tuple(axis_separators or ()))


def Buffer(shape: Any, dtype: Any = "float32", data: Any = None, strides: Any = None,
           elem_offset: Any = None, scope: str = "global", align: int = 64,
           offset_factor: int = 1, buffer_type: str = "", axis_separators: Any = None
           ) -> _Buffer:
    """A buffer parameter's annotation: ``A: T.Buffer((128, 128), "float32")``."""
    return _make_buffer(shape, dtype, data, strides, elem_offset, scope, align, offset_factor,
                        buffer_type, axis_separators)


def match_buffer(param: Any, shape: Any, dtype: Any = "float32", data: Any = None,
                 strides: Any = None, elem_offset: Any = None, scope: str = "global",
                 align: int = 64, offset_factor: int = 1, buffer_type: str = "",
                 axis_separators: Any = None) -> MatchBuffer:
    """``A = T.match_buffer(a, shape, dtype)``: bind a handle parameter (or, in a block, a
    buffer region) to a buffer."""
    return MatchBuffer(param, _make_buffer(shape, dtype, data, strides, elem_offset, scope,
                                           align, offset_factor, buffer_type, axis_separators))


def alloc_buffer(shape: Any, dtype: Any = "float32", data: Any = None, strides: Any = None,
                 elem_offset: Any = None, scope: str = "global", align: int = 64,
                 offset_factor: int = 1, buffer_type: str = "", axis_separators: Any = None
                 ) -> AllocBuffer:
    """``X = T.alloc_buffer(shape, dtype)``: a buffer allocated by the enclosing block."""
    return AllocBuffer(_make_buffer(shape, dtype, data, strides, elem_offset, scope, align,
                                    offset_factor, buffer_type, axis_separators))


sblock_alloc_buffer = alloc_buffer  # newer TVM's name


def decl_buffer(shape: Any, dtype: Any = "float32", data: Any = None, strides: Any = None,
                elem_offset: Any = None, scope: str = "global", align: int = 64,
                offset_factor: int = 1, buffer_type: str = "", axis_separators: Any = None
                ) -> DeclBufferSpec:
    """``X = T.decl_buffer(shape, dtype, data=ptr)``: declares a buffer for the rest of the body."""
    return DeclBufferSpec(_make_buffer(shape, dtype, None, strides, elem_offset, scope, align,
                                       offset_factor, buffer_type, axis_separators), data)


def allocate(extents: Sequence[Any], dtype: Any, scope: str = "global", condition: Any = True,
             annotations: dict | None = None) -> AllocateSpec:
    """``ptr = T.allocate([n], "float32")``: raw storage for the rest of the body."""
    return AllocateSpec(tuple(extents), _dtype_arg(dtype), condition, dict(annotations or {}))


# ---- loops and blocks ------------------------------------------------------------------------


def _loop(kind: str) -> Callable[..., LoopSpec]:
    def make(start: Any, stop: Any = None, *, annotations: dict | None = None,
             thread: str | None = None) -> LoopSpec:
        if stop is None:
            start, stop = None, start
        return LoopSpec(start, stop, kind, thread, annotations)
    make.__name__ = kind
    make.__doc__ = f"``for i in T.{kind}(start, stop)``: a {kind} loop."
    return make


serial = _loop("serial")
parallel = _loop("parallel")
vectorized = _loop("vectorized")
unroll = _loop("unroll")
thread_binding = _loop("thread_binding")


def grid(*extents: Any) -> Grid:
    """``for i, j in T.grid(m, n)``: perfectly nested serial loops."""
    return Grid(tuple(LoopSpec(None, e) for e in extents))


def block(name: str = "", no_realize: bool = False) -> BlockScope:
    """``with T.block("name"):`` a block (TVM's newer spelling is ``T.sblock``)."""
    return BlockScope(name, no_realize)


sblock = block


def init() -> InitScope:
    """``with T.init():`` the initialisation of a reduction block."""
    return InitScope()


def attr(node: Any, attr_key: str, value: Any) -> AttrScope:
    return AttrScope(node, attr_key, value)


class _AxisNamespace:
    """``T.axis``: block iteration variables."""

    @staticmethod
    def spatial(dom: Any, binding: Any = None, dtype: str | None = None) -> Axis:
        return Axis(IterType.DATA_PAR, dom, binding, dtype)

    @staticmethod
    def reduce(dom: Any, binding: Any = None, dtype: str | None = None) -> Axis:
        return Axis(IterType.COMM_REDUCE, dom, binding, dtype)

    @staticmethod
    def scan(dom: Any, binding: Any = None, dtype: str | None = None) -> Axis:
        return Axis(IterType.ORDERED, dom, binding, dtype)

    @staticmethod
    def opaque(dom: Any, binding: Any = None, dtype: str | None = None) -> Axis:
        return Axis(IterType.OPAQUE, dom, binding, dtype)

    @staticmethod
    def remap(kinds: str, bindings: Sequence[Any]) -> AxisRemap:
        if not isinstance(kinds, str) or set(kinds) - set("SR"):
            raise ValueError(f"T.axis.remap: kinds must be a string of 'S' and 'R', "
                             f"got {kinds!r}")
        if len(kinds) != len(bindings):
            raise ValueError(f"T.axis.remap: {len(kinds)} kinds but {len(bindings)} loop vars")
        return AxisRemap(kinds, tuple(bindings))

    S, R = "S", "R"


axis = _AxisNamespace()


def reads(*regions: Any) -> Reads:
    return Reads(_flat(regions))


def writes(*regions: Any) -> Writes:
    return Writes(_flat(regions))


def _flat(regions: Sequence[Any]) -> tuple[Any, ...]:
    out: list[Any] = []
    for r in regions:
        out.extend(r) if isinstance(r, (list, tuple)) else out.append(r)
    return tuple(out)


def where(predicate: Any) -> Where:
    return Where(predicate)


def block_attr(annotations: dict) -> BlockAttr:
    return BlockAttr(dict(annotations))


def func_attr(attrs: dict) -> FuncAttr:
    return FuncAttr(dict(attrs))


def evaluate(value: Any) -> Evaluate:
    return Evaluate(_op.convert(value))


def meta_var(value: Any) -> Any:
    """TVM's marker for a Python value used inside a script; values are already Python here."""
    return value


# ---- expressions (built as written, not folded) -----------------------------------------------


def _pair(a: Any, b: Any) -> tuple[PrimExpr, PrimExpr]:
    if isinstance(a, PrimExpr) and isinstance(b, PrimExpr) and a.dtype == b.dtype:
        return a, b
    return _op.match_types(a, b)


def binary(cls: type, a: Any, b: Any) -> PrimExpr:
    """``cls(a, b)`` with Python numbers taking the other side's dtype; no folding."""
    a, b = _pair(a, b)
    return cls(a, b, a.dtype)


def max(a: Any, b: Any) -> PrimExpr:  # noqa: A001 - TVMScript's name
    return binary(Max, a, b)


def min(a: Any, b: Any) -> PrimExpr:  # noqa: A001
    return binary(Min, a, b)


def Div(a: Any, b: Any) -> PrimExpr:
    return binary(_DivNode, a, b)


truncdiv = Div


def truncmod(a: Any, b: Any) -> PrimExpr:
    return binary(Mod, a, b)


def floordiv(a: Any, b: Any) -> PrimExpr:
    return binary(FloorDiv, a, b)


def floormod(a: Any, b: Any) -> PrimExpr:
    return binary(FloorMod, a, b)


def ceildiv(a: Any, b: Any) -> PrimExpr:
    a, b = _pair(a, b)
    return FloorDiv(a + b - 1, b, a.dtype)


def Cast(dtype: Any, value: Any) -> PrimExpr:
    return _CastNode(_dtype_arg(dtype), _op.convert(value))


def cast(value: Any, dtype: Any) -> PrimExpr:
    """TVM's ``T.cast(value, dtype)`` (note the order; ``T.Cast`` takes the dtype first)."""
    return _op.cast(_dtype_arg(dtype), value)


def Select(condition: Any, true_value: Any, false_value: Any) -> PrimExpr:
    t, f = _pair(true_value, false_value)
    return _SelectNode(_op.convert(condition), t, f, t.dtype)


def if_then_else(condition: Any, true_value: Any, false_value: Any) -> PrimExpr:
    t, f = _pair(true_value, false_value)
    return Call(t.dtype, "if_then_else", (_op.convert(condition), t, f))


def Ramp(base: Any, stride: Any, lanes: int) -> PrimExpr:
    base, stride = _pair(base, stride)
    return _RampNode(base, stride, int(lanes), dt.with_lanes(base.dtype, int(lanes)))


def Broadcast(value: Any, lanes: int) -> PrimExpr:
    value = _op.convert(value)
    return _BroadcastNode(value, int(lanes), dt.with_lanes(value.dtype, int(lanes)))


def Shuffle(vectors: Sequence[Any], indices: Sequence[int]) -> PrimExpr:
    vecs = tuple(_op.convert(v) for v in vectors)
    idx = tuple(int(i) for i in indices)
    return _ShuffleNode(vecs, idx, dt.with_lanes(dt.parse(vecs[0].dtype).scalar, len(idx)))


def Let(body: Any, where: dict) -> PrimExpr:
    (var, value), = where.items()
    body = _op.convert(body)
    return _LetNode(var, _op.convert(value), body, body.dtype)


def call_intrin(dtype: Any, name: str, *args: Any) -> PrimExpr:
    return Call(_dtype_arg(dtype), name, tuple(_op.convert(a) for a in args))


def _dtype_first(op_name: str) -> Callable[..., PrimExpr]:
    def make(dtype: Any, *args: Any) -> PrimExpr:
        return Call(_dtype_arg(dtype), op_name, tuple(_op.convert(a) for a in args))
    make.__name__ = op_name
    return make


call_llvm_pure_intrin = _dtype_first("call_llvm_pure_intrin")
call_llvm_intrin = _dtype_first("call_llvm_intrin")
reinterpret = _dtype_first("reinterpret")


def _intrinsic(name: str) -> Callable[..., PrimExpr]:
    def make(*args: Any) -> PrimExpr:
        return _op.call(name, *args)
    make.__name__ = name
    return make


for _name in _op.INTRINSICS:
    globals()[_name] = _intrinsic(_name)


def address_of(load: Any) -> PrimExpr:
    return _op.address_of(load)


def index_map(mapping: Callable[..., Any], index_dtype: str = "int64") -> Any:
    """An IndexMap from a lambda over index variables (as in ``T.func_attr`` values)."""
    from workbench.tir.schedule.index_map import IndexMap
    return IndexMap.from_func(mapping, index_dtype=index_dtype)


def infinity(dtype: Any) -> PrimExpr:
    return _op.infinity(_dtype_arg(dtype))


def max_value(dtype: Any) -> PrimExpr:
    return _op.max_value(_dtype_arg(dtype))


def min_value(dtype: Any) -> PrimExpr:
    return _op.min_value(_dtype_arg(dtype))


__all__ = ["index_map", "prim_func", "Buffer", "match_buffer", "alloc_buffer", "decl_buffer", "allocate",
           "sblock_alloc_buffer", "serial", "parallel", "vectorized", "unroll", "thread_binding", "grid", "block",
           "sblock", "init", "attr", "axis", "reads", "writes", "where", "block_attr",
           "func_attr", "evaluate", "meta_var", "max", "min", "Div", "truncdiv", "truncmod",
           "floordiv", "floormod", "ceildiv", "Cast", "cast", "Select", "if_then_else", "Ramp",
           "Broadcast",
           "Shuffle", "Let", "call_intrin", "call_llvm_pure_intrin", "call_llvm_intrin",
           "reinterpret", "address_of", "infinity", "max_value", "min_value", *_SCALARS,
           *_op.INTRINSICS]
