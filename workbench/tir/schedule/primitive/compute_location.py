"""compute_at / reverse_compute_at, and the compute-location candidates the sampler draws from.

``compute_at(block, loop)`` moves a producer block under a loop of its consumers: new loops
(``ax0``, ``ax1``, ...) iterate exactly the part of the producer's output that the consumers
read in one iteration of ``loop``. ``reverse_compute_at`` moves a consumer under a loop of its
producers, covering what they write. The steps follow TVM's ``compute_at.cc``:

1. checks: same scope, the loop is not an ancestor of the block, a complete or reduction
   block, not an output block (compute_at only);
2. the insertion point among the loop body's statements: after every producer and before every
   consumer found there; all consumers (compute_at) / producers (reverse) must be there;
3. *provided* regions (what one block instance writes, or reads for reverse) and *required*
   regions (the consumers' reads / producers' writes, with the loops below ``loop`` relaxed by
   ``Analyzer.int_set``);
4. per block variable, the domain to iterate (``dom``) and where it is valid (``bound``: the
   buffer's extent and the variable's own domain); a ``bound`` tighter than ``dom`` that cannot
   be merged into it becomes the block's predicate;
5. the block's old loop nest is removed and the new one inserted.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NoReturn, Sequence

from workbench.ir import dtype as dt
from workbench.tir import op
from workbench.tir.arith import NEG_INF, POS_INF, Analyzer, IntervalSet
from workbench.tir.buffer import Buffer, BufferRegion, Range
from workbench.tir.expr import Add, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Var
from workbench.tir.function import PrimFunc
from workbench.tir.functor import substitute
from workbench.tir.schedule.analysis.dataflow import check_block_dataflow
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.primitive import block_scope as S
from workbench.tir.schedule.state import FuncIndex, replace_stmt
from workbench.tir.schedule.utils import realizes_under, uses_var
from workbench.tir.stmt import Block, BlockRealize, For, ForKind, IterType, SeqStmt, Stmt

NDSet = list[IntervalSet]


# ---- interval helpers (None stands for the empty set, TVM's IntSet::Nothing) ------------------

def _inf(x: PrimExpr) -> bool:
    return x is POS_INF or x is NEG_INF


def _union(an: Analyzer, a: IntervalSet | None, b: IntervalSet | None) -> IntervalSet | None:
    if a is None or b is None:
        return b if a is None else a
    lo = NEG_INF if a.min_value is NEG_INF or b.min_value is NEG_INF else \
        an.simplify(op.min(a.min_value, b.min_value))
    hi = POS_INF if a.max_value is POS_INF or b.max_value is POS_INF else \
        an.simplify(op.max(a.max_value, b.max_value))
    return IntervalSet(lo, hi)


def _intersect(an: Analyzer, a: IntervalSet, b: IntervalSet) -> IntervalSet:
    lo = b.min_value if a.min_value is NEG_INF else a.min_value if b.min_value is NEG_INF else \
        an.simplify(op.max(a.min_value, b.min_value))
    hi = b.max_value if a.max_value is POS_INF else a.max_value if b.max_value is POS_INF else \
        an.simplify(op.min(a.max_value, b.max_value))
    return IntervalSet(lo, hi)


def _simplified(an: Analyzer, s: IntervalSet) -> IntervalSet:
    return IntervalSet(s.min_value if _inf(s.min_value) else an.simplify(s.min_value),
                       s.max_value if _inf(s.max_value) else an.simplify(s.max_value))


def _equal(an: Analyzer, a: PrimExpr, b: PrimExpr) -> bool:
    if a is b:
        return True
    return not _inf(a) and not _inf(b) and an.can_prove_equal(a, b)


def _interval(lo: PrimExpr | int, hi: PrimExpr | int) -> IntervalSet:
    return IntervalSet(op.convert(lo), op.convert(hi))


def _region_set(an: Analyzer, region: Sequence[Range]) -> NDSet:
    return [IntervalSet(an.simplify(r.min), an.simplify(op.sub(op.add(r.min, r.extent), 1)))
            for r in region]


def _nd_union(an: Analyzer, sets: list[NDSet]) -> NDSet:
    out = sets[0]
    for s in sets[1:]:
        out = [_union(an, a, b) for a, b in zip(out, s)]
    return out


# ---- block variable domains -------------------------------------------------------------------

@dataclass
class _VarDom:
    """What a new loop must iterate for one block variable (``dom``) and where the variable is
    valid (``bound``); a bound tighter than dom that cannot be folded in becomes a predicate."""

    dom: IntervalSet | None = None
    bound: IntervalSet | None = None

    def union(self, an: Analyzer, other: "_VarDom") -> None:
        # (d0 ^ b0) v (d1 ^ b1) relaxed to (d0 v d1) ^ (b0 v b1), as TVM does
        self.dom = _union(an, self.dom, other.dom)
        self.bound = _union(an, self.bound, other.bound)

    def simplify(self, an: Analyzer) -> None:
        if self.dom is None:
            b = self.bound
            if b is not None and not _inf(b.min_value) and not _inf(b.max_value):
                self.dom, self.bound = _simplified(an, b), None
            return
        self.dom = _simplified(an, self.dom)
        self.bound = _simplified(an, self.bound)
        inter = _simplified(an, _intersect(an, self.dom, self.bound))
        if _equal(an, self.dom.min_value, inter.min_value) and \
                _equal(an, self.dom.max_value, inter.max_value):
            self.bound = None
        elif _equal(an, self.bound.min_value, inter.min_value) and \
                _equal(an, self.bound.max_value, inter.max_value):
            self.dom, self.bound = self.bound, None
        elif isinstance(inter.min_value, IntImm) and isinstance(inter.max_value, IntImm):
            self.dom, self.bound = inter, None


def _solve(an: Analyzer, provided: IntervalSet, required: IntervalSet, dim_max: PrimExpr
           ) -> tuple[Var, _VarDom] | None:
    """The block variable behind one provided dimension and the domain that covers the required
    dimension (TVM's SolveBlockVarDomain); None when the index has no recognised form."""
    pmin, pmax = an.simplify(provided.min_value), an.simplify(provided.max_value)
    rmin, rmax = required.min_value, required.max_value
    if _inf(rmin) or _inf(rmax):
        return None
    if isinstance(pmin, Mul):
        for v, e in ((pmin.a, pmin.b), (pmin.b, pmin.a)):
            if isinstance(v, Var):
                return v, _VarDom(_interval(op.floordiv(rmin, e), op.floordiv(rmax, e)),
                                  _interval(0, op.floordiv(dim_max, e)))
    if not _equal(an, pmin, pmax):
        return None
    if isinstance(pmin, Var):
        return pmin, _VarDom(_interval(rmin, rmax), _interval(0, dim_max))
    if isinstance(pmin, Add) and isinstance(pmin.a, Var) and isinstance(pmin.b, IntImm):
        # ``v + c``: what TVM's affine inverse gives for an offset index
        c = pmin.b
        return pmin.a, _VarDom(
            _interval(an.simplify(op.sub(rmin, c)), an.simplify(op.sub(rmax, c))),
            _interval(an.simplify(op.neg(c)), an.simplify(op.sub(dim_max, c))))
    if isinstance(pmin, FloorDiv) and an.can_prove_greater_equal(pmin.b, 1):
        f = pmin.b
        lo, hi = op.mul(rmin, f), an.simplify(op.sub(op.add(op.mul(rmax, f), f), 1))
        if isinstance(pmin.a, Var):
            return pmin.a, _VarDom(_interval(lo, hi), _interval(
                0, an.simplify(op.sub(op.add(op.mul(dim_max, f), f), 1))))
        return _solve(an, IntervalSet.single_point(pmin.a), _interval(lo, hi), dim_max)
    if isinstance(pmin, FloorMod) and isinstance(pmin.a, Var):
        return pmin.a, _VarDom()  # x % f constrains nothing about x
    return None


def _block_var_domains(an: Analyzer, block: Block, provided: dict[Buffer, list[NDSet]],
                       required: dict[Buffer, list[NDSet]], fail: Callable[[str], NoReturn]
                       ) -> list[_VarDom]:
    doms = {iv.var: _VarDom() for iv in block.iter_vars}
    for buf, provided_sets in provided.items():
        required_sets = required.get(buf)
        if not required_sets:
            continue
        need = _nd_union(an, required_sets)
        have = _nd_union(an, provided_sets)
        for d, (p, r) in enumerate(zip(have, need)):
            if p.is_single_point() and isinstance(p.min_value, IntImm):
                continue  # a constant index provides what it provides
            dim_max = an.simplify(op.max(op.sub(buf.shape[d], 1), 0))
            solved = _solve(an, p, r, dim_max)
            if solved is None:
                fail(f"cannot express the region of {buf.name!r} it must cover in dimension {d} "
                     f"through its iteration variables (index {p!r}, required {r!r})")
            var, info = solved
            if var in doms:
                doms[var].union(an, info)
    out = []
    for iv in block.iter_vars:
        info = doms[iv.var]
        own = IntervalSet.from_range(iv.dom)
        info.bound = own if info.bound is None else _intersect(an, info.bound, own)
        info.simplify(an)
        out.append(info)
    return out


def _new_loop_nest(an: Analyzer, realize: BlockRealize, doms: list[_VarDom],
                   preserve_unit_loops: bool) -> Stmt:
    """Loops ``ax0, ax1, ...`` iterating ``doms``, around ``realize``'s block rebound to them."""
    block = realize.block
    loops: list[tuple[Var, PrimExpr]] = []
    values: list[PrimExpr] = []
    pred: PrimExpr = op.const(True)
    for iv, info in zip(block.iter_vars, doms):
        d = info.dom
        if d is None or _inf(d.min_value) or _inf(d.max_value):
            lo, extent = iv.dom.min, iv.dom.extent
        else:
            lo, extent = d.min_value, an.simplify(op.add(op.sub(d.max_value, d.min_value), 1))
        if preserve_unit_loops or not (isinstance(extent, IntImm) and extent.value == 1):
            bits = max(dt.parse(lo.dtype).bits, dt.parse(extent.dtype).bits)
            var = Var(f"ax{len(loops)}", f"int{bits}")
            loops.append((var, extent))
            value = op.add(lo, var)
            an.bind(var, Range(op.const(0, var.dtype), extent))
        else:
            value = lo
        values.append(value)
        b = info.bound
        if b is not None:
            if not _inf(b.min_value) and not an.can_prove(op.ge(value, b.min_value)):
                pred = op.logical_and(pred, op.ge(value, b.min_value))
            if not _inf(b.max_value) and not an.can_prove(op.lt(value, op.add(b.max_value, 1))):
                pred = op.logical_and(pred, op.lt(value, op.add(b.max_value, 1)))
    stmt: Stmt = BlockRealize(tuple(values), an.simplify(pred), block)
    for var, extent in reversed(loops):
        stmt = For(var, op.const(0, var.dtype), extent, ForKind.SERIAL, stmt)
    return stmt


# ---- the primitive ----------------------------------------------------------------------------

def _subtrees(loop: For) -> list[Stmt]:
    return list(loop.body.seq) if isinstance(loop.body, SeqStmt) else [loop.body]


def _insertion_point(subtrees: list[Stmt], producers: list[str], consumers: list[str],
                     need_all: list[str], what: str, index: int,
                     fail: Callable[[str], NoReturn]) -> int:
    """TVM's FindInsertionPoint: positions after the last producer and up to the first consumer
    among ``subtrees``; every block of ``need_all`` (the ``what``) must be among them."""
    last_producer, first_consumer = -1, len(subtrees)
    seen: set[str] = set()
    for i, st in enumerate(subtrees):
        for r in realizes_under(st):
            n = r.block.name_hint
            seen.add(n)
            if n in producers:
                last_producer = i
            if n in consumers:
                first_consumer = min(first_consumer, i)
    missing = [n for n in need_all if n not in seen]
    if missing:
        fail(f"not all {what} of the block are under the loop: {missing} are outside it")
    if last_producer >= first_consumer:
        fail("under the loop, a producer of the block comes after one of its consumers, so no "
             "position lies between them")
    lo, hi = last_producer + 1, first_consumer
    if index == -1:
        return hi
    if index == -2:
        return lo
    if lo <= index <= hi:
        return index
    fail(f"index {index} is not a valid position; use -1 (last), -2 (first) or a value in "
         f"[{lo}, {hi}]")


def _relaxed_regions(an: Analyzer, index: FuncIndex, names: list[str], loop: For,
                     pick: Callable[[Block], tuple[BufferRegion, ...]],
                     wanted: dict[Buffer, list[NDSet]]) -> None:
    """Append to ``wanted[buf]`` the region of ``buf`` each block touches during one iteration
    of ``loop``: its bindings substituted, the loops between it and ``loop`` relaxed."""
    for name in names:
        info = index.blocks[name]
        binding = {iv.var: v for iv, v in zip(info.block.iter_vars, info.realize.iter_values)}
        # converted once per block: int_set would redo it for every bound of every dimension
        relax = {lp.loop_var: IntervalSet.from_range(Range(lp.min, lp.extent))
                 for lp in S.loops_between(info.ancestors, loop)}
        for br in pick(info.block):
            if br.buffer not in wanted:
                continue
            dims = []
            for r in br.region:
                lo = substitute(r.min, binding)
                hi = substitute(op.sub(op.add(r.min, r.extent), 1), binding)
                dims.append(IntervalSet(an.int_set(lo, relax).min_value,
                                        an.int_set(hi, relax).max_value))
            wanted[br.buffer].append(dims)


def _check_scope(index: FuncIndex, name: str, loop_var: Var, fail: Callable[[str], NoReturn]
                 ) -> list[For]:
    """The loop and the block share a scope and the loop does not contain the block; returns
    the loops from the scope down to ``loop`` (inclusive)."""
    info, linfo = index.blocks[name], index.loops[loop_var]
    loop = linfo.loop
    path: list[For] = [loop]
    for s in reversed(linfo.ancestors):
        if isinstance(s, For):
            path.append(s)
        elif isinstance(s, Block):
            if s is not info.scope_block:
                fail("the block and the loop are not in the same block scope")
            break
    if any(a is loop for a in info.ancestors):
        fail("the loop is an ancestor of the block")
    return path[::-1]


def compute_at(func: PrimFunc, index: FuncIndex, name: str, loop_var: Var,
               preserve_unit_loops: bool = False, insert_index: int = -1,
               reverse: bool = False, check_only: bool = False, check_dataflow: bool = True
               ) -> PrimFunc:
    """Move block ``name`` under loop ``loop_var`` (see the module docstring). ``reverse``
    selects reverse_compute_at. ``check_only`` runs every check (raising the same errors) but
    returns ``func`` unchanged instead of building the moved function. ``check_dataflow=False``
    (a schedule made with ``enable_check=False``) skips the soundness check of the result
    (analysis/dataflow.py): the caller vouches for it, as with TVM's ``enable_check``."""
    prim = "reverse_compute_at" if reverse else "compute_at"
    where = f"block {name!r} and loop {loop_var.name!r}"

    def fail(reason: str) -> NoReturn:
        raise ScheduleError(prim, where, reason)

    S.scope_of(index, name, prim)
    info = index.blocks[name]
    block = info.block
    producers, consumers = S.producers_consumers(index, name)
    S.check_complete_or_reduction(index, name, prim)
    outer = _check_scope(index, name, loop_var, fail)
    if not reverse:
        S.check_not_output(index, name, prim)
    loop = index.loops[loop_var].loop
    position = _insertion_point(_subtrees(loop), producers, consumers,
                                producers if reverse else consumers,
                                "producers" if reverse else "consumers", insert_index, fail)

    if reverse and not producers:
        fail("the block has no producer in its scope (it reads only the scope's inputs), so "
             "there is no producer loop to move it under")
    if not reverse and not consumers:
        fail("the block has no consumer in its scope, so there is no consumer loop to move it "
             "under")
    an = Analyzer()
    for lp in outer:
        an.bind(lp.loop_var, Range(lp.min, lp.extent), allow_override=True)
    provided: dict[Buffer, list[NDSet]] = {}
    for br in (block.reads if reverse else block.writes):
        provided.setdefault(br.buffer, []).append(_region_set(an, br.region))
    required: dict[Buffer, list[NDSet]] = {buf: [] for buf in provided}
    _relaxed_regions(an, index, producers if reverse else consumers, loop,
                     (lambda b: b.writes) if reverse else (lambda b: b.reads), required)
    doms = _block_var_domains(an, block, provided, required, fail)
    _check_reduction_split(block, doms, outer, fail)
    if check_only and not reverse and \
            not any(lp.kind in (ForKind.PARALLEL, ForKind.VECTORIZED) for lp in outer):
        # Nothing left to check on the built function (see below): skip building it, which
        # is most of the cost when sample_compute_location tries every candidate loop.
        S.removal_point(index, name, prim)
        return func
    nest = _new_loop_nest(an, info.realize, doms, preserve_unit_loops)

    removed = S.remove_leaf_block(func, index, name, prim)
    idx2 = FuncIndex(removed)
    linfo2 = idx2.loops[loop_var]
    items = _subtrees(linfo2.loop)
    items.insert(position, nest)
    new_loop = linfo2.loop.replace(body=SeqStmt(tuple(items)))
    new_func = replace_stmt(removed, linfo2.ancestors, linfo2.loop, new_loop)
    # The moved block must still read only complete, final data, and its consumers too.
    if check_dataflow:
        # compute_at solves the domain from the consumers' reads at the new place, so only
        # reverse_compute_at (domains from several producers, reductions split or read
        # partially) needs the scope check; both re-check the parallel loops around the block.
        check_block_dataflow(new_func, [name], prim, where, scopes=reverse)
    return func if check_only else new_func


def _check_reduction_split(block: Block, doms: list[_VarDom], outer: list[For],
                           fail: Callable[[str], NoReturn]) -> None:
    """A reduction variable whose new domain depends on the loops above the insertion point
    (reverse_compute_at under the loop that produces the reduced data) splits the reduction
    over their iterations. The init runs where the variable is at its minimum and the partial
    reductions accumulate, so the iterations must cover the variable's domain exactly once, in
    ascending order: one loop ``t`` with ``lo(t + 1) == hi(t) + 1``, starting at the domain's
    minimum and ending at its maximum. Anything else (an overlap recomputes a term twice, a
    reversed order re-initialises after accumulating) is refused; TVM does not check this."""
    for iv, info in zip(block.iter_vars, doms):
        if iv.iter_type == IterType.DATA_PAR or info.dom is None:
            continue
        lo, hi = info.dom.min_value, info.dom.max_value
        if _inf(lo) or _inf(hi):
            continue
        deps = [lp for lp in outer if uses_var(lo, lp.loop_var) or uses_var(hi, lp.loop_var)]
        if not deps:
            continue                       # the whole reduction in every iteration
        what = f"the reduction variable {iv.var.name!r} would be split over the iterations of "
        if len(deps) > 1:
            fail(what + f"several loops {[lp.loop_var.name for lp in deps]}; the partial "
                 "reductions would not provably run once each, in order")
        t = deps[0]
        if isinstance(t.extent, IntImm) and t.extent.value == 1:
            continue
        an = Analyzer()
        for lp in outer:
            if lp is not t:
                an.bind(lp.loop_var, Range(lp.min, lp.extent))
        an.bind(t.loop_var, Range(t.min, op.sub(t.extent, 1)))
        v = t.loop_var
        first, last = t.min, an.simplify(op.sub(op.add(t.min, t.extent), 1))
        step = substitute(lo, {v: op.add(v, 1)})
        dom_lo = iv.dom.min
        dom_hi = op.sub(op.add(iv.dom.min, iv.dom.extent), 1)
        ok = (an.can_prove(op.eq(step, op.add(hi, 1))) and
              an.can_prove(op.le(substitute(lo, {v: first}), dom_lo)) and
              an.can_prove(op.ge(substitute(hi, {v: last}), dom_hi)))
        if not ok:
            fail(what + f"loop {v.name!r} ([{lo}, {hi}] per iteration), but not as consecutive "
                 "pieces in ascending order that cover its domain once: the partial reductions "
                 "would double-count, miss terms or re-initialise after accumulating")


def can_compute_at(func: PrimFunc, index: FuncIndex, name: str, loop_var: Var,
                   preserve_unit_loops: bool = True) -> bool:
    try:
        compute_at(func, index, name, loop_var, preserve_unit_loops, check_only=True)
    except ScheduleError:
        return False
    return True


# ---- candidates for sample_compute_location ---------------------------------------------------

INLINE, ROOT = "inline", "root"


def _lowest_common_loop(index: FuncIndex, names: list[str]) -> For | None:
    """The innermost loop containing every named block (None if only their scope does)."""
    chains = [[s for s in index.blocks[n].ancestors if isinstance(s, (For, Block))] for n in names]
    common: list = []
    for items in zip(*chains):
        if any(x is not items[0] for x in items):
            break
        common.append(items[0])
    if len(names) == 1:
        common = chains[0]
    return common[-1] if common and isinstance(common[-1], For) else None


def _candidate_loops(index: FuncIndex, name: str) -> list[tuple[int, Var]]:
    """The loops CollectComputeLocation considers for ``name`` before asking compute_at:
    ``(i, loop_var)`` with ``i`` the loop's position above the first consumer, for loops down to
    the innermost one holding all consumers, skipping unit loops, stopping at a data-parallel
    loop after a reduction loop and at reduction loops after the last data-parallel one."""
    _, consumers = S.producers_consumers(index, name)
    if not consumers:
        return []
    boundary = _lowest_common_loop(index, consumers)
    if boundary is None:
        return []
    loops = index.blocks[consumers[0]].loops
    n_candidates = next(i for i, lp in enumerate(loops) if lp is boundary) + 1
    kinds = [S.loop_iter_type(lp) for lp in loops[:n_candidates]]
    last_datapar = max((i for i, k in enumerate(kinds) if k == IterType.DATA_PAR), default=-1)
    seen_reduce = False
    out: list[tuple[int, Var]] = []
    for i in range(n_candidates):
        lp = loops[i]
        if isinstance(lp.extent, IntImm) and lp.extent.value == 1:
            continue
        if kinds[i] == IterType.DATA_PAR:
            if seen_reduce:
                break
        else:
            seen_reduce = True
            if i > last_datapar:
                break
        out.append((i, lp.loop_var))
    return out


def collect_compute_location(func: PrimFunc, index: FuncIndex, name: str
                             ) -> list[tuple[int, str | Var]]:
    """TVM's CollectComputeLocation: ``(decision, location)`` pairs. -2 is inline (if the
    block can be inlined), -1 the root, ``i >= 0`` the i-th loop above the first consumer
    among :func:`_candidate_loops` that compute_at accepts."""
    from workbench.tir.schedule.primitive.compute_inline import can_compute_inline
    out: list[tuple[int, str | Var]] = []
    if can_compute_inline(func, index, name):
        out.append((-2, INLINE))
    out.append((-1, ROOT))
    for i, var in _candidate_loops(index, name):
        if can_compute_at(func, index, name, var, True):
            out.append((i, var))
    return out


def decided_compute_location(func: PrimFunc, index: FuncIndex, name: str, decision: int
                             ) -> str | Var | None:
    """The location of ``decision`` if :func:`collect_compute_location` would list it, else
    None; checks only that one location, which is what replaying a stored decision needs."""
    from workbench.tir.schedule.primitive.compute_inline import can_compute_inline
    if decision == -1:
        return ROOT
    if decision == -2:
        return INLINE if can_compute_inline(func, index, name) else None
    for i, var in _candidate_loops(index, name):
        if i == decision:
            return var if can_compute_at(func, index, name, var, True) else None
    return None


__all__ = ["compute_at", "can_compute_at", "collect_compute_location",
           "decided_compute_location", "INLINE", "ROOT"]
