"""UnswitchTilePredicates: a register tile runs its inner loops without the tile's bounds
checks when the whole tile is in bounds.

A register tile of ``U`` rows over a dynamic sequence length ``s`` needs a predicate per row
(``row0 + u < s``) because the last tile may stick out; so does the last tile of a static
extent that ``U`` does not divide (5 pixels a tile over a 14-pixel row: ``x * 5 + 4 < 14``).
Lowered, each row's check is an ``if`` inside the reduction loop, so the loop over ``k``
branches once per checked row and iteration and LLVM neither keeps the loop one basic block
nor unswitches it (its threshold is far below a tile's body). Every tile but the last is
whole, so the checks are hoisted out (loop unswitching, TVM's ``LoopPartition`` in effect)::

    for tile in parallel(...):                 for tile in parallel(...):
        for k in range(K):                         if row0 < s and row0 + 1 < s ...:
            if row0 < s: acc0 += ...       ->          for k in range(K): acc0 += ...; ...
            if row0 + 1 < s: acc1 += ...           else:
                                                       (the partial tile, below)

Contract: ``unswitch_tile_predicates(func)`` computes the same values. For the outermost
``For`` whose body holds ``if`` statements (without ``else``) whose conditions read no buffer,
use no variable bound inside that body (inner loop or let variables), use some variable, and
either use a symbolic shape variable of the function (a variable of a parameter buffer's
shape) or compare with a constant (``e < 14``: a static tile's tail), with at least one of
them inside an inner loop, the body becomes ``if (all those conditions) { body with each such
if replaced by its then-branch } else { rest }``. ``rest`` is the body itself, except in two
cases. When the conditions include a tile's row checks (``base + c < b`` for one ``b`` and
constant offsets ``c``, at most :data:`MAX_VERSIONS`), a partial tile, whose first ``m`` rows
are in bounds, runs a version of the body with those ``m`` checks dropped and the rest's
statements removed (``if base + c_{m-1} < b`` for ``m`` from the most rows down). When there
is one condition, ``rest`` is the body with that check's statements removed. Only one loop
level is split per loop nest.
"""
from __future__ import annotations

from workbench.ir.structural import structural_equal
from workbench.tir import op
from workbench.tir.arith import Analyzer
from workbench.tir.expr import LT, BufferLoad, IntImm, PrimExpr, Var
from workbench.tir.function import PrimFunc
from workbench.tir.functor import (
    IRMutator, IRVisitor, any_node, collect_vars, local_defs, renew_local_defs,
)
from workbench.tir.stmt import Block, Evaluate, For, IfThenElse, LetStmt, Stmt

__all__ = ["unswitch_tile_predicates", "MAX_VERSIONS"]

#: At most this many row checks get a version of the loop body each (the code grows by one
#: copy per version; MAX_U of the matmul rule is 8).
MAX_VERSIONS = 8


def _shape_vars(func: PrimFunc) -> set[Var]:
    out: set[Var] = set()
    for buf in func.buffer_map.values():
        for d in buf.shape:
            out |= collect_vars(d)
    return out


def _reads_buffer(e: PrimExpr) -> bool:
    return any_node(e, lambda n: isinstance(n, BufferLoad))


class _Conditions(IRVisitor):
    """The hoistable conditions under one loop body (see the module docstring).

    A statements-only walk (no ``visit_`` of an expression: conditions are read whole, never
    descended into), run once per loop level on the way down, so it must stay cheap: the
    variables bound inside the body are those bound on the path to each ``if`` (a condition
    can only use a definition that encloses it), collected as it walks."""

    def __init__(self, shape_vars: set[Var]) -> None:
        self.bound: set[Var] = set()
        self.shape_vars = shape_vars
        self.depth = 0                      # inner loops around the current node
        self.found: list[PrimExpr] = []
        self.in_loop = False                # some condition sits inside an inner loop

    def _inside(self, s: Stmt, defined: tuple[Var, ...], loop: bool) -> None:
        new = [v for v in defined if v not in self.bound]
        self.bound.update(new)
        self.depth += loop
        self.generic_visit(s)
        self.depth -= loop
        self.bound.difference_update(new)

    def visit_For(self, s: For) -> None:
        self._inside(s, (s.loop_var,), True)

    def visit_LetStmt(self, s: LetStmt) -> None:
        self._inside(s, (s.var,), False)

    def visit_Block(self, s: Block) -> None:
        self._inside(s, tuple(iv.var for iv in s.iter_vars), False)

    def visit_IfThenElse(self, s: IfThenElse) -> None:
        cond = s.condition
        if s.else_case is None and self._hoistable(cond):
            if not any(structural_equal(cond, c) for c in self.found):
                self.found.append(cond)
            self.in_loop = self.in_loop or self.depth > 0
        self.generic_visit(s)

    def _hoistable(self, cond: PrimExpr) -> bool:
        used = collect_vars(cond)
        if not used or used & self.bound or _reads_buffer(cond) or local_defs(cond):
            return False
        # a static tile's tail check (``x * 5 + 4 < 14``), or any check on a symbolic shape;
        # not an arbitrary static condition (``i < 5`` beside ``5 <= i`` would give a fast
        # path that never runs, at the price of a second copy of the body)
        return bool(used & self.shape_vars) or \
            (isinstance(cond, LT) and isinstance(cond.b, IntImm))


class _DropChecks(IRMutator):
    """The ``if``s on the ``true`` conditions replaced by their then-branches, those on the
    ``false`` ones removed."""

    def __init__(self, true: list[PrimExpr], false: list[PrimExpr] = ()) -> None:
        super().__init__()
        self.true, self.false = list(true), list(false)

    def visit_IfThenElse(self, s: IfThenElse) -> Stmt:
        if s.else_case is None:
            if any(structural_equal(s.condition, c) for c in self.true):
                return self.visit(s.then_case)
            if any(structural_equal(s.condition, c) for c in self.false):
                return Evaluate(op.const(0, "int32"))
        return self.generic_visit(s)


def _row_checks(conds: list[PrimExpr]) -> list[PrimExpr]:
    """The largest family ``base + c_0 < b, base + c_1 < b, ...`` (one ``b``, constant
    offsets ``c_0 < c_1 < ...``) among ``conds``, in offset order: a tile's row checks, of
    which (the tile being partial) the first few hold and the rest fail."""
    ana = Analyzer()
    best: list[PrimExpr] = []
    lts = [c for c in conds if isinstance(c, LT)]
    for head in lts:
        family: list[tuple[int, PrimExpr]] = []
        for c in lts:
            if not structural_equal(c.b, head.b):
                continue
            diff = ana.simplify(op.sub(c.a, head.a))
            if isinstance(diff, IntImm):
                family.append((diff.value, c))
        offsets = [o for o, _ in family]
        if len(family) > len(best) and len(set(offsets)) == len(offsets):
            best = [c for _, c in sorted(family, key=lambda t: t[0])]
    return best if len(best) > 1 else []


def _partial_tiles(body: Stmt, rows: list[PrimExpr]) -> Stmt:
    """``body`` specialised for each number ``m`` of rows in bounds (checks 0..m-1 hold,
    m.. fail), tried from the most rows down, the last version keeping the first check."""
    # Each version defines its loops' and buffers' variables anew (one definition each).
    out: Stmt = renew_local_defs(_DropChecks([], rows[1:]).visit(body))
    for m in range(2, len(rows) + 1):
        version = renew_local_defs(_DropChecks(rows[:m], rows[m:]).visit(body))
        out = IfThenElse(rows[m - 1], version, out)
    return out


class _Unswitcher(IRMutator):
    def __init__(self, shape_vars: set[Var]) -> None:
        super().__init__()
        self.shape_vars = shape_vars

    def visit_For(self, s: For) -> Stmt:
        finder = _Conditions(self.shape_vars)
        finder.visit(s.body)
        if not (finder.found and finder.in_loop):
            return self.generic_visit(s)
        whole = finder.found[0]
        for c in finder.found[1:]:
            whole = op.logical_and(whole, c)
        fast = _DropChecks(finder.found).visit(s.body)
        rows = _row_checks(finder.found)
        # A partial tile of a register-tiled loop nest: one version per number of rows in
        # bounds, each without checks in its inner loops (a check inside the reduction loop
        # kept the accumulators out of registers: 2.9x the time of a static build at 7 rows).
        if rows and len(rows) <= MAX_VERSIONS:
            rest = _partial_tiles(s.body, rows)
        elif len(finder.found) == 1:
            # one check (a static tile's one row past the end): the partial tile skips it
            rest = renew_local_defs(_DropChecks([], finder.found).visit(s.body))
        else:
            rest = renew_local_defs(s.body)
        return s.replace(body=IfThenElse(whole, fast, rest))


def unswitch_tile_predicates(func: PrimFunc) -> PrimFunc:
    """``func`` with its tiles' bounds checks hoisted (see the module docstring)."""
    shape_vars = _shape_vars(func)
    body = _Unswitcher(shape_vars).visit(func.body)
    return func if body is func.body else func.replace(body=body)
