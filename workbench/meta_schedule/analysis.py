"""Block and loop queries the schedule rules, postprocessors and mutators share.

All functions read the schedule's current IR through its read-only index
(``sch.func_index()``): the rules need facts (iteration types, bindings, regions) that the
handle API does not expose. Expression facts (variables, constants) come from
:mod:`workbench.tir.analysis`. Nothing here changes a schedule.
"""
from __future__ import annotations

from typing import Any, Iterable

from workbench.tir.analysis import collect_vars, const_int, realizes_under, vars_in_order
from workbench.tir.arith import evaluate
from workbench.tir.buffer import Buffer, BufferRegion
from workbench.tir.expr import BufferLoad, Call, PrimExpr, Select, Var
from workbench.tir.functor import IRVisitor, substitute
from workbench.tir.schedule import BlockRV, Schedule
from workbench.tir.schedule.primitive.block_scope import is_output_block, loop_iter_type
from workbench.tir.schedule.state import BlockInfo, FuncIndex
from workbench.tir.stmt import Block, BlockRealize, For, IterType, SeqStmt

__all__ = [
    "block_info", "block_name", "root_block_name", "is_root", "is_spatial", "has_reduction",
    "func_is_all_spatial", "has_trivial_binding", "needs_multi_level_tiling", "calls_op",
    "has_if_then_else", "is_injective_ordered", "consumers", "producers", "is_output",
    "loop_strides", "const_int", "iter_types_of_loops", "is_tiled",
]

TILING_ANN = "meta_schedule.tiling_structure"


def block_name(sch: Schedule, block: BlockRV) -> str:
    return sch.get(block).name_hint


def block_info(sch: Schedule, block: BlockRV | str) -> BlockInfo:
    name = block if isinstance(block, str) else block_name(sch, block)
    return sch.func_index().blocks[name]


def root_block_name(index: FuncIndex) -> str:
    body = index.func.body
    return body.block.name_hint if isinstance(body, BlockRealize) else "root"


def is_root(sch: Schedule, block: BlockRV) -> bool:
    return block_name(sch, block) == root_block_name(sch.func_index())


def has_block(sch: Schedule, block: BlockRV) -> bool:
    return sch.has_block(block)


def is_spatial(block: Block) -> bool:
    return all(iv.iter_type == IterType.DATA_PAR for iv in block.iter_vars)


def has_reduction(block: Block) -> bool:
    return any(iv.iter_type == IterType.COMM_REDUCE for iv in block.iter_vars)


def func_is_all_spatial(index: FuncIndex) -> bool:
    """Every block but the root is data-parallel (TVM's ``IsSpatialPrimFunc``)."""
    root = root_block_name(index)
    return all(is_spatial(info.block) for name, info in index.blocks.items() if name != root)


def is_tiled(block: Block) -> bool:
    return TILING_ANN in block.annotations


def has_trivial_binding(info: BlockInfo) -> bool:
    """Each block variable is bound to exactly the loop at the same depth (as te emits), or
    to the only value of a unit loop at that depth (a blockized tile whose reduction fits one
    intrinsic call binds its outer iter var to 0: it is still that loop's)."""
    loops = info.loops
    values = info.realize.iter_values
    if len(loops) != len(values):
        return False
    return all(v is lp.loop_var or (const_int(lp.extent) == 1 and const_int(v) is not None
                                    and const_int(v) == const_int(lp.min))
               for v, lp in zip(values, loops))


def iter_types_of_loops(info: BlockInfo) -> list[int]:
    return [loop_iter_type(lp) for lp in info.loops]


def is_output(sch: Schedule, name: str) -> bool:
    return is_output_block(sch.func_index(), name)


def consumers(sch: Schedule, name: str) -> list[str]:
    from workbench.tir.schedule.primitive.block_scope import producers_consumers
    return producers_consumers(sch.func_index(), name)[1]


def producers(sch: Schedule, name: str) -> list[str]:
    from workbench.tir.schedule.primitive.block_scope import producers_consumers
    return producers_consumers(sch.func_index(), name)[0]


def _region_indices(region: BufferRegion) -> list[PrimExpr]:
    return [r.min for r in region.region]


def needs_multi_level_tiling(info: BlockInfo, index: FuncIndex) -> bool:
    """TVM's ``NeedsMultiLevelTiling`` for CPU: not tiled, directly under the root block, one
    write and some reads, a
    reduction iterator, trivial binding, no repeated read buffer, and some read buffer reused
    across a (non-unit) spatial iterator it does not index, as in matmul or conv."""
    block = info.block
    if is_tiled(block) or len(block.writes) != 1 or not block.reads:
        return False
    scope = info.scope_block
    if scope is not None and scope.name_hint != root_block_name(index):
        # Nested in another block (the inner block of a blockized tile): the outer block is
        # what gets tiled (TVM requires the scope to be a stage pipeline under the root).
        return False
    if is_spatial(block) or not has_trivial_binding(info):
        return False
    read_bufs = [r.buffer for r in block.reads]
    if len(set(read_bufs)) != len(read_bufs):
        return False
    if any(const_int(r.extent) is None for reg in block.reads for r in reg.region):
        return False
    spatial = [iv.var for iv in block.iter_vars
               if iv.iter_type == IterType.DATA_PAR and const_int(iv.dom.extent) != 1]
    out_bufs = {r.buffer for r in block.writes}
    reused = 0
    for reg in block.reads:
        if reg.buffer in out_bufs:
            continue
        used = set()
        for e in _region_indices(reg):
            collect_vars(e, used)
        reused += sum(1 for v in spatial if v not in used)
    return reused >= 1


def calls_op(stmt: Any, ops: Iterable[str]) -> bool:
    names = set(ops)
    found = False

    class _V(IRVisitor):
        def visit_Call(self, c: Call) -> None:
            nonlocal found
            if c.op in names or c.op.split(".")[-1] in names:
                found = True
            for a in c.args:
                self.visit(a)

    _V().visit(stmt)
    return found


def has_if_then_else(stmt: Any) -> bool:
    found = False

    class _V(IRVisitor):
        def visit_Call(self, c: Call) -> None:
            nonlocal found
            if c.op in ("if_then_else", "tir.if_then_else"):
                found = True
            for a in c.args:
                self.visit(a)

        def visit_Select(self, s: Select) -> None:
            nonlocal found
            found = True

    _V().visit(stmt)
    return found


def is_injective_ordered(block: Block) -> bool:
    """Every read maps to the write injectively and in order: each read index is a constant
    or one block variable (plus a constant), no variable repeats, and the variables appear in
    the same relative order as in the written indices (a simplified AnalyzeReadWritePattern)."""
    if len(block.writes) != 1:
        return False
    write_vars = []
    for e in _region_indices(block.writes[0]):
        vs = vars_in_order(e, unique=False)
        write_vars.extend(vs)
    order = {v: i for i, v in enumerate(write_vars)}
    for reg in block.reads:
        seen: list[Var] = []
        for e in _region_indices(reg):
            # every occurrence: ``v + v`` is not one variable plus a constant
            vs = vars_in_order(e, unique=False)
            if len(vs) > 1:
                return False
            seen.extend(vs)
        if len(set(seen)) != len(seen) or any(v not in order for v in seen):
            return False
        positions = [order[v] for v in seen]
        if positions != sorted(positions):
            return False
    return True


def loads_in(stmt: Any) -> list[BufferLoad]:
    found: list[BufferLoad] = []

    class _V(IRVisitor):
        def visit_BufferLoad(self, ld: BufferLoad) -> None:
            found.append(ld)
            for i in ld.indices:
                self.visit(i)

    _V().visit(stmt)
    return found


def single_child(loop: For) -> bool:
    """Is the loop body one statement (not a sequence)?"""
    return not isinstance(loop.body, SeqStmt)


def loop_strides(info: BlockInfo, loops: list[For]) -> list[list[int]]:
    """For every buffer access of the block (writes, then reads), the element stride of each
    loop in ``loops``: how far the flattened row-major address moves when that loop's variable
    steps by one from its minimum (the others at their minimum). 0 means unused."""
    block = info.block
    binding = {iv.var: v for iv, v in zip(block.iter_vars, info.realize.iter_values)}
    base_env = {lp.loop_var: const_int(lp.min) or 0 for lp in info.loops}
    out: list[list[int]] = []
    for reg in tuple(block.writes) + tuple(block.reads):
        shape = [const_int(s) for s in reg.buffer.shape]
        if any(s is None for s in shape):
            out.append([0] * len(loops))
            continue
        idx = [substitute(e, binding) for e in _region_indices(reg)]

        def flat(env: dict, idx: list = idx, shape: list = shape) -> int:
            total = 0
            for e, s in zip(idx, shape):
                total = total * s + int(evaluate(e, env))
            return total

        try:
            base = flat(base_env)
            strides = []
            for lp in loops:
                env = dict(base_env)
                env[lp.loop_var] = base_env.get(lp.loop_var, 0) + 1
                strides.append(flat(env) - base)
        except Exception:  # noqa: BLE001 - an index we cannot evaluate: assume "used, strided"
            strides = [-1] * len(loops)
        out.append(strides)
    return out


def buffer_of_write(block: Block) -> Buffer:
    return block.writes[0].buffer


# ---- fast loop iteration types (the postprocessors call these for every candidate) --------

def loop_iter_types(loops: list[For]) -> list[int]:
    """TVM's GetLoopIterType for each loop: DATA_PAR when the loop only feeds data-parallel
    block variables of the blocks below it, COMM_REDUCE when only reduction ones, OPAQUE
    otherwise (same answer as ``block_scope.loop_iter_type``, computed once per nest)."""
    if not loops:
        return []
    uses: list[tuple[set[Var], int]] = []
    for r in realizes_under(loops[0].body):
        for iv, value in zip(r.block.iter_vars, r.iter_values):
            uses.append((collect_vars(value), iv.iter_type))
    out = []
    for lp in loops:
        kinds = {t for vs, t in uses if lp.loop_var in vs}
        if len(kinds) > 1 or (kinds and kinds - {IterType.DATA_PAR, IterType.COMM_REDUCE}):
            out.append(IterType.OPAQUE)
        elif kinds == {IterType.COMM_REDUCE}:
            out.append(IterType.COMM_REDUCE)
        else:
            out.append(IterType.DATA_PAR)
    return out


def needs_rfactor(sch: Schedule, block: BlockRV, max_parallel_extent: int,
                  max_parallel_basic: int) -> bool:
    """TVM's ``NeedsRFactorOrCrossThreadReduction``: a reduction block (init + reduction
    iterators only besides spatial ones) with trivial binding, not tiled, whose loops are all
    spatial/reduction, form one perfect nest around the block, include a reduction loop and
    have constant extents. Then: for a block MultiLevelTiling would take, only when the
    spatial product S < reduction product R and S <= ``max_parallel_extent``; otherwise when
    R > ``max_parallel_basic`` (the core count), as TVM's code does."""
    info = block_info(sch, block)
    blk = info.block
    if is_root(sch, block) or not blk.writes or blk.init is None or not has_reduction(blk):
        return False
    if any(iv.iter_type not in (IterType.DATA_PAR, IterType.COMM_REDUCE)
           for iv in blk.iter_vars):
        return False
    if not has_trivial_binding(info) or is_tiled(blk):
        return False
    loops = info.loops
    types = loop_iter_types(loops)
    if not loops or any(t not in (IterType.DATA_PAR, IterType.COMM_REDUCE) for t in types):
        return False
    if IterType.COMM_REDUCE not in types:
        return False
    for outer, inner in zip(loops, loops[1:]):
        if outer.body is not inner:
            return False
    if not (isinstance(loops[-1].body, BlockRealize) and loops[-1].body.block is blk):
        return False
    space, reduce = 1, 1
    for lp, t in zip(loops, types):
        ext = const_int(lp.extent)
        if ext is None:
            return False
        if t == IterType.DATA_PAR:
            space *= ext
        else:
            reduce *= ext
    if needs_multi_level_tiling(info, sch.func_index()):
        return not (space >= reduce or space > max_parallel_extent)
    return reduce > 1 and reduce > max_parallel_basic
