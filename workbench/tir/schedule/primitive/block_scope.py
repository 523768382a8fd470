"""Facts about a block inside its scope, shared by the compute-location primitives.

A *scope* is the nearest enclosing block (the root block for top-level stages); its child blocks
are the blocks directly inside it, in program order. Dependencies follow TVM's BlockScope:
``p`` is a producer of ``b`` when ``p`` comes before ``b`` and writes a buffer ``b`` reads
(read-after-write) or writes (write-after-write); consumers are the mirror image.
Write-after-read edges are not dependencies here, as in TVM's ``GetProducers``/``GetConsumers``.
"""
from __future__ import annotations

from workbench.tir.buffer import Buffer
from workbench.tir.function import PrimFunc
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.state import FuncIndex, replace_stmt
from workbench.tir.schedule.utils import realizes_under, uses_var
from workbench.tir.stmt import Block, BlockRealize, For, IterType, SeqStmt, Stmt


def subject(name: str) -> str:
    return f"block {name!r}"


def scope_of(index: FuncIndex, name: str, primitive: str) -> Block:
    """The scope block of ``name``; the root block itself has none and is refused."""
    scope = index.blocks[name].scope_block
    if scope is None:
        raise ScheduleError(primitive, subject(name), "it is the root block; only blocks inside "
                            "a scope can be moved or inlined")
    return scope


def scope_children(index: FuncIndex, name: str) -> list[str]:
    """Names of the child blocks of ``name``'s scope, in program order (``name`` included)."""
    scope = index.blocks[name].scope_block
    return [r.block.name_hint for r in realizes_under(scope.body)]


def _written(block: Block) -> set[Buffer]:
    return {w.buffer for w in block.writes}


def _read(block: Block) -> set[Buffer]:
    return {r.buffer for r in block.reads}


def producers_consumers(index: FuncIndex, name: str) -> tuple[list[str], list[str]]:
    """``(producers, consumers)`` of ``name`` in its scope, each in program order."""
    siblings = scope_children(index, name)
    pos = siblings.index(name)
    me = index.blocks[name].block
    mine_rw = _read(me) | _written(me)
    mine_w = _written(me)
    producers = [s for s in siblings[:pos] if _written(index.blocks[s].block) & mine_rw]
    consumers = [s for s in siblings[pos + 1:]
                 if (_read(index.blocks[s].block) | _written(index.blocks[s].block)) & mine_w]
    return producers, consumers


def writers_of(index: FuncIndex, name: str, buffer: Buffer) -> list[str]:
    """Blocks of ``name``'s scope that write ``buffer``."""
    return [s for s in scope_children(index, name) if buffer in _written(index.blocks[s].block)]


def is_output_block(index: FuncIndex, name: str) -> bool:
    """True if the block writes a buffer its scope does not allocate (TVM's IsOutputBlock)."""
    scope = index.blocks[name].scope_block
    allocated = set(scope.alloc_buffers)
    return any(w.buffer not in allocated for w in index.blocks[name].block.writes)


def check_not_output(index: FuncIndex, name: str, primitive: str) -> None:
    if is_output_block(index, name):
        outs = [w.buffer.name for w in index.blocks[name].block.writes
                if w.buffer not in set(index.blocks[name].scope_block.alloc_buffers)]
        raise ScheduleError(primitive, subject(name), f"it is an output block: it writes "
                            f"{outs}, which its scope does not allocate (a function output)")


def _check_dominant(index: FuncIndex, name: str, primitive: str) -> None:
    for w in index.blocks[name].block.writes:
        writers = writers_of(index, name, w.buffer)
        if len(writers) > 1:
            raise ScheduleError(primitive, subject(name), f"buffer {w.buffer.name!r} is written "
                                f"by several blocks {writers}; the block must be its only writer")


def complete_block_problem(index: FuncIndex, name: str) -> str | None:
    """Why the block is not a *complete* block (TVM's IsCompleteBlock), or None if it is:
    all iteration variables data-parallel, the only writer of its outputs, and reading none of
    the buffers it writes."""
    block = index.blocks[name].block
    if any(iv.iter_type != IterType.DATA_PAR for iv in block.iter_vars):
        return "it is not a complete block: it has non-data-parallel (reduction) iteration " \
               "variables"
    for w in block.writes:
        writers = writers_of(index, name, w.buffer)
        if len(writers) > 1:
            return f"it is not a complete block: buffer {w.buffer.name!r} is written by " \
                   f"several blocks {writers}"
    both = sorted(b.name for b in _read(block) & _written(block))
    if both:
        return f"it is not a complete block: it reads and writes the same buffer(s) {both}"
    return None


def check_complete(index: FuncIndex, name: str, primitive: str) -> None:
    problem = complete_block_problem(index, name)
    if problem is not None:
        raise ScheduleError(primitive, subject(name), problem)


def check_complete_or_reduction(index: FuncIndex, name: str, primitive: str) -> None:
    """TVM's CheckCompleteOrReductionBlock: a complete block, or a reduction block (an init,
    only data-parallel and reduction iteration variables, the only writer of its outputs, and
    reduction variables not indexing the outputs)."""
    complete_problem = complete_block_problem(index, name)
    if complete_problem is None:
        return
    block = index.blocks[name].block
    reason = None
    if block.init is None:
        reason = "it has no init statement"
    elif any(iv.iter_type not in (IterType.DATA_PAR, IterType.COMM_REDUCE)
             for iv in block.iter_vars):
        reason = "it has iteration variables that are neither data-parallel nor reduction"
    else:
        reduce_vars = [iv.var for iv in block.iter_vars if iv.iter_type == IterType.COMM_REDUCE]
        for w in block.writes:
            for rng in w.region:
                if any(uses_var(rng.min, v) or uses_var(rng.extent, v) for v in reduce_vars):
                    reason = f"a reduction variable indexes the output {w.buffer.name!r}"
    if reason is None:
        _check_dominant(index, name, primitive)
        return
    raise ScheduleError(primitive, subject(name), f"{complete_problem}; and it is not a "
                        f"reduction block either: {reason}")


def removal_point(index: FuncIndex, name: str, primitive: str
                  ) -> tuple[tuple[Stmt, ...], Stmt]:
    """What to cut out to remove a leaf block (TVM's LeafBlockRemovalPlan): the block's realize
    together with the loops above it that hold nothing else. Returns ``(ancestors, stmt)`` for
    :func:`replace_stmt` with ``new=None``."""
    info = index.blocks[name]
    stmt: Stmt = info.realize
    ancestors = info.ancestors
    k = len(ancestors)
    while k > 0:
        parent = ancestors[k - 1]
        if isinstance(parent, For) or (isinstance(parent, SeqStmt) and len(parent.seq) == 1):
            stmt = parent
            k -= 1
            continue
        break
    if k == 0 or not isinstance(ancestors[k - 1], SeqStmt):
        raise ScheduleError(primitive, subject(name), "it is the only statement of its scope; "
                            "removing it would leave the scope empty")
    return ancestors[:k], stmt


def remove_leaf_block(func: PrimFunc, index: FuncIndex, name: str, primitive: str) -> PrimFunc:
    ancestors, stmt = removal_point(index, name, primitive)
    return replace_stmt(func, ancestors, stmt, None)


def loop_iter_type(loop: For) -> int:
    """TVM's GetLoopIterType: DATA_PAR if the loop only feeds data-parallel block variables of
    the blocks directly below it, COMM_REDUCE if only reduction ones, OPAQUE otherwise."""
    n_spatial = n_reduce = n_other = 0
    for r in realizes_under(loop.body):
        for iv, value in zip(r.block.iter_vars, r.iter_values):
            if not uses_var(value, loop.loop_var):
                continue
            if iv.iter_type == IterType.DATA_PAR:
                n_spatial += 1
            elif iv.iter_type == IterType.COMM_REDUCE:
                n_reduce += 1
            else:
                n_other += 1
    if n_other or (n_spatial and n_reduce):
        return IterType.OPAQUE
    return IterType.COMM_REDUCE if n_reduce else IterType.DATA_PAR


def loops_between(ancestors: tuple[Stmt, ...], top: For | None) -> list[For]:
    """The loops in ``ancestors`` strictly below ``top`` (all of the scope's if ``top`` is
    None), outermost first, stopping at the nearest block."""
    out: list[For] = []
    for s in reversed(ancestors):
        if s is top or isinstance(s, (Block, BlockRealize)):
            break
        if isinstance(s, For):
            out.append(s)
    return out[::-1]
