"""Loop primitives: split, fuse, reorder, add_unit_loop, and the loop kinds.

Each function takes the PrimFunc and its :class:`FuncIndex`, checks preconditions (raising
:class:`ScheduleError`), and returns the new PrimFunc plus whatever new loop variables the
caller hands out as LoopRVs.
"""
from __future__ import annotations

from functools import reduce
from typing import Sequence

from workbench.ir import dtype as _dt
from workbench.ir.node import FrozenDict
from workbench.tir import op
from workbench.tir.arith import Analyzer
from workbench.tir.expr import IntImm, PrimExpr, Var
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, substitute
from workbench.tir.schedule.analysis.dataflow import check_parallelizable
from workbench.tir.schedule.analysis.injective import mixed_radix, repeated_binding
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.primitive import annotations as A
from workbench.tir.schedule.state import FuncIndex, replace_stmt
from workbench.tir.schedule.utils import (
    and_predicate, loop_binds_reduction, realizes_under, simplify_bindings, uses_var,
)
from workbench.tir.stmt import BlockRealize, For, ForKind, IterType, Stmt


def _loop_name(loop: For) -> str:
    return f"loop {loop.loop_var.name!r}"


def _outer_loops(index: FuncIndex, loop_var: Var) -> list[For]:
    return [s for s in index.loops[loop_var].ancestors if isinstance(s, For)]


class _AddPredicate(IRMutator):
    def __init__(self, pred: PrimExpr) -> None:
        super().__init__()
        self.pred = pred

    def visit_BlockRealize(self, r: BlockRealize) -> Stmt:
        return r.replace(predicate=and_predicate(r.predicate, self.pred))


def split(func: PrimFunc, index: FuncIndex, loop_var: Var,
          factors: Sequence[int | None], preserve_unit_iters: bool = True,
          disable_predication: bool = False) -> tuple[PrimFunc, list[Var]]:
    info = index.loops[loop_var]
    loop = info.loop
    name = "split"
    nones = [i for i, f in enumerate(factors) if f is None]
    if len(nones) > 1:
        raise ScheduleError(name, _loop_name(loop), "at most one factor may be None")
    if len(factors) < 2:
        raise ScheduleError(name, _loop_name(loop), "needs at least two factors")
    for f in factors:
        if f is not None and (not isinstance(f, int) or f < 1):
            raise ScheduleError(name, _loop_name(loop), f"factors must be positive ints or "
                                f"None, got {list(factors)}")
    extent = loop.extent
    known = reduce(lambda a, b: a * b, [f for f in factors if f is not None], 1)
    dtype = loop.loop_var.dtype
    if nones:
        inferred = op.floordiv(op.add(extent, known - 1), known)
        sizes = [inferred if f is None else op.const(f, dtype) for f in factors]
    else:
        sizes = [op.const(f, dtype) for f in factors]
        if isinstance(extent, IntImm) and known < extent.value:
            raise ScheduleError(name, _loop_name(loop), f"the factors {list(factors)} multiply to "
                                f"{known}, less than the loop extent {extent.value}")
    new_vars = [Var(f"{loop.loop_var.name}_{i}", dtype) for i in range(len(factors))]
    fused: PrimExpr = new_vars[0]
    for v, size in zip(new_vars[1:], sizes[1:]):
        fused = op.add(op.mul(fused, size), v)
    fused_expr = op.add(loop.min, fused)
    body = substitute(loop.body, {loop.loop_var: fused_expr})
    product = reduce(op.mul, sizes)
    exact = isinstance(product, IntImm) and isinstance(extent, IntImm) and \
        product.value == extent.value
    if not exact and disable_predication:
        # Without the predicate the last tile runs past the loop's end: out-of-bounds stores
        # (TVM documents this as the user's risk; we accept it only when the split is exact).
        ana = Analyzer()
        if not (ana.can_prove(op.eq(op.floormod(extent, known), 0)) and
                ana.can_prove(op.eq(product, extent))):
            raise ScheduleError(name, _loop_name(loop), f"disable_predication needs factors "
                                f"that tile the extent {extent} exactly; {list(factors)} "
                                "would run iterations past its end")
        exact = True
    if not exact:
        body = _AddPredicate(op.lt(fused, extent)).visit(body)
    for v, size in reversed(list(zip(new_vars, sizes))):
        body = For(v, op.const(0, dtype), size, ForKind.SERIAL, body)
    outer = _outer_loops(index, loop_var)
    body = simplify_bindings(body, outer, new_vars)
    return replace_stmt(func, info.ancestors, loop, body), new_vars


def _check_chain(index: FuncIndex, loops: list[For], name: str) -> None:
    """Loops to fuse must be directly nested: each one's body is the next one."""
    for outer, inner in zip(loops, loops[1:]):
        if outer.body is not inner:
            raise ScheduleError(name, _loop_name(inner), f"it is not the only child of "
                                f"{_loop_name(outer)}; fused loops must be directly nested")


def fuse(func: PrimFunc, index: FuncIndex, loop_vars: Sequence[Var],
         preserve_unit_iters: bool = True) -> tuple[PrimFunc, Var]:
    name = "fuse"
    if not loop_vars:
        raise ScheduleError(name, "no loops", "needs at least one loop")
    loops = [index.loops[v].loop for v in loop_vars]
    _check_chain(index, loops, name)
    for lp in loops:
        if not isinstance(lp.min, IntImm) or lp.min.value != 0:
            raise ScheduleError(name, _loop_name(lp), "loops must start at 0")
    for k, lp in enumerate(loops[1:], 1):
        # TVM's DependentLoopError: a fused index is divided by each inner extent, which must
        # not change with the outer loops.
        outer = [o for o in loops[:k] if uses_var(lp.extent, o.loop_var)]
        if outer:
            raise ScheduleError(name, _loop_name(lp), f"its extent {lp.extent} depends on the "
                                f"outer loop {outer[0].loop_var.name!r}; only loops with "
                                "independent extents can be fused")
    # The fused variable has the widest of the loops' dtypes (an int32 loop under int64 ones
    # is common after legalization); each old variable is a cast of its part (as TVM does).
    dtype = max((lp.loop_var.dtype for lp in loops), key=lambda d: _dt.parse(d).bits)
    fused = Var("_".join(lp.loop_var.name for lp in loops) + "_fused", dtype)
    vmap: dict[Var, PrimExpr] = {}
    stride: PrimExpr = op.const(1, dtype)
    for k in range(len(loops) - 1, -1, -1):
        lp = loops[k]
        extent = lp.extent if lp.extent.dtype == dtype else op.cast(dtype, lp.extent)
        q = op.floordiv(fused, stride)
        part = q if k == 0 else op.floormod(q, extent)
        vmap[lp.loop_var] = part if lp.loop_var.dtype == dtype else \
            op.cast(lp.loop_var.dtype, part)
        stride = op.mul(stride, extent)
    body = substitute(loops[-1].body, vmap)
    new_loop = For(fused, op.const(0, dtype), stride, ForKind.SERIAL, body)
    info = index.loops[loop_vars[0]]
    new_loop = simplify_bindings(new_loop, _outer_loops(index, loop_vars[0]), [fused])
    return replace_stmt(func, info.ancestors, loops[0], new_loop), fused


def reorder(func: PrimFunc, index: FuncIndex, loop_vars: Sequence[Var]) -> PrimFunc:
    name = "reorder"
    if len(set(loop_vars)) != len(loop_vars):
        raise ScheduleError(name, "loops", "a loop is listed twice")
    if len(loop_vars) <= 1:
        return func
    wanted = set(loop_vars)
    # Find the outermost listed loop: the one no other listed loop is an ancestor of.
    depth = {v: len(index.loops[v].ancestors) for v in loop_vars}
    top = min(loop_vars, key=lambda v: depth[v])
    chain: list[For] = []
    cur: Stmt = index.loops[top].loop
    found = 0
    while isinstance(cur, For):
        chain.append(cur)
        if cur.loop_var in wanted:
            found += 1
            if found == len(wanted):
                break
        nxt = cur.body
        if not isinstance(nxt, For):
            break
        cur = nxt
    if found != len(wanted):
        missing = [v.name for v in loop_vars if v not in {lp.loop_var for lp in chain}]
        raise ScheduleError(name, f"loops {missing}", "they are not in one chain of directly "
                            f"nested loops under loop {top.name!r}")
    listed = iter(index.loops[v].loop for v in loop_vars)
    new_order = [next(listed) if lp.loop_var in wanted else lp for lp in chain]
    # A loop's bounds may not use a loop that would end up inside it.
    for pos, lp in enumerate(new_order):
        for inner in new_order[pos + 1:]:
            if uses_var(lp.extent, inner.loop_var) or uses_var(lp.min, inner.loop_var):
                raise ScheduleError(name, _loop_name(lp), f"its bounds depend on "
                                    f"{_loop_name(inner)}, which would move inside it")
    _check_reduction_order(name, chain, new_order,
                           [s for s in index.loops[top].ancestors if isinstance(s, For)])
    body: Stmt = chain[-1].body
    for lp in reversed(new_order):
        body = lp.replace(body=body)
    info = index.loops[top]
    return replace_stmt(func, info.ancestors, chain[0], body)


def _check_reduction_order(name: str, chain: list[For], new_order: list[For],
                           outer: list[For]) -> None:
    """Refuse a reorder that could run a reduction's update before its init.

    A reduction block's init runs where its reduction variables are at their minimum, and it
    must come first among the iterations that reach an output element. That holds in any loop
    order when the reordered loops feeding reduction variables do so in mixed radix (what split
    makes) and feed no spatial variable, and the ones feeding spatial variables reach each
    output element once (split, or fuse's ``f // c`` / ``f % c``; checked with
    :mod:`~workbench.tir.schedule.analysis.injective` where a reduction loop is hoisted over a
    spatial one, by enumeration when small): an element's first iteration then has every
    reduction loop at 0. A loop fused from spatial and reduction loops and split across
    them (fuzzer case random:9453) has no such order: the init can come after updates and wipe
    them. TVM refuses these as non-affine bindings."""
    if all(a is b for a, b in zip(chain, new_order)):
        return
    for realize in realizes_under(chain[-1].body):
        block = realize.block
        if block.init is None:
            continue
        spatial = [v for iv, v in zip(block.iter_vars, realize.iter_values)
                   if iv.iter_type == IterType.DATA_PAR]
        reduce_ = [v for iv, v in zip(block.iter_vars, realize.iter_values)
                   if iv.iter_type != IterType.DATA_PAR]

        def fed(values: list[PrimExpr]) -> list[For]:
            return [lp for lp in chain if any(uses_var(v, lp.loop_var) for v in values)]
        where = f"block {block.name_hint!r}"
        both = set(map(id, fed(spatial))) & set(map(id, fed(reduce_)))
        if both:
            loop = next(lp for lp in chain if id(lp) in both)
            raise ScheduleError(name, where, f"loop {loop.loop_var.name!r} feeds both spatial "
                                "and reduction variables of the block, so the new order could "
                                "run an update of the reduction before its init")
        if fed(reduce_) and not mixed_radix(fed(reduce_), reduce_):
            raise ScheduleError(name, where, "its reduction bindings are not affine in the "
                                "reordered loops, so the new order could run an update of the "
                                "reduction before its init")
        # Reaching an element more than once matters only where a reduction loop now runs
        # outside a spatial loop it ran inside of (the repeats then interleave with the
        # reduction). Checked by enumeration where small; a large or symbolic nest is
        # accepted unproven, as TVM does (its affine-binding rule does not look at this).
        rank = {id(lp): k for k, lp in enumerate(chain)}
        new_rank = {id(lp): k for k, lp in enumerate(new_order)}
        hoisted = any(rank[id(r)] > rank[id(sp)] and new_rank[id(r)] < new_rank[id(sp)]
                      for r in fed(reduce_) for sp in fed(spatial))
        repeat = repeated_binding(fed(spatial), outer, spatial, realize.predicate,
                                  strict=False) if hoisted else None
        if repeat is not None:
            raise ScheduleError(name, where, f"the reordered loops reach an element of it more "
                                f"than once ({repeat}), so the new order could run an update of "
                                "the reduction before an init")


def add_unit_loop(func: PrimFunc, index: FuncIndex, target: str | Var) -> tuple[PrimFunc, Var]:
    """A new loop of extent 1 directly above a block (by name) or a loop (by variable)."""
    if isinstance(target, str):
        info = index.blocks[target]
        stmt, ancestors = info.realize, info.ancestors
    else:
        linfo = index.loops[target]
        stmt, ancestors = linfo.loop, linfo.ancestors
    v = Var("u", "int32")
    new = For(v, op.const(0), op.const(1), ForKind.SERIAL, stmt)
    return replace_stmt(func, ancestors, stmt, new), v


_KIND_NAMES = {ForKind.PARALLEL: "parallel", ForKind.VECTORIZED: "vectorize",
               ForKind.UNROLLED: "unroll", ForKind.SERIAL: "serial"}


def set_loop_kind(func: PrimFunc, index: FuncIndex, loop_var: Var, kind: str,
                  check_dataflow: bool = True) -> PrimFunc:
    """Make the loop parallel / vectorized / unrolled / serial. Parallel and vectorized loops
    must feed only data-parallel iteration variables, and (unless ``check_dataflow`` is off:
    a schedule with ``enable_check=False``) have independent iterations
    (``analysis.dataflow.check_parallelizable``)."""
    info = index.loops[loop_var]
    loop = info.loop
    name = _KIND_NAMES[kind]
    if kind in (ForKind.PARALLEL, ForKind.VECTORIZED) and loop_binds_reduction(loop):
        raise ScheduleError(name, _loop_name(loop), "the loop feeds a reduction iteration "
                            "variable; only data-parallel loops can be parallel or vectorized "
                            "(use rfactor first)")
    if kind == ForKind.VECTORIZED and not isinstance(loop.extent, IntImm):
        raise ScheduleError(name, _loop_name(loop), "a vectorized loop needs a constant extent")
    if kind in (ForKind.PARALLEL, ForKind.VECTORIZED) and check_dataflow:
        check_parallelizable(index, loop, name, _loop_name(loop))
    if kind == ForKind.PARALLEL:
        for anc in info.ancestors:
            if isinstance(anc, For) and anc.kind == ForKind.PARALLEL:
                raise ScheduleError(name, _loop_name(loop), f"it is already inside parallel "
                                    f"loop {anc.loop_var.name!r}")
    return replace_stmt(func, info.ancestors, loop, loop.replace(kind=kind))


def annotate(func: PrimFunc, index: FuncIndex, target: str | Var, key: str, value) -> PrimFunc:
    """Set annotation ``key`` of a block (by name) or loop (by var); lists in ``value`` become
    tuples, and keys the compiler reads must have valid values (see ``annotations``)."""
    value = A.freeze_value(value)
    block = index.blocks[target].block if isinstance(target, str) else None
    subject = f"block {target!r}" if isinstance(target, str) else _loop_name(index.loops[target].loop)
    allocated = A.allocated_buffers(info.block for info in index.blocks.values())
    A.check_annotation(subject, key, value, block, allocated.__contains__)
    if isinstance(target, str):
        info = index.blocks[target]
        new = block.replace(annotations=FrozenDict({**block.annotations, key: value}))
        return replace_stmt(func, info.ancestors + (info.realize,), block, new)
    linfo = index.loops[target]
    loop = linfo.loop
    new_loop = loop.replace(annotations=FrozenDict({**loop.annotations, key: value}))
    return replace_stmt(func, linfo.ancestors, loop, new_loop)


def unannotate(func: PrimFunc, index: FuncIndex, target: str | Var, key: str) -> PrimFunc:
    if isinstance(target, str):
        info = index.blocks[target]
        node, ancestors = info.block, info.ancestors + (info.realize,)
        subject = f"block {target!r}"
    else:
        linfo = index.loops[target]
        node, ancestors = linfo.loop, linfo.ancestors
        subject = f"loop {target.name!r}"
    if key not in node.annotations:
        raise ScheduleError("unannotate", subject, f"it has no annotation {key!r}")
    return replace_stmt(func, ancestors, node, node.replace(annotations=node.annotations.without(key)))


def get_child_blocks(index: FuncIndex, parent: str | Var) -> list[str]:
    stmt = index.blocks[parent].block.body if isinstance(parent, str) else \
        index.loops[parent].loop.body
    return [r.block.name_hint for r in realizes_under(stmt)]


def producers_consumers(index: FuncIndex, block_name: str) -> tuple[list[str], list[str]]:
    """Blocks in the same scope that write what this block reads / read what it writes."""
    info = index.blocks[block_name]
    scope = info.scope_block
    siblings = [r.block for r in realizes_under(scope.body)] if scope is not None else \
        [index.blocks[n].block for n in index.block_order]
    me = info.block
    reads = {r.buffer for r in me.reads}
    writes = {r.buffer for r in me.writes}
    producers = [b.name_hint for b in siblings if b is not me and
                 any(w.buffer in reads for w in b.writes)]
    consumers = [b.name_hint for b in siblings if b is not me and
                 any(r.buffer in writes for r in b.reads)]
    return producers, consumers

