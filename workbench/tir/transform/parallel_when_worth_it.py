"""ParallelWhenWorthIt: a parallel loop over a symbolic extent runs serially when the call
has little work.

The default schedules make a loop parallel only when its work (innermost iterations) is at
least ``PARALLEL_MIN_WORK`` (``workbench.dlight.cpu.common``); with a symbolic extent (a
dynamic sequence length) the work is unknown when scheduling, so the loop is parallel. At a
length of 1 a layer norm or a transpose then wakes the thread pool for a few hundred
elements, which a static build for that length runs on the calling thread -- on a loaded
machine each wake-up can wait for a core (the dynamic encoder ran 2x the static build's time
at lengths 1 and 7 with 2 threads).

Contract: ``parallel_when_worth_it(func)`` computes the same values. Every ``parallel`` For
whose extent is not a constant and whose body's work per iteration is a constant ``w`` (the
innermost iterations of its loops, all of constant extent) becomes
``if extent * w >= MIN_PARALLEL_WORK: <the loop> else: <the loop, serial>``.
"""
from __future__ import annotations

from workbench.tir import op
from workbench.tir.expr import IntImm
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, renew_local_defs
from workbench.tir.stmt import For, ForKind, IfThenElse, SeqStmt, Stmt

__all__ = ["parallel_when_worth_it", "MIN_PARALLEL_WORK"]

#: The work below which a loop runs serially (dlight's PARALLEL_MIN_WORK, which this floor
#: may not import).
MIN_PARALLEL_WORK = 1 << 14


def _work(s: Stmt) -> int | None:
    """Innermost iterations of ``s`` (1 for a statement without loops), None when a loop's
    extent is not a constant."""
    if isinstance(s, For):
        inner = _work(s.body)
        return None if inner is None or not isinstance(s.extent, IntImm) else \
            s.extent.value * inner
    if isinstance(s, SeqStmt):
        total = 0
        for child in s.seq:
            w = _work(child)
            if w is None:
                return None
            total += w
        return max(total, 1)
    body = getattr(s, "body", None)
    if isinstance(body, Stmt):
        return _work(body)
    if isinstance(s, IfThenElse):
        branches = [_work(b) for b in (s.then_case, s.else_case) if b is not None]
        return None if any(w is None for w in branches) else max(branches, default=1)
    return 1


class _Guard(IRMutator):
    def visit_For(self, s: For) -> Stmt:
        if s.kind != ForKind.PARALLEL or isinstance(s.extent, IntImm):
            return self.generic_visit(s)
        w = _work(s.body)
        if w is None or w >= MIN_PARALLEL_WORK:
            return s
        enough = op.ge(op.mul(s.extent, op.const(w, s.extent.dtype)),
                       op.const(MIN_PARALLEL_WORK, s.extent.dtype))
        # The serial copy defines its variables anew (one definition per variable).
        return IfThenElse(enough, s, renew_local_defs(s.replace(kind=ForKind.SERIAL)))


def parallel_when_worth_it(func: PrimFunc) -> PrimFunc:
    """``func`` with its small symbolic parallel loops run serially (see the module
    docstring)."""
    body = _Guard().visit(func.body)
    return func if body is func.body else func.replace(body=body)
