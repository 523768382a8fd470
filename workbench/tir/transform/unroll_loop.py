"""``unroll_loop``: replicate the bodies of unrolled loops.

A loop of kind ``unroll`` with a constant extent is replaced by copies of its body with the loop
variable set to each value. A loop annotated ``pragma_auto_unroll_max_step = N`` (what the
tuner's unroll decisions become) also unrolls every serial loop below it whose whole nest runs at
most N steps, innermost first, as TVM's UnrollLoop does with ``auto_max_step``.
"""
from __future__ import annotations

from workbench.tir import op
from workbench.tir.expr import IntImm
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, IRVisitor, substitute
from workbench.tir.stmt import For, ForKind, Stmt, seq

# Unrolling beyond this many copies only bloats code; such loops stay loops.
MAX_EXPLICIT_UNROLL = 512


def _steps(stmt: Stmt) -> int:
    """How many innermost statement executions a loop nest performs (constant extents only)."""

    class _Count(IRVisitor):
        def __init__(self) -> None:
            self.total = 1

        def visit_For(self, loop: For) -> None:
            inner = _Count()
            inner.visit(loop.body)
            ext = loop.extent.value if isinstance(loop.extent, IntImm) else MAX_EXPLICIT_UNROLL
            self.total = max(self.total, ext * inner.total)

    c = _Count()
    c.visit(stmt)
    return c.total


def _unroll(loop: For) -> Stmt:
    copies = [substitute(loop.body, {loop.loop_var: op.add(loop.min, k)})
              for k in range(loop.extent.value)]
    return seq(*copies)


class _Unroll(IRMutator):
    def __init__(self) -> None:
        super().__init__()
        self.auto_max_step = 0

    def visit_For(self, loop: For) -> Stmt:
        saved = self.auto_max_step
        step = loop.annotations.get("pragma_auto_unroll_max_step")
        if step is not None:
            self.auto_max_step = int(step)
        body = self.visit(loop.body)
        self.auto_max_step = saved
        if step is not None:
            loop = loop.replace(annotations=loop.annotations.without(
                "pragma_auto_unroll_max_step").without("pragma_unroll_explicit"))
        loop = loop.replace(body=body)
        const_extent = isinstance(loop.extent, IntImm)
        if loop.kind == ForKind.UNROLLED and const_extent and \
                loop.extent.value <= MAX_EXPLICIT_UNROLL:
            return _unroll(loop)
        if (step is None and self.auto_max_step and loop.kind == ForKind.SERIAL and const_extent
                and loop.extent.value * _steps(loop.body) <= self.auto_max_step):
            return _unroll(loop)
        if loop.kind == ForKind.UNROLLED:
            return loop.replace(kind=ForKind.SERIAL)
        return loop


def unroll_loop(func: PrimFunc) -> PrimFunc:
    return func.with_body(_Unroll().visit(func.body))
