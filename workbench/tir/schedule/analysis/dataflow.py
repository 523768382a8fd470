"""Dataflow soundness of a block scope: every read sees complete, final values.

The primitives whose result depends on placement decisions -- reverse_compute_at (the union
of domains over several producers, partial reductions), cache_read / cache_write (where the
copy goes), reverse_compute_inline (the producer now writes the consumer's output), rfactor
and blockize -- check their *result* with :func:`check_block_dataflow` before the schedule
takes it, so a move that would make a block read data before it is written is refused instead
of computing wrong numbers. compute_at, compute_inline and decompose_reduction guarantee the
rules by construction on a valid input (the consumers' regions are solved for, or the values
substituted, at the same place); they only re-check the parallel loops around a moved block.
The fuzzer (tests/fuzz) tests both claims by building every accepted schedule.

For every consumer ``C`` in the scope and every buffer ``b`` it reads that blocks of the scope
write (its *producers* ``P``), three rules (TVM's region-cover property, plus the two cases
where TVM is unsound):

1. **order**: every producer comes before ``C`` in program order (a producer moved after its
   consumer, e.g. reverse_compute_at of a block that has no producer, is refused);
2. **region cover** (TVM's ``ProducerCoversConsumer``): group the producers by their lowest
   common loop with ``C`` (the *LCA*; the scope itself when they share none). For one
   iteration of the shared loops, the region the group writes (the loops below the LCA
   relaxed) must contain the region ``C`` reads. Block variables are clipped to their domains
   (predicates keep them there) and regions to the buffer's shape; writes are taken as the
   hull of the written boxes, which is exact for the dense writes primitives produce;
3. **final values**: no shared loop may drive a reduction (non-data-parallel) iteration
   variable of a producer -- ``C`` would read partial sums after each iteration (TVM accepts
   reverse_compute_at under such a loop; e.g. layer norm's normalisation moved under the loop
   that feeds the mean).

The check looks only at pairs involving the blocks a primitive changed (``focus``), so its cost
grows with what changed, not with the scope.
"""
from __future__ import annotations

from typing import Callable, Iterable, NoReturn

import numpy as np

from workbench.tir import op
from workbench.tir.arith import NEG_INF, POS_INF, Analyzer, IntervalSet
from workbench.tir.buffer import Buffer, BufferRegion, Range
from workbench.tir.expr import IntImm, Max, Min, PrimExpr, Var
from workbench.tir.function import PrimFunc
from workbench.tir.functor import collect_vars, substitute
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.index_map import numeric_eval
from workbench.tir.schedule.state import BlockInfo, FuncIndex
from workbench.tir.schedule.utils import realizes_under, uses_var
from workbench.tir.stmt import Block, For, ForKind, IterType


def scope_children(index: FuncIndex, scope: Block) -> list[str]:
    """The blocks directly inside ``scope``, in program order."""
    return [r.block.name_hint for r in realizes_under(scope.body)]


def check_scope_dataflow(func: PrimFunc, scope_name: str, prim: str, subject: str,
                         focus: Iterable[str] | None = None,
                         index: FuncIndex | None = None) -> None:
    """Raise ScheduleError(``prim``, ``subject``, ...) if a consumer of the scope block
    ``scope_name`` could read data that is not written yet, or not final (module docstring).
    Only pairs with a block of ``focus`` (all blocks when None) are checked."""
    index = index if index is not None else FuncIndex(func)
    scope = index.blocks[scope_name].block
    order = scope_children(index, scope)
    pos = {n: k for k, n in enumerate(order)}
    wanted = set(order) if focus is None else {n for n in focus if n in pos}
    if not wanted:
        return
    writers: dict[Buffer, list[str]] = {}
    for n in order:
        for w in index.blocks[n].block.writes:
            writers.setdefault(w.buffer, []).append(n)

    def fail(reason: str) -> NoReturn:
        raise ScheduleError(prim, subject, reason)

    an = Analyzer()
    for c in order:
        cinfo = index.blocks[c]
        for read in cinfo.block.reads:
            producers = [p for p in writers.get(read.buffer, ()) if p != c]
            if not producers or (c not in wanted and not wanted.intersection(producers)):
                continue
            late = [p for p in producers if pos[p] > pos[c]]
            if late:
                fail(f"block {c!r} would read {read.buffer.name!r} before block {late[0]!r} "
                     "writes it (a producer must run before its consumers)")
            _check_cover(an, index, cinfo, read, producers, fail)


def _chain(info: BlockInfo) -> list[For]:
    """The loops above the block inside its scope, outermost first."""
    return info.loops


def _lca_depth(a: list[For], b: list[For]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x is not y:
            break
        n += 1
    return n


def _check_cover(an: Analyzer, index: FuncIndex, cinfo: BlockInfo, read: BufferRegion,
                 producers: list[str], fail: Callable[[str], NoReturn]) -> None:
    cloops = _chain(cinfo)
    groups: dict[int, list[BlockInfo]] = {}
    for p in producers:
        pinfo = index.blocks[p]
        groups.setdefault(_lca_depth(cloops, _chain(pinfo)), []).append(pinfo)
    c = cinfo.block.name_hint
    buf = read.buffer
    for depth, pinfos in sorted(groups.items()):
        shared = cloops[:depth]
        for pinfo in pinfos:
            _check_final(pinfo, shared, c, buf, fail)
        for lp in shared:
            an.bind(lp.loop_var, Range(lp.min, lp.extent), allow_override=True)
        consumed = _region(an, cinfo, read, cloops[depth:], clip_vars=True)
        produced: list[IntervalSet] | None = None
        for pinfo in pinfos:
            for w in pinfo.block.writes:
                if w.buffer is buf:
                    got = _region(an, pinfo, w, _chain(pinfo)[depth:], clip_vars=True)
                    produced = got if produced is None else \
                        [_hull(an, x, y) for x, y in zip(produced, got)]
        assert produced is not None
        for d, (p, q) in enumerate(zip(produced, consumed)):
            extent = buf.shape[d]
            if not _covers(an, p, q, extent):
                names = [i.block.name_hint for i in pinfos]
                where = f"in one iteration of loop {shared[-1].loop_var.name!r}" if shared \
                    else "over the whole scope"
                fail(f"block {c!r} reads {buf.name!r}[{_show(q)}] in dimension {d}, but "
                     f"{names} write only [{_show(p)}] {where}: the region it reads is not "
                     "covered by what its producers write before it")


def _check_final(pinfo: BlockInfo, shared: list[For], consumer: str, buf: Buffer,
                 fail: Callable[[str], NoReturn]) -> None:
    """No loop shared with the consumer feeds a reduction iteration variable of the producer."""
    block, realize = pinfo.block, pinfo.realize
    for iv, value in zip(block.iter_vars, realize.iter_values):
        if iv.iter_type == IterType.DATA_PAR:
            continue
        for lp in shared:
            if uses_var(value, lp.loop_var):
                fail(f"block {consumer!r} would read partial results of {block.name_hint!r} "
                     f"from {buf.name!r}: loop {lp.loop_var.name!r} contains both and drives "
                     f"the reduction variable {iv.var.name!r} of {block.name_hint!r}, so after "
                     "one of its iterations the reduction is not complete")


def _region(an: Analyzer, info: BlockInfo, region: BufferRegion, relax: list[For],
            clip_vars: bool) -> list[IntervalSet]:
    """The region of one execution of the loops ``relax`` (the block's loops below the LCA):
    block variables range over their bindings with those loops relaxed (clipped to their
    domains when ``clip_vars``), then the region's bounds over those."""
    loop_dom = {lp.loop_var: IntervalSet.from_range(Range(lp.min, lp.extent)) for lp in relax}
    var_dom: dict = {}
    for iv, value in zip(info.block.iter_vars, info.realize.iter_values):
        s = an.int_set(value, loop_dom)
        if clip_vars:
            s = _clip(an, s, IntervalSet.from_range(iv.dom))
        var_dom[iv.var] = s
    out = []
    for r in region.region:
        lo = an.int_set(r.min, var_dom).min_value
        hi = an.int_set(op.sub(op.add(r.min, r.extent), 1), var_dom).max_value
        out.append(IntervalSet(lo if lo is NEG_INF else an.simplify(lo),
                               hi if hi is POS_INF else an.simplify(hi)))
    return out


def _clip(an: Analyzer, s: IntervalSet, dom: IntervalSet) -> IntervalSet:
    """``s`` intersected with ``dom``, keeping each end that provably lies inside (a single
    point stays one, which keeps ``v % c`` precise)."""
    lo, hi = s.min_value, s.max_value
    if lo is NEG_INF or not an.can_prove(op.ge(lo, dom.min_value)):
        lo = dom.min_value if lo is NEG_INF else an.simplify(op.max(lo, dom.min_value))
    if hi is POS_INF or not an.can_prove(op.le(hi, dom.max_value)):
        hi = dom.max_value if hi is POS_INF else an.simplify(op.min(hi, dom.max_value))
    return IntervalSet(lo, hi)


def _hull(an: Analyzer, a: IntervalSet, b: IntervalSet) -> IntervalSet:
    lo = NEG_INF if NEG_INF in (a.min_value, b.min_value) else \
        an.simplify(op.min(a.min_value, b.min_value))
    hi = POS_INF if POS_INF in (a.max_value, b.max_value) else \
        an.simplify(op.max(a.max_value, b.max_value))
    return IntervalSet(lo, hi)


def _covers(an: Analyzer, produced: IntervalSet, consumed: IntervalSet, extent: PrimExpr
            ) -> bool:
    """``produced`` contains ``consumed``, both clipped to ``[0, extent)`` (an unbounded end
    is the buffer's edge: such an access spans the whole dimension)."""
    zero = op.const(0, extent.dtype)
    top = op.sub(extent, 1)

    def clip(s: IntervalSet) -> tuple[PrimExpr, PrimExpr]:
        lo = zero if s.min_value is NEG_INF else an.simplify(op.max(s.min_value, zero))
        hi = top if s.max_value is POS_INF else an.simplify(op.min(s.max_value, top))
        return lo, hi

    p_lo, p_hi = clip(produced)
    c_lo, c_hi = clip(consumed)
    if an.can_prove(op.lt(c_hi, c_lo)):
        return True                                # reads nothing inside the buffer
    return _le(an, p_lo, c_lo) and _le(an, c_hi, p_hi)


def _le(an: Analyzer, a: PrimExpr, b: PrimExpr) -> bool:
    return a is b or an.can_prove(op.le(a, b)) or an.can_prove(op.le(op.sub(a, b), 0))


def _show(s: IntervalSet) -> str:
    lo = "-inf" if s.min_value is NEG_INF else str(s.min_value)
    hi = "inf" if s.max_value is POS_INF else str(s.max_value)
    return lo if lo == hi else f"{lo} : {hi}"


def scope_of_block(index: FuncIndex, name: str) -> str | None:
    """The name of the scope block of ``name`` (None for the root)."""
    scope = index.blocks[name].scope_block
    return None if scope is None else scope.name_hint


def check_block_dataflow(func: PrimFunc, names: Iterable[str], prim: str, subject: str,
                         scopes: bool = True) -> None:
    """:func:`check_scope_dataflow` for the scopes of the named blocks, focused on them
    (names that no longer exist are skipped), then the parallel / vectorized loops around them
    (:func:`check_parallelizable` without TVM's compact-dataflow part). ``scopes=False`` skips
    the first part, for primitives whose construction already guarantees it (compute_at)."""
    index = FuncIndex(func)
    names = list(names)
    by_scope: dict[str, list[str]] = {}
    for n in names:
        if n in index.blocks:
            s = scope_of_block(index, n)
            if s is not None:
                by_scope.setdefault(s, []).append(n)
    for s, focus in by_scope.items() if scopes else ():
        check_scope_dataflow(func, s, prim, subject, focus, index)
    # A block moved or made under a parallel / vectorized loop must not make its iterations
    # race (the loop was checked when it became parallel, without this block).
    checked: set[int] = set()
    for n in names:
        if n not in index.blocks:
            continue
        for anc in index.blocks[n].ancestors:
            if isinstance(anc, For) and anc.kind in (ForKind.PARALLEL, ForKind.VECTORIZED) \
                    and id(anc) not in checked:
                checked.add(id(anc))
                check_parallelizable(index, anc, prim, subject, compact_dataflow=False)


# ---- parallel / vectorize ------------------------------------------------------------------------

def check_parallelizable(index: FuncIndex, loop: For, prim: str, subject: str,
                         compact_dataflow: bool = True) -> None:
    """The iterations of ``loop`` can run at once (parallel, vectorize): TVM's compact-dataflow
    condition -- every block directly under the loop is a complete block or a reduction block
    with its init (a decomposed reduction's update block is neither); skipped when
    ``compact_dataflow`` is False -- and, for soundness, a block that accumulates (a
    reduction, or one that reads what it writes) must not write the same elements in two
    iterations of the loop unless the buffer is private to the loop (every access to it is
    inside the loop, so it is allocated per iteration)."""
    def fail(reason: str) -> NoReturn:
        raise ScheduleError(prim, subject, reason)

    an = Analyzer()
    t = loop.loop_var
    for realize in realizes_under(loop.body):
        block = realize.block
        name = block.name_hint
        info = index.blocks[name]
        reduce_vars = [iv for iv in block.iter_vars if iv.iter_type != IterType.DATA_PAR]
        rw = {r.buffer for r in block.reads} & {w.buffer for w in block.writes}
        if reduce_vars and compact_dataflow:
            if block.init is None:
                fail(f"block {name!r} under it has reduction variables but no init (a "
                     "decomposed reduction's update), so its iterations are not independent; "
                     "parallelize before decompose_reduction")
            if any(iv.iter_type != IterType.COMM_REDUCE for iv in reduce_vars):
                fail(f"block {name!r} under it has iteration variables that are neither "
                     "data-parallel nor reduction")
        elif rw and compact_dataflow and not reduce_vars:
            fail(f"block {name!r} under it reads and writes {sorted(b.name for b in rw)}, so "
                 "it is neither a complete block nor a reduction block")
        if not (reduce_vars or rw):
            continue
        for w in block.writes:
            if _private_to(index, w.buffer, loop):
                continue
            if not _disjoint_across(an, info, w, loop):
                fail(f"block {name!r} accumulates into {w.buffer.name!r}, and two iterations "
                     f"of loop {t.name!r} would update the same elements of it (a buffer shared "
                     "by all iterations)")


def _private_to(index: FuncIndex, buf: Buffer, loop: For) -> bool:
    """Every block that touches the allocated buffer ``buf`` is inside ``loop``."""
    allocated = any(buf in info.block.alloc_buffers for info in index.blocks.values())
    if not allocated:
        return False
    for info in index.blocks.values():
        blk = info.block
        if any(r.buffer is buf for r in blk.reads + blk.writes) and \
                not any(a is loop for a in info.ancestors):
            return False
    return True


def _disjoint_across(an: Analyzer, info: BlockInfo, region: BufferRegion, loop: For) -> bool:
    """The region the block writes in iteration ``t`` of ``loop`` lies strictly before the one
    of iteration ``t + 1`` in some dimension (so no two iterations overlap)."""
    if isinstance(loop.extent, IntImm) and loop.extent.value <= 1:
        return True
    loops = _chain(info)
    below = loops[next(k for k, lp in enumerate(loops) if lp is loop) + 1:] \
        if any(lp is loop for lp in loops) else loops
    t = loop.loop_var
    region_an = Analyzer()                 # t stays symbolic in the regions (bound, not fixed)
    for lp in loops:
        if lp not in below:
            region_an.bind(lp.loop_var, Range(lp.min, lp.extent))
    now = _region(region_an, info, region, below, clip_vars=True)
    an.bind(t, Range(loop.min, op.sub(loop.extent, 1)), allow_override=True)
    nxt = [IntervalSet(substitute(s.min_value, {t: op.add(t, 1)}) if s.min_value is not NEG_INF
                       else NEG_INF, s.max_value) for s in now]
    for a, b in zip(now, nxt):
        if a.max_value is POS_INF or b.min_value is NEG_INF:
            continue
        # a bound clipped to the buffer (``min(x, 9)``, over a symbolic tile grid) is at most
        # ``x``; ``max(y, 0)`` at least ``y``: proving it for either operand is enough
        if any(an.can_prove(op.lt(hi, lo)) for hi in _operands(a.max_value, Min)
               for lo in _operands(b.min_value, Max)):
            return True
    # Not monotone in one dimension (a fused loop walks a 2-d tile grid): compare the boxes of
    # all iterations numerically.
    return _disjoint_numeric(now, t, loop, [lp for lp in loops if lp is not loop
                                            and lp not in below])


def _operands(e: PrimExpr, kind: type) -> list[PrimExpr]:
    """``e`` and, when it is a ``kind`` (Min / Max) node, its two operands."""
    return [e, e.a, e.b] if isinstance(e, kind) else [e]


_NUMERIC_LIMIT = 1 << 22


def _disjoint_numeric(boxes: list[IntervalSet], t: Var, loop: For, outer: list[For]) -> bool:
    """The boxes ``boxes(t)`` for the iterations of ``loop`` are pairwise disjoint, for every
    value of the enclosing loops ``outer`` (False when it cannot be evaluated)."""
    if any(s.min_value is NEG_INF or s.max_value is POS_INF for s in boxes):
        return False
    spans: dict[Var, tuple[int, int]] = {}
    for lp in [loop] + outer:
        if not (isinstance(lp.min, IntImm) and isinstance(lp.extent, IntImm)):
            return False
        spans[lp.loop_var] = (lp.min.value, lp.extent.value)
    n_t = spans[t][1]
    used = set()
    for s in boxes:
        used |= collect_vars(s.min_value) | collect_vars(s.max_value)
    others = [v for v in spans if v is not t and v in used]
    if any(v not in spans for v in used):
        return False
    n_outer = int(np.prod([spans[v][1] for v in others])) if others else 1
    if n_outer * n_t * n_t > _NUMERIC_LIMIT:
        return False
    grid = np.indices([spans[v][1] for v in others] + [n_t]).reshape(len(others) + 1, -1)
    env = {v: grid[k] + spans[v][0] for k, v in enumerate(others)}
    env[t] = grid[-1] + spans[t][0]
    overlap = None
    for s in boxes:
        lo, hi = numeric_eval(s.min_value, env), numeric_eval(s.max_value, env)
        if lo is None or hi is None:
            return False
        lo = np.broadcast_to(lo, grid.shape[1:]).reshape(n_outer, n_t)
        hi = np.broadcast_to(hi, grid.shape[1:]).reshape(n_outer, n_t)
        # boxes a and b overlap in this dimension
        dim = (lo[:, :, None] <= hi[:, None, :]) & (lo[:, None, :] <= hi[:, :, None]) & \
            (lo[:, :, None] <= hi[:, :, None]) & (lo[:, None, :] <= hi[:, None, :])
        overlap = dim if overlap is None else overlap & dim
    if overlap is None:
        return False
    overlap[:, np.arange(n_t), np.arange(n_t)] = False
    return not overlap.any()


__all__ = ["check_scope_dataflow", "check_block_dataflow", "scope_children",
           "check_parallelizable"]
