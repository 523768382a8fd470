"""Is a loop nest one-to-one onto a block's bindings? (decompose_reduction, reorder)

Two iterations of a loop nest that bind the same instance of a reduction block run its update
twice; whether that is still right depends on where the init runs, so the primitives that move
inits or change iteration order ask here. Bindings that split makes (each loop in one binding,
coefficients in mixed radix: ``l_o * 4 + l_i`` with ``l_i < 4``) are one-to-one by
construction; anything else (``//`` and ``%`` of a fused loop) is enumerated when the loops are
constant and small, and refused otherwise.
"""
from __future__ import annotations

import itertools
from typing import Any, Sequence

from workbench.tir.arith.evaluate import EvalError, evaluate
from workbench.tir.expr import Add, IntImm, Mul, PrimExpr, Sub, Var, is_const_int
from workbench.tir.functor import collect_vars
from workbench.tir.schedule.utils import linear_form, uses_var
from workbench.tir.stmt import For

#: Above this many iterations the check is structural only (mixed radix or refused).
ENUMERATE_LIMIT = 1 << 14


def repeated_binding(loops: Sequence[For], fixed: Sequence[For], values: Sequence[PrimExpr],
                     predicate: PrimExpr | None = None, strict: bool = True) -> str | None:
    """Two iterations of ``loops`` (the ``fixed`` loops held at their first value) that give the
    same ``values``, described (``"at i=0, j=1 and again at i=1, j=1"``, or, when ``strict``,
    why it cannot be proven otherwise); None when every iteration gives distinct values (or,
    not ``strict``, when no repeat was found). Iterations where ``predicate`` is false do not
    count. Loops no value uses are ignored."""
    inner = [lp for lp in loops if any(uses_var(v, lp.loop_var) for v in values)]
    if not inner or mixed_radix(inner, values):
        return None
    total = 1
    for lp in inner:
        total *= lp.extent.value if isinstance(lp.extent, IntImm) else ENUMERATE_LIMIT + 1
    if total > ENUMERATE_LIMIT or not all(isinstance(lp.min, IntImm) for lp in inner):
        return "cannot prove otherwise for its non-linear bindings" if strict else None
    env: dict[Any, Any] = {lp.loop_var: lp.min.value for lp in fixed
                           if isinstance(lp, For) and isinstance(lp.min, IntImm)}
    gated = predicate is not None and not is_const_int(predicate, 1)
    seen: dict[tuple, tuple] = {}
    names = [lp.loop_var.name for lp in inner]
    for point in itertools.product(*(range(lp.min.value, lp.min.value + lp.extent.value)
                                      for lp in inner)):
        env.update(zip((lp.loop_var for lp in inner), point))
        try:
            # a predicate over loops not enumerated here (reduction loops) cannot be decided
            # per point; ignoring it only adds points: a false alarm (a refusal), never a miss
            if gated and collect_vars(predicate) <= env.keys() and not evaluate(predicate, env):
                continue
            key = tuple(evaluate(v, env) for v in values)
        except EvalError:
            return "cannot evaluate its bindings" if strict else None
        if key in seen:
            first = ", ".join(f"{n}={x}" for n, x in zip(names, seen[key]))
            again = ", ".join(f"{n}={x}" for n, x in zip(names, point))
            return f"at {first} and again at {again}"
        seen[key] = point
    return None


def mixed_radix(inner: Sequence[For], values: Sequence[PrimExpr]) -> bool:
    """Each of ``inner`` appears in one of ``values`` only, linearly, and within each value the
    loops' coefficients grow at least as fast as their extents: then distinct iterations give
    distinct values."""
    owner: dict[Var, int] = {}
    inner_vars = {lp.loop_var for lp in inner}
    for k, value in enumerate(values):
        form = linear_form(_outer_terms_as_vars(value, inner_vars))
        terms = []
        for lp in inner:
            if not uses_var(value, lp.loop_var):
                continue
            if form is None or lp.loop_var not in form[0] or lp.loop_var in owner or \
                    not isinstance(lp.extent, IntImm):
                return False
            owner[lp.loop_var] = k
            terms.append((abs(form[0][lp.loop_var]), lp.extent.value))
        terms.sort()
        for (coef, extent), (next_coef, _) in zip(terms, terms[1:]):
            if next_coef < coef * extent:
                return False
    return True


def _outer_terms_as_vars(e: PrimExpr, inner: set[Var]) -> PrimExpr:
    """``e`` with every subexpression free of ``inner`` replaced by a fresh variable, so that
    ``(f // 10) * 32 + i`` reads as linear in ``i`` (``f`` is fixed while ``i`` runs)."""
    if isinstance(e, IntImm):
        return e
    if not collect_vars(e) & inner:
        return Var("outer", e.dtype)
    if isinstance(e, (Add, Sub, Mul)):
        return type(e)(_outer_terms_as_vars(e.a, inner), _outer_terms_as_vars(e.b, inner),
                       e.dtype)
    return e
