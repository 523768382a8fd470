"""Which loops of a block a tensor intrinsic's description covers (TVM's
``GetTensorizeLoopMapping``, simplified), for auto-tensorization.

The description's inner block is compared with the workload block ignoring indices (TVM's
AutoTensorizeComparator): the same operators, dtypes and calls, so each load of the description
pairs with a load of the workload. For every pair, the description's indices are aligned with
the workload's trailing ones; where the description indexes a dimension by one of its iter
vars, the workload's index must contain exactly one block iter var of the same kind (spatial or
reduction) with coefficient 1 -- that var is the one the description's var stands for
(``W[w + rw, rc]`` maps the description's spatial ``i`` to ``w``). Every description var must be
mapped, to distinct vars bound directly to loops whose extents it divides.
"""
from __future__ import annotations

from dataclasses import dataclass

from workbench.tir.expr import BufferLoad, IntImm, PrimExpr, Var
from workbench.tir.function import PrimFunc
from workbench.tir.functor import collect_vars
from workbench.tir.schedule.utils import linear_form
from workbench.tir.schedule.state import BlockInfo
from workbench.tir.stmt import BlockRealize, BufferStore, For, Stmt

__all__ = ["TensorizeLoopMapping", "tensorize_loop_mapping", "desc_inner_block"]


@dataclass(frozen=True)
class TensorizeLoopMapping:
    """``loops[k]`` (a loop var of the workload) is covered by the description's ``k``-th iter
    var, of extent ``extents[k]``; ``positions[k]`` is that loop's depth in the block's nest;
    ``loop_order`` lists the description's iter vars (by ``k``) in the nesting order of its
    loops, outermost first."""

    loops: tuple[Var, ...]
    extents: tuple[int, ...]
    positions: tuple[int, ...]
    loop_order: tuple[int, ...] = ()


def desc_inner_block(desc: PrimFunc) -> BlockRealize | None:
    """The single block realize under the description's root block (through its loops)."""
    stmt: Stmt = desc.body.block.body
    while isinstance(stmt, For):
        stmt = stmt.body
    return stmt if isinstance(stmt, BlockRealize) else None


class _NoMatch(Exception):
    pass


def tensorize_loop_mapping(info: BlockInfo, desc: PrimFunc) -> TensorizeLoopMapping | None:
    """The mapping of the description's iter vars onto the loops of ``info``'s block, or None
    when the block does not compute what the description does (module docstring)."""
    d_realize = desc_inner_block(desc)
    if d_realize is None:
        return None
    d_block, w_block = d_realize.block, info.block
    if not isinstance(d_block.body, BufferStore) or not isinstance(w_block.body, BufferStore):
        return None
    pairs: list[tuple[tuple, tuple]] = []
    try:
        _pair_exprs(d_block.body.value, w_block.body.value, pairs)
    except _NoMatch:
        return None
    if d_block.body.buffer.dtype != w_block.body.buffer.dtype:
        return None
    pairs.append((d_block.body.indices, w_block.body.indices))
    d_types = {iv.var: iv.iter_type for iv in d_block.iter_vars}
    w_types = {iv.var: iv.iter_type for iv in w_block.iter_vars}
    mapped: dict[Var, Var] = {}
    for d_idx, w_idx in pairs:
        lead = len(w_idx) - len(d_idx)
        if lead < 0:
            return None
        for d_e, w_e in zip(d_idx, w_idx[lead:]):
            if not isinstance(d_e, Var) or d_e not in d_types:
                continue
            cands = [v for v in collect_vars(w_e)
                     if w_types.get(v) == d_types[d_e] and _coefficient(w_e, v) == 1]
            if len(cands) != 1:
                continue  # not decisive here (e.g. a packed index j % 16); others may be
            if mapped.get(d_e, cands[0]) is not cands[0]:
                return None
            mapped[d_e] = cands[0]
    if len(mapped) != len(d_types) or len(set(mapped.values())) != len(mapped):
        return None
    loops = info.loops
    binding = dict(zip((iv.var for iv in w_block.iter_vars), info.realize.iter_values))
    out_loops, extents, positions = [], [], []
    for div in d_block.iter_vars:
        value = binding[mapped[div.var]]
        pos = next((k for k, lp in enumerate(loops) if lp.loop_var is value), None)
        ext = div.dom.extent
        if pos is None or not isinstance(ext, IntImm) or \
                not isinstance(loops[pos].extent, IntImm) or loops[pos].extent.value % ext.value:
            return None
        out_loops.append(loops[pos].loop_var)
        extents.append(ext.value)
        positions.append(pos)
    bound = {v: k for k, v in enumerate(d_realize.iter_values) if isinstance(v, Var)}
    order = [bound[lp.loop_var] for lp in _desc_loops(desc) if lp.loop_var in bound]
    if sorted(order) != list(range(len(d_block.iter_vars))):
        return None
    return TensorizeLoopMapping(tuple(out_loops), tuple(extents), tuple(positions),
                                tuple(order))


def _desc_loops(desc: PrimFunc) -> list[For]:
    out = []
    stmt: Stmt = desc.body.block.body
    while isinstance(stmt, For):
        out.append(stmt)
        stmt = stmt.body
    return out


def _pair_exprs(d, w, pairs: list) -> None:
    """Compare ignoring indices; collect (desc indices, workload indices) of paired loads."""
    if type(d) is not type(w):
        raise _NoMatch
    if isinstance(d, BufferLoad):
        if d.buffer.dtype != w.buffer.dtype:
            raise _NoMatch
        pairs.append((d.indices, w.indices))
        return
    if isinstance(d, PrimExpr) and d.dtype != w.dtype:
        raise _NoMatch
    if isinstance(d, (Var, IntImm)):
        return
    if hasattr(d, "op") and d.op != w.op:
        raise _NoMatch
    for name in ("a", "b", "value", "condition", "true_value", "false_value"):
        if hasattr(d, name):
            _pair_exprs(getattr(d, name), getattr(w, name), pairs)
    if hasattr(d, "args"):
        if len(d.args) != len(w.args):
            raise _NoMatch
        for a, b in zip(d.args, w.args):
            _pair_exprs(a, b, pairs)


def _coefficient(e: PrimExpr, v: Var) -> int | None:
    """The coefficient of ``v`` in ``e`` when ``e`` is linear in its vars, else None."""
    lin = linear_form(e)
    if lin is None:
        return None
    return lin[0].get(v)
