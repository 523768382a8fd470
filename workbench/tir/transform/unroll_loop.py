"""``unroll_loop``: replicate the bodies of unrolled loops.

A loop of kind ``unroll`` with a constant extent is replaced by copies of its body with the loop
variable set to each value. A loop annotated ``pragma_auto_unroll_max_step = N`` (what the
tuner's unroll decisions become) also unrolls every serial loop below it whose whole nest runs at
most N steps, innermost first, as TVM's UnrollLoop does with ``auto_max_step``. A vectorized
loop counts as one step per :data:`STEP_LANES` lanes (TVM counts it as one step whatever its
width, as it vectorizes before it unrolls; but a 64-lane statement is four AVX-512 loads and
stores, and a tuned matmul's write-back ``for ax0 in range(512): C[ax0, 0:64] = ...`` unrolled
into 512 copies made LLVM's backend spend 1.2 s on one candidate). Beyond TVM too, a loop of more
than :data:`AUTO_MAX_EXTENT` iterations stays a loop whatever its steps (512 unrolled scalar
copies in a write-back kept LLVM's loop vectorizer busy 0.7 s; LLVM unrolls such a loop itself
as far as pays).
"""
from __future__ import annotations

from workbench.tir import op
from workbench.tir.expr import IntImm
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, local_defs, renew_local_defs, substitute
from workbench.ir.node import field_names
from workbench.tir.stmt import For, ForKind, SeqStmt, Stmt, seq

# Unrolling beyond this many copies only bloats code; such loops stay loops.
MAX_EXPLICIT_UNROLL = 512
#: A vectorized loop counts one step per this many lanes (a 512-bit register of float32).
STEP_LANES = 16
#: Auto-unrolling leaves loops longer than this as loops.
AUTO_MAX_EXTENT = 64


def _steps(stmt: Stmt) -> int:
    """How many leaf statements executing ``stmt`` runs (constant extents only). Statements
    in a sequence add up, so an inner loop that was already unrolled into N copies still
    counts N steps (as TVM's ``step_count``); a non-constant loop counts as too many."""
    if isinstance(stmt, For):
        if stmt.kind == ForKind.VECTORIZED and isinstance(stmt.extent, IntImm):
            # VectorizeLoop turns it into one vector statement: a step per register's worth
            # of lanes, not ``extent`` steps (see the module docstring)
            return -(-stmt.extent.value // STEP_LANES) * _steps(stmt.body)
        ext = stmt.extent.value if isinstance(stmt.extent, IntImm) else MAX_EXPLICIT_UNROLL + 1
        return ext * _steps(stmt.body)
    if isinstance(stmt, SeqStmt):
        children = list(stmt.seq)
    else:
        children = [v for v in (getattr(stmt, n) for n in field_names(type(stmt)))
                    if isinstance(v, Stmt)]
    if not children:
        return 1
    return sum(_steps(c) for c in children)


def _unroll(loop: For) -> Stmt:
    # Every copy after the first defines its inner loops' (and lets') variables anew: one
    # definition per variable, as the printed text (and TVM's SSA form) has. The body's own
    # definitions are found once, and each copy is one walk (renewal and substitution
    # together): Winograd's unrolled transforms spent 55% of UnrollLoop finding them again.
    n = loop.extent.value
    if n <= 0:
        return seq()
    defined = local_defs(loop.body)
    copies = [substitute(loop.body, {loop.loop_var: op.add(loop.min, 0)})]
    copies += [renew_local_defs(loop.body, {loop.loop_var: op.add(loop.min, k)}, defined)
               for k in range(1, n)]
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
                and loop.extent.value <= AUTO_MAX_EXTENT
                and loop.extent.value * _steps(loop.body) <= self.auto_max_step):
            return _unroll(loop)
        if loop.kind == ForKind.UNROLLED:
            return loop.replace(kind=ForKind.SERIAL)
        return loop


def unroll_loop(func: PrimFunc) -> PrimFunc:
    return func.with_body(_Unroll().visit(func.body))
