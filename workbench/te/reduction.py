"""Reductions for te.compute: reduce axes, commutative reducers, and ``sum`` / ``min`` / ``max``.

A reducer built by :func:`comm_reducer` is called like TVM's::

    te.sum(A[i, k], axis=k, where=k < n)          # one Reduce expression
    idx, val = argmax((k, A[i, k]), axis=k)         # a tuple of Reduce, one per value
    te.max(a, b)                                    # no axis: combine the values directly

The :class:`CommReducer` node holds the combiner as expressions over ``lhs``/``rhs`` variables and
one identity element per value; :class:`workbench.tir.Reduce` refers to it.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from workbench.ir import dtype as dt
from workbench.ir.node import Node, node
from workbench.tir import op
from workbench.tir.buffer import Range
from workbench.tir.expr import PrimExpr, Reduce, Var
from workbench.tir.functor import substitute
from workbench.tir.stmt import IterType, IterVar


@node
class AxisIterVar(IterVar):
    """An IterVar that also acts as its variable in arithmetic (``A[i, k + 1]``), as in TVM.

    Equality stays identity (so axes work as dict keys); compare ``k.var`` for an EQ node.
    Returned by :func:`reduce_axis` and found in ``ComputeOp.axis``.
    """

    def __prim_expr__(self) -> Var:
        return self.var

    def __add__(self, o): return self.var + o
    def __radd__(self, o): return op.add(o, self.var)
    def __sub__(self, o): return self.var - o
    def __rsub__(self, o): return op.sub(o, self.var)
    def __mul__(self, o): return self.var * o
    def __rmul__(self, o): return op.mul(o, self.var)
    def __floordiv__(self, o): return self.var // o
    def __rfloordiv__(self, o): return op.floordiv(o, self.var)
    def __mod__(self, o): return self.var % o
    def __rmod__(self, o): return op.floormod(o, self.var)
    def __truediv__(self, o): return self.var / o
    def __neg__(self): return -self.var
    def __lt__(self, o): return self.var < o
    def __le__(self, o): return self.var <= o
    def __gt__(self, o): return self.var > o
    def __ge__(self, o): return self.var >= o

    @property
    def dtype(self) -> str:
        return self.var.dtype

    __hash__ = object.__hash__


def as_range(dom: Any, what: str) -> Range:
    """``(min, max)`` (exclusive max, TVM's ``Range(begin, end)``) or a Range -> Range(min, extent)."""
    if isinstance(dom, Range):
        return dom
    if isinstance(dom, (tuple, list)) and len(dom) == 2:
        lo, hi = (_index_expr(d, what) for d in dom)
        if lo.dtype != hi.dtype:
            # (0, n) with an int64 n: both bounds take the wider dtype, as TVM's Range does, so
            # the loop's min and extent agree (codegen adds them).
            t = dt.promote(lo.dtype, hi.dtype)
            lo, hi = op.cast(t, lo), op.cast(t, hi)
        return Range(lo, op.sub(hi, lo))
    raise TypeError(f"{what}: dom must be a (min, max) pair or a Range, got {dom!r}")


def _index_expr(value: Any, what: str) -> PrimExpr:
    if isinstance(value, bool) or not isinstance(value, (int, PrimExpr)):
        raise TypeError(f"{what}: bounds must be integers or integer expressions, got {value!r}")
    e = op.convert(value)
    if not dt.parse(e.dtype).is_integer:
        raise TypeError(f"{what}: bounds must be integers, got {value!r} of dtype {e.dtype}")
    return e


def reduce_axis(dom: Any, name: str = "rv", thread_tag: str = "") -> AxisIterVar:
    """A reduction axis over ``dom`` = ``(min, max)`` (max exclusive) or a :class:`Range`."""
    rng = as_range(dom, f"reduce_axis {name!r}")
    var_dtype = dt.promote(rng.min.dtype, rng.extent.dtype)
    return AxisIterVar(rng, Var(name, var_dtype), IterType.COMM_REDUCE, thread_tag)


@node
class CommReducer(Node):
    """A commutative reducer: ``result[i]`` combines ``lhs`` (accumulated) and ``rhs`` (new).

    ``identity_element[i]`` must satisfy ``combine(identity, x) == x`` for every value; a
    ``where=`` condition relies on it (see :mod:`workbench.te.create_prim_func`).
    """

    lhs: tuple[Var, ...]
    rhs: tuple[Var, ...]
    result: tuple[PrimExpr, ...]
    identity_element: tuple[PrimExpr, ...]
    name: str = "reduce"

    __hash__ = object.__hash__

    def combine(self, lhs: Sequence[PrimExpr], rhs: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
        """The combined values for accumulated ``lhs`` and new ``rhs`` expressions."""
        vmap: dict[Var, Any] = dict(zip(self.lhs, lhs))
        vmap.update(zip(self.rhs, rhs))
        return tuple(substitute(r, vmap) for r in self.result)

    def __call__(self, lhs: Sequence[PrimExpr], rhs: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
        return self.combine(lhs, rhs)


Reducer = Callable[..., Any]


def comm_reducer(fcombine: Callable, fidentity: Callable, name: str = "reduce") -> Reducer:
    """Make a reducer from ``fcombine(x, y)`` and ``fidentity(*dtypes)`` (TVM's contract).

    For a single value ``fcombine`` takes two expressions and ``fidentity(dtype)`` returns the
    identity. For k values (argmax keeps an index and a value) ``fcombine`` takes two k-tuples
    and returns a k-tuple, and ``fidentity(dtype_0, ..., dtype_k-1)`` returns a k-tuple.

    The returned ``reducer(expr, axis, where=None, init=None)`` gives a Reduce (or a tuple of
    them for k values); called as ``reducer(a, b, ...)`` without axes it folds the values.
    """
    names = fcombine.__code__.co_varnames[:2] if hasattr(fcombine, "__code__") else ("x", "y")
    if len(names) < 2:
        names = ("x", "y")

    def make_combiner(dtypes: list[str], multi: bool) -> CommReducer:
        if multi:
            lhs = tuple(Var(f"{names[0]}_{i}", t) for i, t in enumerate(dtypes))
            rhs = tuple(Var(f"{names[1]}_{i}", t) for i, t in enumerate(dtypes))
            result = fcombine(lhs, rhs)
            ident = fidentity(*dtypes)
        else:
            lhs, rhs = (Var(names[0], dtypes[0]),), (Var(names[1], dtypes[0]),)
            result = (fcombine(lhs[0], rhs[0]),)
            ident = (fidentity(dtypes[0]),)
        result = _as_tuple(result, f"comm_reducer {name!r}: fcombine", len(dtypes))
        ident = _as_tuple(ident, f"comm_reducer {name!r}: fidentity", len(dtypes))
        result = tuple(op.cast(t, op.convert(r)) for r, t in zip(result, dtypes))
        ident = tuple(op.const(v, t) if not isinstance(v, PrimExpr) else op.cast(t, v)
                      for v, t in zip(ident, dtypes))
        return CommReducer(lhs, rhs, result, ident, name)

    def make_reduce(expr: Any, axis: Any, where: Any = None, init: Any = None):
        multi = isinstance(expr, (tuple, list))
        exprs = list(expr) if multi else [expr]
        sources = tuple(_source(e, name) for e in exprs)
        combiner = make_combiner([s.dtype for s in sources], multi)
        axes = _axes(axis, name)
        cond = op.const(True) if where is None else _condition(where, name)
        inits: tuple[PrimExpr, ...] = ()
        if init is not None:
            raw = list(init) if isinstance(init, (tuple, list)) else [init]
            if len(raw) != len(sources):
                raise ValueError(f"{name}: init has {len(raw)} value(s) for {len(sources)} "
                                 "reduced value(s)")
            inits = tuple(op.cast(s.dtype, op.convert(v, s)) for v, s in zip(raw, sources))
        outs = tuple(Reduce(combiner, sources, axes, cond, i, sources[i].dtype, inits)
                     for i in range(len(sources)))
        return outs if multi else outs[0]

    def fold(values: Sequence[Any]):
        acc = [op.convert(v) for v in values]
        out = acc[0]
        for v in acc[1:]:
            a, b = op.match_types(out, v)
            out = make_combiner([a.dtype], False).combine((a,), (b,))[0]
        return out

    def reducer(expr: Any, axis: Any = None, where: Any = None, init: Any = None, *args: Any):
        if axis is None or _is_axis_like(axis):
            if axis is None:
                raise TypeError(f"{name}: give axis= (a reduce_axis or a list of them)")
            if args:
                raise TypeError(f"{name}: unexpected extra arguments {args!r}")
            return make_reduce(expr, axis, where, init)
        # No axis: TVM folds the given expressions directly (te.max(a, b)).
        return fold([v for v in (expr, axis, where, init, *args) if v is not None])

    reducer.__name__ = name
    reducer.__qualname__ = name
    reducer.__doc__ = (f"Reduce with {name!r}: ``{name}(expr, axis, where=None, init=None)``; "
                       f"``{name}(a, b, ...)`` without axes combines the values directly.")
    return reducer


def _as_tuple(value: Any, what: str, n: int) -> tuple:
    items = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    if len(items) != n:
        raise ValueError(f"{what} returned {len(items)} value(s), expected {n}")
    return items


def _is_axis_like(axis: Any) -> bool:
    return isinstance(axis, IterVar) or (
        isinstance(axis, (list, tuple)) and all(isinstance(a, IterVar) for a in axis))


def _axes(axis: Any, name: str) -> tuple[IterVar, ...]:
    axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
    if not axes:
        raise ValueError(f"{name}: axis= is empty; give at least one reduce_axis")
    for a in axes:
        if not isinstance(a, IterVar) or a.iter_type != IterType.COMM_REDUCE:
            raise TypeError(f"{name}: axis entries must come from te.reduce_axis, got {a!r}")
    return axes


def _source(e: Any, name: str) -> PrimExpr:
    if hasattr(e, "op") and hasattr(e, "shape") and not isinstance(e, PrimExpr):
        raise TypeError(f"{name}: reduce an element such as T[i, k], not the tensor {e!r}")
    e = op.convert(e)
    if isinstance(e, Reduce):
        raise TypeError(f"{name}: nested reductions are not supported; compute the inner "
                        "reduction as its own stage")
    return e


def _condition(where: Any, name: str) -> PrimExpr:
    c = op.convert(where)
    if not dt.parse(c.dtype).is_bool:
        raise TypeError(f"{name}: where= must be a boolean condition, got {c!r}")
    return c


sum = comm_reducer(lambda x, y: x + y, lambda t: op.const(0, t), name="sum")  # noqa: A001
min = comm_reducer(lambda x, y: op.min(x, y), op.max_value, name="min")  # noqa: A001
max = comm_reducer(lambda x, y: op.max(x, y), op.min_value, name="max")  # noqa: A001
