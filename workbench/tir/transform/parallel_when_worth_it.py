"""ParallelWhenWorthIt: a parallel loop whose work depends on a symbolic extent runs serially
when the call has little work.

The default schedules make a loop parallel only when its work (innermost iterations) is at
least ``PARALLEL_MIN_WORK`` (``workbench.dlight.cpu.common``); with a symbolic extent (a
dynamic sequence length) the work is unknown when scheduling, so the loop is parallel. At a
length of 1 a layer norm or a transpose then wakes the thread pool for a few hundred
elements, which a static build for that length runs on the calling thread -- on a loaded
machine each wake-up can wait for a core (the dynamic encoder ran 2x the static build's time
at lengths 1 and 7 with 2 threads). The symbolic extent may be the parallel loop's own (rows
of a layer norm) or an inner loop's (a transpose to ``[heads, dim, seq]`` runs 256 parallel
iterations of ``seq`` elements each).

Contract: ``parallel_when_worth_it(func)`` computes the same values. Every ``parallel`` For
whose work -- its extent times the innermost iterations of its body's loops -- is not a
constant, and can be written with variables defined outside the loop, becomes
``if work >= MIN_PARALLEL_WORK: <the loop> else: <the loop, serial>``. A loop whose body's
extents depend on its own iterations (a trimmed last block) is left parallel, as is one whose
work is a constant (the schedule decided it knowing the work).
"""
from __future__ import annotations

from workbench.tir import op
from workbench.tir.expr import IntImm, PrimExpr, Var
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, collect_vars, renew_local_defs
from workbench.tir.stmt import For, ForKind, IfThenElse, SeqStmt, Stmt

__all__ = ["parallel_when_worth_it", "MIN_PARALLEL_WORK"]

#: The work below which a loop runs serially (dlight's PARALLEL_MIN_WORK, which this floor
#: may not import).
MIN_PARALLEL_WORK = 1 << 14

_ONE = op.const(1, "int64")


def _int64(e: PrimExpr) -> PrimExpr:
    return e if e.dtype == "int64" else op.cast("int64", e)


def _work(s: Stmt, bound: set[Var]) -> PrimExpr | None:
    """Innermost iterations of ``s`` (1 for a statement without loops) as an int64
    expression; None when a loop's extent uses a variable bound inside the parallel loop
    (``bound``: its own variable and those of the loops and lets under it)."""
    if isinstance(s, For):
        inner = _work(s.body, bound | {s.loop_var})
        if inner is None or collect_vars(s.extent) & bound:
            return None
        return op.mul(_int64(s.extent), inner)
    if isinstance(s, SeqStmt):
        total: PrimExpr = op.const(0, "int64")
        for child in s.seq:
            w = _work(child, bound)
            if w is None:
                return None
            total = op.add(total, w)
        return op.max(total, _ONE)
    if isinstance(s, IfThenElse):
        branches = [_work(b, bound) for b in (s.then_case, s.else_case) if b is not None]
        if any(w is None for w in branches):
            return None
        out: PrimExpr = _ONE
        for w in branches:
            out = op.max(out, w)
        return out
    body = getattr(s, "body", None)
    if isinstance(body, Stmt):
        var = getattr(s, "var", None)   # a LetStmt binds a variable for its body
        return _work(body, bound | {var} if isinstance(var, Var) else bound)
    return _ONE


class _Guard(IRMutator):
    def visit_For(self, s: For) -> Stmt:
        if s.kind != ForKind.PARALLEL:
            return self.generic_visit(s)
        inner = _work(s.body, {s.loop_var})
        if inner is None or collect_vars(s.extent) & {s.loop_var}:
            return s
        work = op.mul(_int64(s.extent), inner)
        if isinstance(work, IntImm):
            return s    # known when scheduling: the schedule's own decision stands
        if isinstance(inner, IntImm) and inner.value >= MIN_PARALLEL_WORK:
            return s    # worth it from the first iteration on
        enough = op.ge(work, op.const(MIN_PARALLEL_WORK, "int64"))
        # The serial copy defines its variables anew (one definition per variable).
        return IfThenElse(enough, s, renew_local_defs(s.replace(kind=ForKind.SERIAL)))


def parallel_when_worth_it(func: PrimFunc) -> PrimFunc:
    """``func`` with its small symbolic parallel loops run serially (see the module
    docstring)."""
    body = _Guard().visit(func.body)
    return func if body is func.body else func.replace(body=body)
