"""Dataflow patterns over Relax expressions (TVM's ``tvm.relax.dpl`` pattern classes).

A pattern describes the shape of an expression tree: ``is_op("relax.add")(wildcard(), x)``
matches any ``R.add`` whose second argument matches ``x``. Patterns combine with ``|`` (either),
``&`` (both) and ``~`` (not), and are constrained with ``.has_dtype``, ``.has_shape`` and
``.has_attr``. Matching (``pattern.match(expr, var2val)``) is done by
:mod:`workbench.relax.dpl.matcher`; with ``var2val`` it sees through dataflow variables to the
values bound to them, so a pattern spans the bindings of a block.

Patterns are immutable and compared by identity: one pattern object that appears twice in a
pattern must match the same expression both times, and the map returned by
``extract_matched_expr`` is keyed by the pattern objects themselves.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

from workbench.relax.expr import Expr, Op


class DFPattern:
    """Base class of patterns; the operators build combined patterns (as in TVM)."""

    __slots__ = ()

    def __call__(self, *args: "DFPattern", varg_default_wildcard: bool = False,
                 add_constraint: bool = True) -> "CallPattern":
        """A call of whatever this pattern matches, with arguments matching ``args``.
        ``add_constraint`` is accepted for TVM compatibility (its used-by constraints only
        matter to pattern contexts, which Workbench does not have)."""
        return CallPattern(self, tuple(args), varg_default_wildcard)

    def __or__(self, other: "DFPattern") -> "OrPattern":
        return OrPattern(self, _as_pattern(other, "|"))

    def __and__(self, other: "DFPattern") -> "AndPattern":
        return AndPattern(self, _as_pattern(other, "&"))

    def __invert__(self) -> "NotPattern":
        return NotPattern(self)

    def has_attr(self, attrs: Mapping[str, Any]) -> "AttrPattern":
        """Also require these attributes: a call's op attributes, or a function's attrs."""
        if not isinstance(attrs, Mapping):
            raise TypeError(f"has_attr takes a dict of attribute values, got {attrs!r}")
        return AttrPattern(self, dict(attrs))

    def has_dtype(self, dtype: str) -> "DataTypePattern":
        """Also require a tensor of element type ``dtype``."""
        return has_dtype(dtype, self)

    def has_shape(self, shape: Sequence[Any]) -> "ShapePattern":
        """Also require a tensor of this shape (dimensions compared by the arith analyzer)."""
        if not isinstance(shape, (list, tuple)):
            raise ValueError(f"has_shape takes a list or tuple as input, got {shape!r}")
        return ShapePattern(self, tuple(shape))

    def match(self, expr: Expr, var2val: Optional[Mapping[Any, Expr]] = None) -> bool:
        """Whether ``expr`` matches. ``var2val`` (``relax.analysis.get_var2val(func)``) maps
        bound variables to their values, so that arguments are followed into their bindings."""
        from workbench.relax.dpl.matcher import extract_matched_expr
        return extract_matched_expr(self, expr, var2val) is not None

    def extract_matched_expr(self, expr: Expr, var2val: Optional[Mapping[Any, Expr]] = None
                             ) -> Optional[dict["DFPattern", Expr]]:
        """``{sub-pattern: the expression it matched}`` for every sub-pattern that took part in
        the match, or None when ``expr`` does not match (see :meth:`match`)."""
        from workbench.relax.dpl.matcher import extract_matched_expr
        return extract_matched_expr(self, expr, var2val)


def _as_pattern(p: Any, where: str) -> DFPattern:
    if not isinstance(p, DFPattern):
        raise TypeError(f"pattern operator {where!r}: expected a DFPattern, got "
                        f"{type(p).__name__}")
    return p


def _pattern(cls):
    """Patterns are frozen, slotted dataclasses compared (and hashed) by identity."""
    return dataclass(frozen=True, slots=True, eq=False)(cls)


@_pattern
class ExprPattern(DFPattern):
    """Matches an expression structurally equal to ``expr`` (an Op for ``is_op``)."""

    expr: Any


@_pattern
class VarPattern(DFPattern):
    """Matches a Relax Var (any, or one named ``name_hint``)."""

    name_hint: str = ""


@_pattern
class DataflowVarPattern(DFPattern):
    """Matches a DataflowVar (any, or one named ``name_hint``)."""

    name_hint: str = ""


@_pattern
class GlobalVarPattern(DFPattern):
    """Matches a GlobalVar whose name contains ``name_hint`` (any when empty)."""

    name_hint: str = ""


@_pattern
class ExternFuncPattern(DFPattern):
    """Matches an ExternFunc (any, or the one named ``global_symbol``)."""

    global_symbol: str = ""


@_pattern
class ConstantPattern(DFPattern):
    """Matches a Constant (also through a variable bound to one)."""


@_pattern
class WildcardPattern(DFPattern):
    """Matches anything."""


@_pattern
class CallPattern(DFPattern):
    """Matches a call whose callee matches ``op`` and whose arguments match ``args``; with
    ``varg_default_wildcard`` the call may have more arguments than patterns given."""

    op: DFPattern
    args: tuple[DFPattern, ...]
    varg_default_wildcard: bool = False

    def __post_init__(self) -> None:
        _as_pattern(self.op, "call")
        for a in self.args:
            _as_pattern(a, "call argument")


@_pattern
class TuplePattern(DFPattern):
    """Matches a Tuple whose fields match ``fields`` in order."""

    fields: tuple[DFPattern, ...]

    def __getitem__(self, index: Optional[int]) -> "TupleGetItemPattern":
        return TupleGetItemPattern(self, -1 if index is None else index)

    def __len__(self) -> int:
        return len(self.fields)


@_pattern
class UnorderedTuplePattern(DFPattern):
    """Matches a Tuple whose fields match ``fields`` in some order."""

    fields: tuple[DFPattern, ...]

    def __len__(self) -> int:
        return len(self.fields)


@_pattern
class TupleGetItemPattern(DFPattern):
    """Matches ``t[index]`` with ``t`` matching ``tuple_value`` (any index when -1)."""

    tuple_value: DFPattern
    index: int = -1


@_pattern
class OrPattern(DFPattern):
    """Matches what ``left`` matches, else what ``right`` matches."""

    left: DFPattern
    right: DFPattern


@_pattern
class AndPattern(DFPattern):
    """Matches what both ``left`` and ``right`` match."""

    left: DFPattern
    right: DFPattern


@_pattern
class NotPattern(DFPattern):
    """Matches what ``reject`` does not match."""

    reject: DFPattern


@_pattern
class DataTypePattern(DFPattern):
    """Matches a tensor of element type ``dtype`` that ``pattern`` matches."""

    pattern: DFPattern
    dtype: str


@_pattern
class ShapePattern(DFPattern):
    """Matches a tensor of shape ``shape`` that ``pattern`` matches."""

    pattern: DFPattern
    shape: tuple[Any, ...]


@_pattern
class PrimArrPattern(DFPattern):
    """Matches a ShapeExpr equal to ``fields``."""

    fields: tuple[Any, ...]

    def __getitem__(self, index: int) -> Any:
        return self.fields[index]

    def __len__(self) -> int:
        return len(self.fields)


@_pattern
class AttrPattern(DFPattern):
    """Matches what ``pattern`` matches when it also has the attribute values ``attrs``."""

    pattern: DFPattern
    attrs: dict


# ---- TVM's constructor functions ----------------------------------------------------------------

def is_var(name: str = "") -> VarPattern:
    """A Var (named ``name`` if given)."""
    return VarPattern(name)


def is_dfv(name: str = "") -> DataflowVarPattern:
    """A DataflowVar (named ``name`` if given)."""
    return DataflowVarPattern(name)


def is_gv(name: str = "") -> GlobalVarPattern:
    """A GlobalVar (whose name contains ``name`` if given)."""
    return GlobalVarPattern(name)


def is_const() -> ConstantPattern:
    """A Constant."""
    return ConstantPattern()


def is_expr(expr: Expr) -> ExprPattern:
    """An expression structurally equal to ``expr``."""
    return ExprPattern(expr)


def is_op(op_name: str) -> ExprPattern:
    """The registered operator ``op_name`` (``"relax.add"``); call the result with argument
    patterns to match calls of it. Raises KeyError for an unknown op, as TVM does."""
    if not isinstance(op_name, str):
        raise TypeError(f"is_op takes an op name such as 'relax.add', got {op_name!r}")
    return ExprPattern(Op.get(op_name))


def is_tuple(fields: Sequence[DFPattern], unordered: bool = False
             ) -> TuplePattern | UnorderedTuplePattern:
    """A Tuple whose fields match ``fields`` (in any order with ``unordered``)."""
    if not isinstance(fields, (list, tuple)):
        raise ValueError("fields must be a list, tuple, or Array")
    fields = tuple(_as_pattern(f, "tuple field") for f in fields)
    return UnorderedTuplePattern(fields) if unordered else TuplePattern(fields)


def is_tuple_get_item(tuple_value: DFPattern, index: Optional[int] = None
                      ) -> TupleGetItemPattern:
    """``t[index]`` (any index when None) with ``t`` matching ``tuple_value``."""
    return TupleGetItemPattern(_as_pattern(tuple_value, "tuple_get_item"),
                               -1 if index is None else int(index))


def wildcard() -> WildcardPattern:
    """Anything."""
    return WildcardPattern()


def has_dtype(dtype: str, pattern: Optional[DFPattern] = None) -> DataTypePattern:
    """A tensor of element type ``dtype`` (matching ``pattern``, default anything)."""
    if not isinstance(dtype, str):
        raise TypeError(f"has_dtype takes a dtype string such as 'float32', got {dtype!r}")
    return DataTypePattern(wildcard() if pattern is None else pattern, dtype)


def is_shape(shape: Sequence[Any]) -> PrimArrPattern:
    """A ShapeExpr (``R.shape([...])``) equal to ``shape``."""
    if not isinstance(shape, (list, tuple)):
        raise ValueError("is_shape takes a list or tuple as input.")
    return PrimArrPattern(tuple(shape))


def reject(pattern: DFPattern) -> NotPattern:
    """Anything ``pattern`` does not match."""
    return NotPattern(_as_pattern(pattern, "reject"))


def has_attr(attrs: Mapping[str, Any], pattern: Optional[DFPattern] = None) -> AttrPattern:
    """An expression with the attribute values ``attrs`` (matching ``pattern``)."""
    return (wildcard() if pattern is None else pattern).has_attr(attrs)


def is_call_tir(func_name: str, args: Optional[Sequence[DFPattern]] = None) -> CallPattern:
    """``R.call_tir(cls.<name containing func_name>, (args...))`` (any arguments when None)."""
    arg_pattern = wildcard() if args is None else is_tuple(args)
    return is_op("relax.call_tir")(GlobalVarPattern(func_name), arg_pattern)


def is_call_dps_packed(func_name: str, args: Optional[Sequence[DFPattern]] = None
                       ) -> CallPattern:
    """``R.call_dps_packed("func_name", (args...))`` (any arguments when None)."""
    arg_pattern = wildcard() if args is None else is_tuple(args)
    return is_op("relax.call_dps_packed")(ExternFuncPattern(func_name), arg_pattern)


__all__ = [
    "DFPattern", "ExprPattern", "VarPattern", "DataflowVarPattern", "GlobalVarPattern",
    "ExternFuncPattern", "ConstantPattern", "WildcardPattern", "CallPattern", "TuplePattern",
    "UnorderedTuplePattern", "TupleGetItemPattern", "OrPattern", "AndPattern", "NotPattern",
    "DataTypePattern", "ShapePattern", "PrimArrPattern", "AttrPattern",
    "is_var", "is_dfv", "is_gv", "is_const", "is_expr", "is_op", "is_tuple",
    "is_tuple_get_item", "wildcard", "has_dtype", "is_shape", "reject", "has_attr",
    "is_call_tir", "is_call_dps_packed",
]
