"""Integer index analysis for the buffer-access features: affine forms and constant intervals.

TVM answers "which elements does this access touch when loops i.. are relaxed" with its
analyzer's ``const_int_bound`` after rebinding loop variables, once per loop level, buffer and
dimension. That is the hot path of feature extraction, so here an index is first split once
into an :class:`AffineIndex` ``const + sum(coef * var)`` plus "atoms" (non-affine subterms such
as ``floordiv(i, 4)``); a purely affine index is then bounded by plain integer arithmetic per
loop level. Other indices fall back to :func:`~workbench.tir.analysis.const_interval`, a small
interval evaluator (exact for what const_int_bound is exact for: sums of distinct variables,
division and modulo by constants, min/max).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from workbench.tir import expr as E
from workbench.tir.analysis import Interval, collect_vars, const_interval

# The names this module had before the helpers moved to tir's analysis floor.
free_vars = collect_vars
interval = const_interval


@dataclass(frozen=True, slots=True)
class AffineIndex:
    """``const + sum(coefs[v] * v) + sum(k * atom)``: ``atoms`` maps each variable found
    inside a non-affine part (``floordiv(i, 4)``) to that part's multiplier ``k``.

    ``is_affine`` is true when there are no non-affine parts at all.
    """

    const: int
    coefs: Mapping[E.Var, int]
    atoms: Mapping[E.Var, int]
    is_affine: bool

    def uses(self, var: E.Var) -> bool:
        return var in self.coefs or var in self.atoms


def _merge(x: dict, y: dict, sign: int) -> dict:
    out = dict(x)
    for v, c in y.items():
        out[v] = out.get(v, 0) + sign * c
    return out


def _atom(e: E.PrimExpr) -> tuple[int, dict, dict]:
    return 0, {}, {v: 1 for v in collect_vars(e)}


def _lin(e: E.PrimExpr) -> tuple[int, dict, dict] | None:
    """(const, coefs, atoms) or None when ``e`` is not an integer expression we can split."""
    if isinstance(e, E.IntImm):
        return e.value, {}, {}
    if isinstance(e, E.Var):
        return 0, {e: 1}, {}
    if isinstance(e, (E.Add, E.Sub)):
        a, b = _lin(e.a), _lin(e.b)
        if a is None or b is None:
            return None
        sign = 1 if isinstance(e, E.Add) else -1
        return a[0] + sign * b[0], _merge(a[1], b[1], sign), _merge(a[2], b[2], sign)
    if isinstance(e, E.Mul):
        a, b = _lin(e.a), _lin(e.b)
        if a is None or b is None:
            return None
        if not b[1] and not b[2]:
            a, b = b, a
        if not a[1] and not a[2]:  # constant * linear
            k = a[0]
            return (k * b[0], {v: k * c for v, c in b[1].items()},
                    {v: k * c for v, c in b[2].items()})
        return _atom(e)
    if isinstance(e, E.Cast) and e.dtype.startswith(("int", "uint")) and \
            e.value.dtype.startswith(("int", "uint")):
        return _lin(e.value)
    if e.dtype.startswith(("int", "uint")) and "x" not in e.dtype:
        return _atom(e)
    return None


def affine_index(e: E.PrimExpr) -> AffineIndex:
    """Split an index into its affine part and the variables of its non-affine parts."""
    got = _lin(e)
    if got is None:
        return AffineIndex(0, {}, _atom(e)[2], False)
    const, coefs, atoms = got
    coefs = {v: c for v, c in coefs.items() if c != 0}
    # A variable inside a non-affine part whose multiplier cancelled still moves the index.
    atoms = {v: (c or 1) for v, c in atoms.items()}
    return AffineIndex(const, coefs, atoms, not atoms)


def var_coefficient(index: AffineIndex, var: E.Var) -> int:
    """How far one step of ``var`` moves ``index`` (TVM's CoefficientExtractor, intended form).

    The affine coefficient when ``var`` appears linearly; when it only appears inside a
    non-affine part, that part's multiplier (``floordiv(i, 4) * 64`` gives 64 and
    ``floordiv(i, 4)`` gives 1, as TVM's extractor answers); 0 when absent.
    """
    c = index.coefs.get(var)
    if c:
        return c
    return index.atoms.get(var, 0)


__all__ = ["AffineIndex", "Interval", "affine_index", "free_vars", "interval",
           "var_coefficient"]
