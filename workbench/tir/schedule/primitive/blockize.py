"""blockize: wrap the subtree under a loop (or a run of sibling subtrees) in a new outer block.

Each iter var binding of an inner block is divided into an outer part (over the loops outside
the blockized subtree) and an inner part (over the loops inside it): ``value == outer * E + inner``
with ``inner`` in ``[0, E)``. The outer block gets one iter var ``<v>_o`` per inner iter var,
bound to the outer part; the inner block keeps an iter var ``<v>_i`` for every non-unit inner
part, and its body uses ``<v>_o * E + <v>_i`` where it used ``<v>``. TVM derives the division
with its iter-map analysis; we handle the common shapes directly (see :func:`_divide`) and
refuse the rest with a ScheduleError.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from workbench.ir.structural import structural_equal
from workbench.tir import op
from workbench.tir.arith import Analyzer
from workbench.tir.buffer import Buffer, BufferRegion, Range
from workbench.tir.expr import IntImm, PrimExpr, Var
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, collect_vars
from workbench.tir.schedule.analysis.dataflow import check_block_dataflow
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.primitive.reduction import conjunction, conjuncts, subst
from workbench.tir.schedule.state import BlockInfo, FuncIndex, replace_stmt
from workbench.tir.schedule.utils import linear_form, realizes_under
from workbench.tir.stmt import Block, BlockRealize, For, IterType, IterVar, SeqStmt, Stmt, seq

PRIM = "blockize"


def blockize(func: PrimFunc, index: FuncIndex, target: Var | Sequence[str],
             preserve_unit_iters: bool = True) -> tuple[PrimFunc, str]:
    """Blockize the subtree of loop ``target`` (a loop var) or the blocks named in ``target``.

    Returns ``(func, outer_block_name)``.
    """
    if isinstance(target, Var):
        new_func, name = _blockize_loop(func, index, target, preserve_unit_iters)
        subject = f"loop {target.name!r}"
    else:
        new_func, name = _blockize_blocks(func, index, list(target), preserve_unit_iters)
        subject = f"blocks {list(target)}"
    # The new block's regions summarise its body for the blocks around it; they must still
    # find everything they read written before them.
    check_block_dataflow(new_func, [name], PRIM, subject)
    return new_func, name


# ---- subspace division ------------------------------------------------------------------------

@dataclass
class _Part:
    """One binding divided: ``value == outer * inner_extent + inner``."""

    outer: PrimExpr
    outer_dom: Range
    inner: PrimExpr | None      # None: the inner part is the unit iterator
    inner_dom: Range | None


def _divide(value: PrimExpr, dom: Range, inner_loops: dict[Var, For]) -> _Part | None:
    used = collect_vars(value)
    zero = op.const(0, dom.extent.dtype)
    one = op.const(1, dom.extent.dtype)
    if not used & set(inner_loops):
        return _Part(value, dom, None, None)
    if used <= set(inner_loops):
        return _Part(zero, Range(zero, one), value, dom)
    lin = linear_form(value)
    if lin is None or lin[1] != 0 or not isinstance(dom.min, IntImm) or dom.min.value != 0:
        return None
    coef, _ = lin
    # The inner part must be a dense mixed-radix sum of inner loops: strides 1, e0, e0*e1, ...
    stride = 1
    inner_expr: PrimExpr | None = None
    for v, c in sorted(((v, c) for v, c in coef.items() if v in inner_loops),
                       key=lambda vc: vc[1]):
        lp = inner_loops[v]
        if c != stride or not isinstance(lp.extent, IntImm) or not _is_zero(lp.min):
            return None
        term = v if c == 1 else op.mul(v, c)
        inner_expr = term if inner_expr is None else op.add(inner_expr, term)
        stride *= lp.extent.value
    outer_expr: PrimExpr | None = None
    for v, c in coef.items():
        if v in inner_loops:
            continue
        if c % stride:
            return None
        term = v if c == stride else op.mul(v, c // stride)
        outer_expr = term if outer_expr is None else op.add(outer_expr, term)
    assert inner_expr is not None and outer_expr is not None
    outer_extent = op.floordiv(op.add(dom.extent, stride - 1), stride)
    return _Part(outer_expr, Range(zero, outer_extent), inner_expr,
                 Range(zero, op.const(stride, dom.extent.dtype)))


def _is_zero(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.value == 0


def _is_one(e: PrimExpr) -> bool:
    return isinstance(e, IntImm) and e.value == 1


@dataclass
class _Division:
    """The result of dividing one block realize against its inner loops."""

    outer_ivs: list[IterVar]
    outer_values: list[PrimExpr]
    inner_ivs: list[IterVar]
    inner_values: list[PrimExpr]
    subst: dict[Var, PrimExpr]
    outer_pred: PrimExpr
    inner_pred: PrimExpr


def _divide_block(info: BlockInfo, inner_loops: list[For], preserve_unit_iters: bool,
                  reuse: _Division | None = None) -> _Division:
    """Divide every binding of the block; with ``reuse``, share its outer iter vars when the
    outer parts agree (blockizing several blocks under one outer block)."""
    block, realize = info.block, info.realize
    subject = f"block {block.name_hint!r}"
    inner_map = {lp.loop_var: lp for lp in inner_loops}
    values = list(realize.iter_values)
    if not preserve_unit_iters:
        # Loops of extent 1 are the constant 0 (TVM's simplify_trivial_iterators).
        units = {lp.loop_var: lp.min for lp in info.loops if _is_one(lp.extent)}
        values = [subst(v, units) for v in values]
    div = reuse if reuse is not None else _Division([], [], [], [], {}, op.const(True),
                                                    op.const(True))
    div.inner_ivs, div.inner_values, div.subst = [], [], {}
    taken: set[int] = set()
    for iv, value in zip(block.iter_vars, values):
        part = _divide(value, iv.dom, inner_map)
        if part is None:
            raise ScheduleError(PRIM, subject, f"the binding {_show(value)} of iter var "
                                f"{iv.var.name!r} cannot be divided into a part outside and a "
                                "part inside the blockized loops (supported: outer * c + inner "
                                "with a dense inner part, or bindings of only one side)")
        o_var = _find_outer(div, part, iv, taken) if reuse is not None else None
        if o_var is None:
            o_iv = IterVar(part.outer_dom, Var(f"{iv.var.name}_o", iv.var.dtype), iv.iter_type)
            div.outer_ivs.append(o_iv)
            div.outer_values.append(part.outer)
            taken.add(len(div.outer_ivs) - 1)
            o_var = o_iv.var
        unit_outer = _is_one(part.outer_dom.extent)
        if part.inner is None or _is_one(part.inner_dom.extent):
            if part.inner is not None:
                # A unit inner part is its domain's min; fold it into the outer iter var.
                sub: PrimExpr = op.add(o_var, part.inner_dom.min) \
                    if not _is_zero(part.inner_dom.min) else o_var
            else:
                sub = o_var
            if unit_outer and not preserve_unit_iters and part.inner is None:
                sub = part.outer_dom.min
        else:
            i_iv = IterVar(part.inner_dom, Var(f"{iv.var.name}_i", iv.var.dtype), iv.iter_type)
            div.inner_ivs.append(i_iv)
            div.inner_values.append(part.inner)
            sub = i_iv.var if unit_outer else \
                op.add(op.mul(o_var, part.inner_dom.extent), i_iv.var)
        div.subst[iv.var] = sub
    # Predicate terms go to the side whose loops they use.
    outer_terms, inner_terms = [], []
    for term in conjuncts(realize.predicate):
        used = collect_vars(term)
        if used & set(inner_map):
            if used - set(inner_map) - _loop_free(used, info):
                raise ScheduleError(PRIM, subject, f"its predicate {_show(term)} mixes loops "
                                    "inside and outside the blockized loops")
            inner_terms.append(term)
        else:
            outer_terms.append(term)
    outer_pred = conjunction(outer_terms)
    if reuse is not None and not structural_equal(outer_pred, div.outer_pred):
        raise ScheduleError(PRIM, subject, "the blocks have different predicates on the outer "
                            "loops")
    div.outer_pred = outer_pred
    div.inner_pred = conjunction(inner_terms)
    return div


def _loop_free(used: set[Var], info: BlockInfo) -> set[Var]:
    """Vars that are not loop vars of the block's scope (shape vars, params): allowed anywhere."""
    return {v for v in used if v not in {lp.loop_var for lp in info.loops}}


def _find_outer(div: _Division, part: _Part, iv: IterVar, taken: set[int]) -> Var | None:
    for k, (o_iv, o_val) in enumerate(zip(div.outer_ivs, div.outer_values)):
        if k in taken or o_iv.iter_type != iv.iter_type:
            continue
        if structural_equal(o_val, part.outer) and \
                structural_equal(o_iv.dom.extent, part.outer_dom.extent):
            taken.add(k)
            return o_iv.var
    return None


def _show(e: PrimExpr) -> str:
    return repr(e)


# ---- building the blocks --------------------------------------------------------------------

def _inner_block(block: Block, div: _Division, outer_reduction: bool) -> Block:
    """The original block over the inner iter vars (the init moves to the outer block)."""
    s = div.subst
    reads = tuple(BufferRegion(r.buffer, subst(r.region, s)) for r in block.reads)
    writes = tuple(BufferRegion(w.buffer, subst(w.region, s)) for w in block.writes)
    if outer_reduction:
        read_bufs = {r.buffer for r in reads}
        reads = tuple(w for w in writes if w.buffer not in read_bufs) + reads
    return block.replace(iter_vars=tuple(div.inner_ivs), reads=reads, writes=writes,
                         body=subst(block.body, s), init=None,
                         alloc_buffers=tuple(subst(b, s) for b in block.alloc_buffers),
                         match_buffers=subst(block.match_buffers, s))


def _relax(regions: Sequence[BufferRegion], inner_ivs: list[IterVar]) -> list[BufferRegion]:
    """Regions covering every value of the inner iter vars (TVM's EvalSetRegions)."""
    inner = {iv.var: iv.dom for iv in inner_ivs}
    ana = Analyzer()
    out = []
    for r in regions:
        ranges = []
        for dim, rng in enumerate(r.region):
            if not (collect_vars(rng.min) | collect_vars(rng.extent)) & set(inner):
                ranges.append(rng)
                continue
            lo = ana.int_set(rng.min, inner)
            hi = ana.int_set(op.sub(op.add(rng.min, rng.extent), 1), inner)
            if not lo.has_lower_bound() or not hi.has_upper_bound():
                ranges.append(Range(op.const(0, r.buffer.shape[dim].dtype), r.buffer.shape[dim]))
                continue
            lo_v = ana.simplify(lo.min_value)
            ranges.append(Range(lo_v, ana.simplify(op.add(op.sub(hi.max_value, lo_v), 1))))
        out.append(BufferRegion(r.buffer, tuple(ranges)))
    return out


def _outer_init(name: str, init: Stmt, inner: BlockRealize, inner_loops: list[For]) -> Stmt:
    """The outer block's init: ``init`` (over the inner block's vars) in a block ``name`` over
    the inner spatial iter vars it uses, under copies of the inner loops those bindings use."""
    ivs, values, vmap = [], [], {}
    for iv, value in zip(inner.block.iter_vars, inner.iter_values):
        if iv.iter_type == IterType.DATA_PAR and iv.var in collect_vars(init):
            new = IterVar(iv.dom, Var(f"{iv.var.name}_init", iv.var.dtype), iv.iter_type)
            vmap[iv.var] = new.var
            ivs.append(new)
            values.append(value)
    used = set().union(*(collect_vars(v) for v in values)) if values else set()
    dropped = {lp.loop_var for lp in inner_loops if lp.loop_var not in used}
    pred = conjunction(t for t in conjuncts(inner.predicate) if not collect_vars(t) & dropped)
    writes = tuple(BufferRegion(w.buffer, subst(w.region, vmap))
                   for w in inner.block.writes)
    stmt: Stmt = BlockRealize(tuple(values), pred,
                              Block(tuple(ivs), (), writes, name, subst(init, vmap)))
    loop_map: dict[Var, PrimExpr] = {}
    for lp in reversed(inner_loops):
        if lp.loop_var in used:
            new_var = Var(lp.loop_var.name, lp.loop_var.dtype)
            loop_map[lp.loop_var] = new_var
            stmt = lp.replace(loop_var=new_var, body=stmt)
    return subst(stmt, loop_map)


def _check_free_name(index: FuncIndex, name: str, subject: str) -> None:
    if name in index.blocks:
        raise ScheduleError(PRIM, subject, f"a block named {name!r} already exists")


def _blockize_loop(func: PrimFunc, index: FuncIndex, loop_var: Var,
                   preserve_unit_iters: bool) -> tuple[PrimFunc, str]:
    linfo = index.loops[loop_var]
    loop = linfo.loop
    subject = f"loop {loop_var.name!r}"
    realizes = realizes_under(loop.body)
    if len(realizes) != 1:
        raise ScheduleError(PRIM, subject, f"the loop must contain exactly one block, it "
                            f"contains {len(realizes)} (pass a list of blocks instead)")
    realize = realizes[0]
    block = realize.block
    info = index.blocks[block.name_hint]
    loops = info.loops
    inner_loops = loops[loops.index(loop):]
    for outer, inner in zip(inner_loops, inner_loops[1:] + [realize]):
        if outer.body is not inner:
            raise ScheduleError(PRIM, subject, f"the statements between it and block "
                                f"{block.name_hint!r} must be directly nested loops")
    outer_name = f"{block.name_hint}_o"
    _check_free_name(index, outer_name, subject)
    if block.init is not None:
        _check_free_name(index, f"{block.name_hint}_init", subject)
    div = _divide_block(info, inner_loops, preserve_unit_iters)
    outer_reduction = block.init is not None and \
        any(iv.iter_type == IterType.COMM_REDUCE for iv in div.outer_ivs)
    inner_block = _inner_block(block, div, outer_reduction)
    inner_realize = BlockRealize(tuple(div.inner_values), div.inner_pred, inner_block)
    init = None
    if block.init is not None:
        init = _outer_init(f"{block.name_hint}_init", subst(block.init, div.subst),
                           inner_realize, inner_loops)
    body: Stmt = inner_realize
    for lp in reversed(inner_loops):
        body = lp.replace(body=body)
    reads = _relax(_orig_reads(block, div), div.inner_ivs)
    writes = _relax(inner_block.writes, div.inner_ivs)
    outer_block = Block(tuple(div.outer_ivs), tuple(reads), tuple(writes), outer_name, body, init)
    outer = BlockRealize(tuple(div.outer_values), div.outer_pred, outer_block)
    return replace_stmt(func, linfo.ancestors, loop, outer), outer_name


def _orig_reads(block: Block, div: _Division) -> list[BufferRegion]:
    """The block's own reads with the new bindings (not the write regions an outer reduction
    adds to the inner block's reads)."""
    return [BufferRegion(r.buffer, subst(r.region, div.subst)) for r in block.reads]


# ---- several blocks -------------------------------------------------------------------------

def _blockize_blocks(func: PrimFunc, index: FuncIndex, names: list[str],
                     preserve_unit_iters: bool) -> tuple[PrimFunc, str]:
    subject = f"blocks {names}"
    if len(set(names)) != len(names):
        raise ScheduleError(PRIM, subject, "a block is listed twice")
    infos = [index.blocks[n] for n in names]
    for a in infos:
        for b in infos:
            if a is not b and any(s is a.block for s in b.ancestors):
                raise ScheduleError(PRIM, subject, f"block {b.block.name_hint!r} is nested in "
                                    f"block {a.block.name_hint!r}")
    paths = [i.ancestors + (i.realize,) for i in infos]
    p = 0
    while all(len(pt) > p for pt in paths) and all(pt[p] is paths[0][p] for pt in paths):
        p += 1
    lca = paths[0][p - 1] if p else None
    if len(infos) == 1:
        # One block: its own subtree (the realize itself is the run to wrap).
        p = len(paths[0]) - 1
        lca = paths[0][p - 1]
    if not isinstance(lca, SeqStmt) and len(infos) > 1:
        raise ScheduleError(PRIM, subject, "the blocks are not in sibling statements of one "
                            "sequence")
    children = [pt[p] for pt in paths]
    if isinstance(lca, SeqStmt):
        order = [k for k, s in enumerate(lca.seq) if any(s is c for c in children)]
        lo, hi = order[0], order[-1]
        if order != list(range(lo, hi + 1)):
            raise ScheduleError(PRIM, subject, "the blocks' statements must be consecutive")
        run = list(lca.seq[lo:hi + 1])
    else:
        run = [children[0]]
    found = [r.block.name_hint for s in run for r in realizes_under(s)]
    extra = [n for n in found if n not in names]
    if extra:
        raise ScheduleError(PRIM, subject, f"the statements holding them also hold blocks "
                            f"{extra}; list every block to wrap")
    outer_name = "outer_" + "".join(f"{n}_" for n in names)
    _check_free_name(index, outer_name, subject)
    # Loops above the common ancestor are outside; each block's loops below it are inside.
    n_common = sum(1 for s in paths[0][:p] if isinstance(s, For) and
                   any(s is lp for lp in infos[0].loops))
    div: _Division | None = None
    replaced: dict[int, BlockRealize] = {}
    reads: list[BufferRegion] = []
    writes: list[BufferRegion] = []
    for info in infos:
        inner_loops = info.loops[n_common:]
        div = _divide_block(info, inner_loops, preserve_unit_iters, reuse=div)
        if info.block.init is not None and \
                any(iv.iter_type == IterType.COMM_REDUCE for iv in div.outer_ivs):
            raise ScheduleError(PRIM, f"block {info.block.name_hint!r}", "blockizing several "
                                "blocks cannot make a reduction iter var outside them")
        inner_block = _inner_block(info.block, div, False)
        if info.block.init is not None:
            inner_block = inner_block.replace(init=subst(info.block.init, div.subst))
        replaced[id(info.realize)] = BlockRealize(tuple(div.inner_values), div.inner_pred,
                                                  inner_block)
        reads += _relax(inner_block.reads, div.inner_ivs)
        writes += _relax(inner_block.writes, div.inner_ivs)
    assert div is not None
    body = seq(*(_SwapRealizes(replaced).visit(s) for s in run))
    outer_block = Block(tuple(div.outer_ivs), _union(reads), _union(writes), outer_name, body)
    outer = BlockRealize(tuple(div.outer_values), div.outer_pred, outer_block)
    if isinstance(lca, SeqStmt):
        new = seq(*lca.seq[:lo], outer, *lca.seq[hi + 1:])
        return replace_stmt(func, paths[0][:p - 1], lca, new), outer_name
    return replace_stmt(func, paths[0][:p], run[0], outer), outer_name


class _SwapRealizes(IRMutator):
    def __init__(self, new: dict[int, BlockRealize]) -> None:
        super().__init__()
        self.new = new

    def visit_BlockRealize(self, r: BlockRealize) -> Stmt:
        return self.new.get(id(r), r)

    def visit_PrimExpr(self, e: PrimExpr) -> PrimExpr:
        return e


def _union(regions: list[BufferRegion]) -> tuple[BufferRegion, ...]:
    """One region per buffer covering all given ones (constant bounds; else the whole dim)."""
    by_buf: dict[Buffer, list[BufferRegion]] = {}
    for r in regions:
        by_buf.setdefault(r.buffer, []).append(r)
    out = []
    for buf, rs in by_buf.items():
        dims = []
        for d in range(len(buf.shape)):
            rngs = [r.region[d] for r in rs]
            if all(structural_equal(x, rngs[0]) for x in rngs):
                dims.append(rngs[0])
            elif all(isinstance(x.min, IntImm) and isinstance(x.extent, IntImm) for x in rngs):
                lo = min(x.min.value for x in rngs)
                hi = max(x.min.value + x.extent.value for x in rngs)
                dt = rngs[0].min.dtype
                dims.append(Range(op.const(lo, dt), op.const(hi - lo, dt)))
            else:
                dims.append(Range(op.const(0, buf.shape[d].dtype), buf.shape[d]))
        out.append(BufferRegion(buf, tuple(dims)))
    return tuple(out)


__all__ = ["blockize", "linear_form"]
