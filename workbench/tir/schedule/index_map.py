"""``IndexMap``: a function from N index variables to M index expressions (TVM's ``tir.IndexMap``).

``IndexMap([i, j], [i // 4, j, i % 4])`` maps the index ``(i, j)`` of a 2-d buffer to the index of
a 3-d one; ``IndexMap.from_func(lambda i, j: (i // 4, j, i % 4))`` builds the same from Python.
Schedules use it to re-lay out buffers (``transform_layout``) and block iteration spaces
(``transform_block_layout``).

An IndexMap is an IR node: ``structural_equal`` compares two maps with their initial variables
mapped (renaming does not matter); ``to_json`` / ``from_json`` round-trip it through the IR's JSON
form (a string starting with ``{``, as TVM's traces store index maps); ``as_python`` prints a
``lambda`` that rebuilds it, as a trace printed as Python does.
"""
from __future__ import annotations

import inspect
import keyword
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from workbench.ir.node import Node, node
from workbench.ir.structural import register_structural
from workbench.tir import expr as E
from workbench.tir import op
from workbench.tir.buffer import Range
from workbench.tir.functor import IRVisitor, substitute


@node
class IndexMap(Node):
    """``final_indices`` are expressions over ``initial_indices`` (Vars)."""

    initial_indices: tuple[E.Var, ...]
    final_indices: tuple[E.PrimExpr, ...]

    __hash__ = object.__hash__

    # -- construction ------------------------------------------------------------------------
    @staticmethod
    def from_func(fn: Callable[..., Any], ndim: int | None = None,
                  index_dtype: str = "int32") -> "IndexMap":
        """Build a map from a Python function of index variables.

        The function takes one argument per input dimension (``ndim`` is needed only when it
        takes ``*args``) and returns a tuple/list of index expressions, or one expression.
        """
        params = list(inspect.signature(fn).parameters.values())
        names = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        variadic = any(p.kind == p.VAR_POSITIONAL for p in params)
        if ndim is None:
            if variadic:
                raise ValueError("IndexMap.from_func: a function taking *args needs ndim")
            ndim = len(names)
        elif ndim < len(names) or (ndim > len(names) and not variadic):
            raise ValueError(f"IndexMap.from_func: the function takes {len(names)} index "
                             f"argument(s), but the buffer or block has {ndim} dimension(s)")
        names += [f"i{k}" for k in range(len(names), ndim)]
        args = tuple(E.Var(n, index_dtype) for n in names)
        out = fn(*args)
        if not isinstance(out, (list, tuple)):
            out = (out,)
        finals = tuple(op.convert(x) if not isinstance(x, int) else op.const(x, index_dtype)
                       for x in out)
        for x in finals:
            if not isinstance(x, E.PrimExpr):
                raise TypeError(f"IndexMap.from_func: {x!r} is not an index expression")
        return IndexMap(args, finals)

    @staticmethod
    def from_json(text: str) -> "IndexMap":
        from workbench.ir.json import load_json
        got = load_json(text)
        if not isinstance(got, IndexMap):
            raise ValueError(f"IndexMap.from_json: the JSON holds a {type(got).__name__}")
        return got

    def to_json(self) -> str:
        from workbench.ir.json import save_json
        return save_json(self)

    # -- application -------------------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.initial_indices)

    def map_indices(self, indices: Sequence[Any], analyzer: Any = None) -> list[E.PrimExpr]:
        """The final indices for the given initial ones, simplified (with what ``analyzer``
        knows of the variables, when given)."""
        self._check_arity(indices)
        from workbench.tir.arith import Analyzer
        ana = analyzer or Analyzer()
        vmap = {v: op.convert(x) for v, x in zip(self.initial_indices, indices)}
        return [ana.simplify(substitute(f, vmap)) for f in self.final_indices]

    def map_shape(self, shape: Sequence[Any], analyzer: Any = None) -> list[E.PrimExpr]:
        """The shape of the image of ``[0, shape)``: each final index's upper bound + 1.

        Like TVM, every final index must be able to reach 0 (the mapped ranges start at 0).
        """
        ranges = self.map_ranges([Range(op.const(0, _dtype(s)), op.convert(s)) for s in shape],
                                 analyzer)
        for r, f in zip(ranges, self.final_indices):
            if not (isinstance(r.min, E.IntImm) and r.min.value == 0):
                raise ValueError(f"IndexMap.map_shape: the index {f} does not start at 0 over "
                                 f"the shape {list(shape)} (its minimum is {r.min})")
        return [r.extent for r in ranges]

    def map_ranges(self, ranges: Sequence[Range], analyzer: Any = None) -> list[Range]:
        """The ranges the final indices cover when each initial index covers its range.

        Point ranges map to points; others are bounded with interval arithmetic.
        """
        from workbench.tir.arith import Analyzer
        self._check_arity(ranges)
        ana = analyzer or Analyzer()
        if all(_is_one(r.extent) for r in ranges):
            return [Range(x, op.const(1, x.dtype))
                    for x in self.map_indices([r.min for r in ranges], ana)]
        dom = {v: r for v, r in zip(self.initial_indices, ranges)}
        out = []
        for f in self.final_indices:
            s = ana.int_set(f, dom)
            if not (s.has_lower_bound() and s.has_upper_bound()):
                raise ValueError(f"IndexMap.map_ranges: cannot bound {f} over {list(ranges)}")
            lo = ana.simplify(s.min_value)
            out.append(Range(lo, ana.simplify(op.add(op.sub(s.max_value, lo), 1))))
        return out

    def _check_arity(self, items: Sequence[Any]) -> None:
        if len(items) != self.ndim:
            raise ValueError(f"the index map takes {self.ndim} index(es), got {len(items)}")

    # -- analysis ----------------------------------------------------------------------------
    def image_points(self, shape: Sequence[int], limit: int = 1 << 20) -> np.ndarray | None:
        """Every final index of the (constant) domain ``[0, shape)``, one row per point, or
        None when the domain is too large or an expression is not plain index arithmetic."""
        cols = self.image_columns(shape, limit)
        if cols is None:
            return None
        total = int(np.prod(shape)) if shape else 1
        return np.stack(cols, axis=1) if cols else np.zeros((total, 0), np.int64)

    def image_columns(self, shape: Sequence[int], limit: int = 1 << 20
                      ) -> list[np.ndarray] | None:
        """:meth:`image_points` by column (one array per final index, points in row-major
        order of the domain): no copy into rows, which is what a large weight needs."""
        total = int(np.prod(shape)) if shape else 1
        if total > limit:
            return None
        grids = np.indices(tuple(shape), dtype=np.int64).reshape(len(shape), -1)
        env = dict(zip(self.initial_indices, grids))
        try:
            return [np.broadcast_to(_np_eval(f, env), (total,)) for f in self.final_indices]
        except _NotIndexArith:
            return None

    def inverse(self, shape: Sequence[int]) -> "IndexMap":
        """The inverse map over the domain ``[0, shape)``, for maps built of permutations,
        fusions (``i * c + j``) and splits (``i // c``, ``i % c``) of single variables that
        are bijective on that domain. Raises ValueError for anything else."""
        return _invert(self, [int(s) for s in shape])

    # -- printing ----------------------------------------------------------------------------
    def as_python(self) -> str:
        """A ``lambda`` source that ``IndexMap.from_func`` turns back into this map."""
        names = _py_names(self.initial_indices)
        pr = _PyPrinter(dict(zip(self.initial_indices, names)))
        body = ", ".join(pr.expr(f) for f in self.final_indices)
        if len(self.final_indices) == 1:
            body += ","
        return f"lambda {', '.join(names)}: ({body})"

    def __str__(self) -> str:
        return f"IndexMap({self.as_python()})"

    __repr__ = __str__


register_structural(IndexMap, order=("initial_indices",), defs=("initial_indices",))


def as_index_map(index_map: "IndexMap | Callable[..., Any]", ndim: int) -> IndexMap:
    """An IndexMap from an IndexMap or a Python function of ``ndim`` indices."""
    if isinstance(index_map, IndexMap):
        return index_map
    if callable(index_map):
        return IndexMap.from_func(index_map, ndim=ndim)
    raise TypeError(f"expected an IndexMap or a function of the indices, got {index_map!r}")


def _dtype(x: Any) -> str:
    return x.dtype if isinstance(x, E.PrimExpr) else "int32"


def _is_one(x: E.PrimExpr) -> bool:
    return isinstance(x, E.IntImm) and x.value == 1


# ---- Python printing ----------------------------------------------------------------------------

def _py_names(vars_: Sequence[E.Var]) -> list[str]:
    """The variables' names when they are distinct identifiers, else i0, i1, ..."""
    names = [v.name for v in vars_]
    ok = len(set(names)) == len(names) and all(
        n.isidentifier() and not keyword.iskeyword(n) and n not in ("T", "lambda") for n in names)
    return names if ok else [f"i{k}" for k in range(len(names))]


_PREC = {"Add": 1, "Sub": 1, "Mul": 2, "FloorDiv": 2, "FloorMod": 2}
_SYM = {"Add": "+", "Sub": "-", "Mul": "*", "FloorDiv": "//", "FloorMod": "%"}
# Anything else is spelled through workbench's op module, reachable without imports in the
# namespace a trace is replayed in.
_OP_NAMES = {"Min": "min", "Max": "max", "Div": "truncdiv", "Mod": "truncmod"}
_OP_PREFIX = "__import__('workbench.tir.op').tir.op."


class _PyPrinter:
    def __init__(self, names: dict[E.Var, str]) -> None:
        self.names = names

    def expr(self, e: E.PrimExpr, prec: int = 0) -> str:
        cls = type(e).__name__
        if isinstance(e, E.Var):
            if e not in self.names:
                raise ValueError(f"IndexMap.as_python: {e.name} is not an initial index")
            return self.names[e]
        if isinstance(e, E.IntImm):
            s = str(e.value) if e.dtype in ("int32", "bool") else \
                f"{_OP_PREFIX}const({e.value}, {e.dtype!r})"
            return f"({s})" if e.value < 0 and prec > 0 else s
        if cls in _PREC:
            p = _PREC[cls]
            text = f"{self.expr(e.a, p)} {_SYM[cls]} {self.expr(e.b, p + 1)}"
            return f"({text})" if p < prec else text
        if cls in _OP_NAMES:
            return f"{_OP_PREFIX}{_OP_NAMES[cls]}({self.expr(e.a)}, {self.expr(e.b)})"
        raise ValueError(f"IndexMap.as_python: cannot print {cls} ({e})")


# ---- numeric evaluation (for bijectivity / padding checks) -------------------------------------

class _NotIndexArith(Exception):
    pass


def _np_eval(e: E.PrimExpr, env: dict[E.Var, np.ndarray]) -> np.ndarray | int:
    if isinstance(e, E.Var):
        if e not in env:
            raise _NotIndexArith(e)
        return env[e]
    if isinstance(e, E.IntImm):
        return e.value
    fn = _NP_OPS.get(type(e).__name__)
    if fn is None:
        raise _NotIndexArith(e)
    a, b = _np_eval(e.a, env), _np_eval(e.b, env)
    if type(e).__name__ in ("FloorDiv", "FloorMod") and np.any(np.asarray(b) == 0):
        raise _NotIndexArith(e)
    return fn(a, b)


def numeric_eval(e: E.PrimExpr, env: dict[E.Var, np.ndarray]) -> np.ndarray | int | None:
    """``e`` evaluated with numpy over ``env`` (integer arrays per var): index arithmetic only
    (+ - * // % min max of ints); None for anything else or a var missing from ``env``."""
    try:
        return _np_eval(e, env)
    except _NotIndexArith:
        return None


_NP_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "FloorDiv": np.floor_divide,
    "FloorMod": np.mod, "Min": np.minimum, "Max": np.maximum,
}


# ---- inverse of split/fuse maps ------------------------------------------------------------------

@dataclass(frozen=True)
class _Split:
    """``(var // lower) % extent`` scaled by ``coeff`` inside one final index."""

    var: E.Var
    lower: int
    extent: int
    coeff: int


def _splits(e: E.PrimExpr, extents: dict[E.Var, int]) -> list[_Split]:
    """``e`` as a sum of scaled splits of the initial variables (ValueError when it is not)."""
    if isinstance(e, E.Var) and e in extents:
        return [_Split(e, 1, extents[e], 1)]
    if isinstance(e, E.IntImm) and e.value == 0:
        return []
    if isinstance(e, E.Add):
        return _splits(e.a, extents) + _splits(e.b, extents)
    if isinstance(e, E.Mul) and isinstance(e.b, E.IntImm) and e.b.value > 0:
        return [_Split(s.var, s.lower, s.extent, s.coeff * e.b.value)
                for s in _splits(e.a, extents)]
    if isinstance(e, (E.FloorDiv, E.FloorMod)) and isinstance(e.b, E.IntImm) and e.b.value > 0:
        inner = _splits(e.a, extents)
        c = e.b.value
        if len(inner) == 1 and inner[0].coeff == 1 and inner[0].extent % c == 0:
            s = inner[0]
            if isinstance(e, E.FloorDiv):
                return [_Split(s.var, s.lower * c, s.extent // c, 1)]
            return [_Split(s.var, s.lower, c, 1)]
    raise ValueError(f"{e} is not a sum of splits (i // c, i % c, i * c) of the indices")


def _invert(imap: IndexMap, shape: list[int]) -> IndexMap:
    extents = dict(zip(imap.initial_indices, shape))
    per_final = [sorted(_splits(f, extents), key=lambda s: s.coeff) for f in imap.final_indices]
    dtype = imap.initial_indices[0].dtype if imap.initial_indices else "int32"
    outs = [E.Var(f"v{k}", f.dtype) for k, f in enumerate(imap.final_indices)]
    pieces: dict[E.Var, list[tuple[_Split, E.PrimExpr]]] = {v: [] for v in imap.initial_indices}
    for out, splits in zip(outs, per_final):
        stride = 1
        for k, s in enumerate(splits):
            if s.coeff != stride:
                raise ValueError(f"the final index built from {[str(x.var) for x in splits]} "
                                 "is not a mixed-radix combination (coefficients must be 1, "
                                 "then products of the inner extents)")
            value = op.floordiv(out, stride) if stride != 1 else out
            if k + 1 < len(splits):
                value = op.floormod(value, s.extent)
            pieces[s.var].append((s, value))
            stride *= s.extent
    inverse = []
    for v in imap.initial_indices:
        parts = sorted(pieces[v], key=lambda p: p[0].lower)
        lower, total = 1, op.const(0, dtype)
        for s, value in parts:
            if s.lower != lower:
                raise ValueError(f"the pieces of index {v.name} do not cover it exactly")
            total = op.add(total, op.mul(value, lower) if lower != 1 else value)
            lower *= s.extent
        if lower != extents[v]:
            raise ValueError(f"the pieces of index {v.name} cover {lower} values, not "
                             f"{extents[v]}")
        inverse.append(total)
    return IndexMap(tuple(outs), tuple(inverse))


def free_vars_ok(imap: IndexMap) -> bool:
    """True when the final indices use no variable other than the initial indices."""
    allowed = set(imap.initial_indices)
    bad: list[E.Var] = []

    class _V(IRVisitor):
        def visit_Var(self, v: E.Var) -> None:
            if v not in allowed:
                bad.append(v)

    for f in imap.final_indices:
        _V().visit(f)
    return not bad


__all__ = ["IndexMap", "as_index_map"]
