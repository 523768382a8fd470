"""Which interval evaluator to use, and the one for plain integer bounds.

TIR has several ways to bound an expression; they answer different questions and are kept
apart on purpose (merging them would change results somewhere):

- ``tir.arith.Analyzer.int_set`` / :class:`~workbench.tir.arith.IntervalSet`: symbolic bounds,
  simplified, for the lowering passes (``compact_buffer_allocation``, compute_at regions).
- ``tir.arith.Analyzer.const_int_bound``: constant bounds with dtype ranges and the
  ``POS_INF`` / ``NEG_INF`` sentinels, for the simplifier.
- :func:`~workbench.tir.analysis.regions.index_bounds`: symbolic bounds built from the index
  without simplification, for the regions te writes on a block.
- :func:`const_interval` (here): exact Python-int bounds over constant variable ranges, or
  ``None`` when a variable has no range or a node is outside what it handles, so a caller can
  fall back to one of the above. The feature extractor's hot path and its affine
  ``CompactBufferAllocation`` use it.
"""
from __future__ import annotations

from typing import Mapping

from workbench.tir import expr as E

Interval = tuple[int, int]


def _div_floor(a: int, b: int) -> int:
    return a // b


def _div_trunc(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def const_interval(e: E.PrimExpr, env: Mapping[E.Var, Interval]) -> Interval | None:
    """Constant bounds of integer ``e`` with each variable in ``env``'s interval; None when
    some variable is unknown or the expression is outside what this evaluator handles."""
    if isinstance(e, E.IntImm):
        return e.value, e.value
    if isinstance(e, E.Var):
        return env.get(e)
    if isinstance(e, E.Cast):
        return const_interval(e.value, env) if e.value.dtype.startswith(("int", "uint", "bool")) \
            else None
    if isinstance(e, E.Select):
        a, b = const_interval(e.true_value, env), const_interval(e.false_value, env)
        return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
    if not isinstance(e, E.BinaryOp) or isinstance(e, (E.CmpOp, E.And, E.Or)):
        return None
    a, b = const_interval(e.a, env), const_interval(e.b, env)
    if a is None or b is None:
        return None
    if isinstance(e, E.Add):
        return a[0] + b[0], a[1] + b[1]
    if isinstance(e, E.Sub):
        return a[0] - b[1], a[1] - b[0]
    if isinstance(e, E.Min):
        return min(a[0], b[0]), min(a[1], b[1])
    if isinstance(e, E.Max):
        return max(a[0], b[0]), max(a[1], b[1])
    if isinstance(e, E.Mul):
        ps = (a[0] * b[0], a[0] * b[1], a[1] * b[0], a[1] * b[1])
        return min(ps), max(ps)
    if b[0] != b[1] or b[0] == 0:
        return None  # division by a range: leave it to the caller's fallback
    k = b[0]
    if isinstance(e, (E.FloorDiv, E.Div)):
        f = _div_floor if isinstance(e, E.FloorDiv) else _div_trunc
        qs = (f(a[0], k), f(a[1], k))
        return min(qs), max(qs)
    if isinstance(e, E.FloorMod):
        m = abs(k)
        if a[1] - a[0] < m and a[0] // m == a[1] // m:
            return a[0] % m, a[1] % m
        return 0, m - 1
    if isinstance(e, E.Mod):
        m = abs(k)
        if a[0] >= 0:
            if a[1] - a[0] < m and a[0] // m == a[1] // m:
                return a[0] % m, a[1] % m
            return 0, m - 1
        return -(m - 1), m - 1
    return None


__all__ = ["Interval", "const_interval"]
