"""Helpers for backends' check functions (TVM's ``relax.backend.utils``)."""
from __future__ import annotations

from workbench.relax.expr import DataflowVar
from workbench.relax.transform.fusion_pattern import PatternCheckContext


def has_leaking_intermediate_variables(context: PatternCheckContext) -> bool:
    """Whether a value computed inside the matched region, other than its result, is used
    outside it (fusing would then lose it): true for a non-dataflow intermediate (visible after
    the block) or one with a user outside the match."""
    defined = set(context.matched_bindings)
    output = context.value_to_bound_var[context.matched_expr]
    intermediates = [v for v in context.matched_bindings if v is not output]
    if any(not isinstance(v, DataflowVar) for v in intermediates):
        return True
    return any(user not in defined for v in intermediates
               for user in context.var_usages.get(v, ()))


__all__ = ["has_leaking_intermediate_variables"]
