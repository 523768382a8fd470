"""TVMScript-style text of TIR expressions, and the names a printout gives to vars and buffers.

Expressions print in infix with the fewest parentheses that keep the tree when parsed back as
Python: each printed form carries its precedence, an operand is bracketed when it binds looser
than its operator needs (on the right of a left-associative operator also when equal, since
``a - (b - c)`` is not ``a - b - c``; comparisons never chain in Python's sense, so both sides
bracket at equal precedence).

Constants follow TVMScript: int32 literals and bools are bare, every other dtype is written
``T.int64(3)`` / ``T.float32(0.5)``.
"""
from __future__ import annotations

import contextlib
import keyword
import math
import re
import sys
from typing import Any, Callable, Iterator

from workbench.ir import dtype as dt
from workbench.ir.dispatch import TypeTable
from workbench.ir.printer import format_value, generic_repr, quote
from workbench.tir.buffer import Buffer
from workbench.tir.expr import (
    EQ, GE, GT, LE, LT, NE, Add, And, Broadcast, BufferLoad, Call, Cast, Div, FloatImm,
    FloorDiv, FloorMod, IntImm, Let, Max, Min, Mod, Mul, Not, Or, PrimExpr, Ramp, Reduce, Select,
    Shuffle, SizeVar, StringImm, Sub, Var,
)

# Python precedence, loosest first.
OR, AND, NOT, CMP, BOR, BXOR, BAND, SHIFT, ADD, MUL, UNARY, POW, ATOM = range(1, 14)

_RESERVED = set(keyword.kwlist) | {"T", "I", "range", "True", "False", "None"}
_NOT_IDENT = re.compile(r"\W")


# The printers recurse over expression trees, about three frames per level; a long chain such as
# a sum of thousands of terms needs more than Python's default limit of 1000. Python 3.11 keeps
# Python-to-Python calls off the C stack, so a higher limit is safe for this code.
_DEEP_LIMIT = 30_000


@contextlib.contextmanager
def deep_recursion() -> Iterator[None]:
    """Raise the recursion limit for the duration of one printout."""
    old = sys.getrecursionlimit()
    if old < _DEEP_LIMIT:
        sys.setrecursionlimit(_DEEP_LIMIT)
    try:
        yield
    finally:
        if old < _DEEP_LIMIT:
            sys.setrecursionlimit(old)


class Names:
    """Printed names: deterministic and unique within one printout.

    A name is handed out when an object is defined (loop var, block var, buffer, ...); a clash
    with an earlier name gets ``_1``, ``_2``, ... in definition order. Objects used before any
    definition are *free*: they get a name on first use and are listed in ``free_vars`` /
    ``free_buffers`` so the printout can declare them.
    """

    def __init__(self) -> None:
        self._by_id: dict[int, str] = {}
        self._keep: list[Any] = []  # keep named objects alive so their ids stay unique
        self._taken: set[str] = set(_RESERVED)
        self.free_vars: list[Var] = []
        self.free_buffers: list[Buffer] = []

    def define(self, obj: Any, hint: str) -> str:
        # The same object defined twice (a Var reused by two loops) keeps its one name.
        known = self._by_id.get(id(obj))
        if known is not None:
            return known
        base = _NOT_IDENT.sub("_", hint or "v")
        if not base or base[0].isdigit():
            base = "v_" + base
        name, k = base, 0
        while name in self._taken:
            k += 1
            name = f"{base}_{k}"
        self._taken.add(name)
        self.alias(obj, name)
        return name

    def alias(self, obj: Any, text: str) -> None:
        """Print ``obj`` as ``text`` (``A.data`` for a declared buffer's data var)."""
        self._by_id[id(obj)] = text
        self._keep.append(obj)

    def has(self, obj: Any) -> bool:
        return id(obj) in self._by_id

    def var(self, v: Var) -> str:
        name = self._by_id.get(id(v))
        if name is None:
            name = self.define(v, v.name)
            self.free_vars.append(v)
        return name

    def buffer(self, b: Buffer) -> str:
        name = self._by_id.get(id(b))
        if name is None:
            name = self.define(b, b.name)
            self.free_buffers.append(b)
        return name


def dtype_ann(dtype: str) -> str:
    """The type annotation of a scalar of ``dtype``: ``T.int32``, ``T.handle``, ``T.float32x4``."""
    return f"T.{dtype}"


def int_literal(value: int, dtype: str) -> tuple[str, int]:
    if dtype == "int32":
        return str(value), (UNARY if value < 0 else ATOM)
    if dtype == "bool":
        return ("True" if value else "False"), ATOM
    return f"T.{dtype}({value})", ATOM


def float_text(value: float) -> str:
    """The shortest exact text of a float; integral values without ``.0``; non-finite quoted."""
    if math.isnan(value) or math.isinf(value):
        return quote(repr(value))
    if value == 0 and math.copysign(1.0, value) < 0:
        return "-0.0"
    if value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    return repr(value)


_BINARY: dict[type, tuple[str, int]] = {
    Add: ("+", ADD), Sub: ("-", ADD), Mul: ("*", MUL), FloorDiv: ("//", MUL),
    FloorMod: ("%", MUL), And: ("and", AND), Or: ("or", OR),
}
_COMPARE: dict[type, str] = {EQ: "==", NE: "!=", LT: "<", LE: "<=", GT: ">", GE: ">="}
_CALLS: dict[type, str] = {Min: "T.min", Max: "T.max"}


class ExprPrinter:
    """Prints expressions against a :class:`Names` table; dispatch is a per-type table."""

    def __init__(self, names: Names) -> None:
        self.names = names

    def __call__(self, e: Any) -> str:
        return self.text(e)

    def text(self, e: Any) -> str:
        if not isinstance(e, PrimExpr):
            return self.value(e)
        return self.prec(e)[0]

    def value(self, v: Any) -> str:
        """Any attribute value, with IR nodes printed against this printout's names."""
        return format_value(v, self._node)

    def _node(self, n: Any) -> str:
        if isinstance(n, PrimExpr):
            return self.text(n)
        if isinstance(n, Buffer):
            return self.names.buffer(n)
        if type(n).__name__ == "IndexMap":  # (tir.schedule is a layer above)
            return self._index_map(n)
        return generic_repr(n)

    def _index_map(self, m: Any) -> str:
        """``T.index_map(lambda i0, i1: (...), index_dtype=...)``: the lambda's parameters are
        the map's own variables, named apart from this printout's."""
        sub = ExprPrinter(Names())
        params = [sub.names.define(v, v.name) for v in m.initial_indices]
        body = ", ".join(sub.text(e) for e in m.final_indices)
        body += "," if len(m.final_indices) == 1 else ""
        dtype = m.initial_indices[0].dtype if m.initial_indices else "int64"
        return f'T.index_map(lambda {", ".join(params)}: ({body}), index_dtype="{dtype}")'

    def prec(self, e: PrimExpr) -> tuple[str, int]:
        h = _handler(type(e))
        if h is None:
            return generic_repr(e), ATOM
        return h(self, e)

    def operand(self, e: PrimExpr, need: int) -> str:
        text, p = self.prec(e)
        return text if p >= need else f"({text})"

    def args(self, es: Any) -> str:
        return ", ".join(self.text(e) for e in es)

    def index(self, e: PrimExpr) -> str:
        """A buffer index: a unit-stride Ramp prints as the slice ``base:base + lanes``."""
        if isinstance(e, Ramp) and isinstance(e.stride, IntImm) and e.stride.value == 1:
            if isinstance(e.base, IntImm):
                stop = IntImm(e.base.dtype, e.base.value + e.lanes)
                return f"{self.text(e.base)}:{self.text(stop)}"
            return f"{self.text(e.base)}:{self.operand(e.base, ADD)} + {e.lanes}"
        return self.text(e)

    def indices(self, idx: Any) -> str:
        if len(idx) == 0:
            return "()"
        return ", ".join(self.index(i) for i in idx)


# ---- handlers ---------------------------------------------------------------------------------

def _var(p: ExprPrinter, v: Var) -> tuple[str, int]:
    return p.names.var(v), ATOM


def _int(p: ExprPrinter, e: IntImm) -> tuple[str, int]:
    return int_literal(e.value, e.dtype)


def _float(p: ExprPrinter, e: FloatImm) -> tuple[str, int]:
    return f"T.{e.dtype}({float_text(e.value)})", ATOM


def _string(p: ExprPrinter, e: StringImm) -> tuple[str, int]:
    return quote(e.value), ATOM


def _bare(e: Any) -> bool:
    return isinstance(e, IntImm) and e.dtype in ("int32", "bool")


def _left(p: ExprPrinter, e: Any, need: int) -> str:
    """The left operand; when both operands would print as bare Python literals (``0 + 0``),
    the left one is written ``T.int32(0)`` so that the text reads back unfolded."""
    if _bare(e.a) and _bare(e.b):
        return f"T.{e.a.dtype}({int_literal(e.a.value, e.a.dtype)[0]})"
    return p.operand(e.a, need)


def _binary(p: ExprPrinter, e: Any) -> tuple[str, int]:
    sym, prec = _BINARY[type(e)]
    return f"{_left(p, e, prec)} {sym} {p.operand(e.b, prec + 1)}", prec


def _compare(p: ExprPrinter, e: Any) -> tuple[str, int]:
    return f"{_left(p, e, CMP + 1)} {_COMPARE[type(e)]} {p.operand(e.b, CMP + 1)}", CMP


def _call2(p: ExprPrinter, e: Any) -> tuple[str, int]:
    return f"{_CALLS[type(e)]}({p.text(e.a)}, {p.text(e.b)})", ATOM


def _div(p: ExprPrinter, e: Div) -> tuple[str, int]:
    if dt.parse(e.dtype).is_float:
        return f"{p.operand(e.a, MUL)} / {p.operand(e.b, MUL + 1)}", MUL
    return f"T.Div({p.text(e.a)}, {p.text(e.b)})", ATOM


def _mod(p: ExprPrinter, e: Mod) -> tuple[str, int]:
    return f"T.truncmod({p.text(e.a)}, {p.text(e.b)})", ATOM


def _not(p: ExprPrinter, e: Not) -> tuple[str, int]:
    if _bare(e.a):  # `not True` would be Python's False when read back
        return f"not T.{e.a.dtype}({int_literal(e.a.value, e.a.dtype)[0]})", NOT
    return f"not {p.operand(e.a, NOT)}", NOT


def _cast(p: ExprPrinter, e: Cast) -> tuple[str, int]:
    return f"T.Cast({quote(e.dtype)}, {p.text(e.value)})", ATOM


def _select(p: ExprPrinter, e: Select) -> tuple[str, int]:
    return f"T.Select({p.args((e.condition, e.true_value, e.false_value))})", ATOM


def _load(p: ExprPrinter, e: BufferLoad) -> tuple[str, int]:
    name = p.names.buffer(e.buffer)
    if e.predicate is not None:
        return (f"{name}.vload([{', '.join(p.index(i) for i in e.indices)}], "
                f"predicate={p.text(e.predicate)})"), ATOM
    return f"{name}[{p.indices(e.indices)}]", ATOM


def _ramp(p: ExprPrinter, e: Ramp) -> tuple[str, int]:
    return f"T.Ramp({p.text(e.base)}, {p.text(e.stride)}, {e.lanes})", ATOM


def _broadcast(p: ExprPrinter, e: Broadcast) -> tuple[str, int]:
    return f"T.Broadcast({p.text(e.value)}, {e.lanes})", ATOM


def _shuffle(p: ExprPrinter, e: Shuffle) -> tuple[str, int]:
    return f"T.Shuffle([{p.args(e.vectors)}], [{', '.join(map(str, e.indices))}])", ATOM


def _let(p: ExprPrinter, e: Let) -> tuple[str, int]:
    value = p.text(e.value)
    name = p.names.define(e.var, e.var.name)
    return f"T.Let({p.text(e.body)}, where={{{name}: {value}}})", ATOM


_DTYPE_FIRST_CALLS = ("call_llvm_pure_intrin", "call_llvm_intrin", "reinterpret")


def _call(p: ExprPrinter, e: Call) -> tuple[str, int]:
    if e.op in _DTYPE_FIRST_CALLS:
        return f"T.{e.op}({', '.join([quote(e.dtype)] + [p.text(a) for a in e.args])})", ATOM
    if e.op.isidentifier() and not keyword.iskeyword(e.op):
        return f"T.{e.op}({p.args(e.args)})", ATOM
    args = ", ".join([quote(e.dtype), quote(e.op)] + [p.text(a) for a in e.args])
    return f"T.call_intrin({args})", ATOM


def _reduce(p: ExprPrinter, e: Reduce) -> tuple[str, int]:
    axes = ", ".join(p.names.define(iv.var, iv.var.name) if not p.names.has(iv.var)
                     else p.names.var(iv.var) for iv in e.axis)
    parts = [p.value(e.combiner), f"[{p.args(e.source)}]", f"axis=[{axes}]"]
    if not (isinstance(e.condition, IntImm) and e.condition.value == 1):
        parts.append(f"where={p.text(e.condition)}")
    if e.value_index:
        parts.append(f"value_index={e.value_index}")
    if e.init:
        parts.append(f"init=[{p.args(e.init)}]")
    return f"T.reduce({', '.join(parts)})", ATOM


_HANDLERS: TypeTable[Callable[[ExprPrinter, Any], tuple[str, int]]] = TypeTable({
    Var: _var, SizeVar: _var, IntImm: _int, FloatImm: _float, StringImm: _string,
    Div: _div, Mod: _mod, Not: _not, Cast: _cast, Select: _select, BufferLoad: _load,
    Ramp: _ramp, Broadcast: _broadcast, Shuffle: _shuffle, Let: _let, Call: _call,
    Reduce: _reduce,
    **{cls: _binary for cls in _BINARY}, **{cls: _compare for cls in _COMPARE},
    **{cls: _call2 for cls in _CALLS},
})
_handler = _HANDLERS.lookup  # node type -> handler, along the MRO, cached
