"""Steps every CPU rule shares: inlining cheap stages, scheduling a data-parallel loop nest
(parallel outer loops, a vectorized inner loop, transposes in tiles), and the size heuristics.

Each function changes the schedule only through public ``Schedule`` primitives, so the result
is in the trace and every step was checked by the primitive itself.
"""
from __future__ import annotations

from typing import Callable, Sequence

from workbench.dlight.analysis import (
    CHEAP_CALLS, BlockFacts, block_facts, block_realize, calls_in, param_buffers, root_blocks,
)
from workbench.dlight.base import CPUInfo
from workbench.tir.analysis import collect_vars
from workbench.tir.schedule import BlockRV, LoopRV, Schedule, ScheduleError

__all__ = [
    "PARALLEL_MIN_WORK", "inline_cheap_stages", "schedule_spatial", "parallelize",
    "vector_tile", "divisor_at_most", "loop_extent", "parallelize_outer_spatial",
    "parallel_prefix",
]

#: Below this many innermost iterations a parallel region costs more than it saves (waking
#: the thread pool takes a few microseconds).
PARALLEL_MIN_WORK = 1 << 14


def loop_extent(sch: Schedule, loop: LoopRV) -> int | None:
    ext = sch.get(loop).extent
    return int(ext.value) if hasattr(ext, "value") else None


def divisor_at_most(n: int, limit: int) -> int:
    """The largest divisor of ``n`` that is at most ``limit`` (at least 1)."""
    for d in range(min(n, limit), 0, -1):
        if n % d == 0:
            return d
    return 1


def vector_tile(extent: int | None, lanes: int) -> int | None:
    """How many iterations of a data-parallel innermost loop of ``extent`` to vectorize:
    a whole register (or half, or a quarter) that divides the extent, the extent itself when it
    is a small power of two; None when no such width exists (LLVM's own vectorizer may still
    act on the loop)."""
    if extent is None or extent < 2:
        return None
    for width in (lanes, lanes // 2, lanes // 4):
        if width >= 4 and extent % width == 0:
            return width
    if extent < lanes and extent & (extent - 1) == 0 and extent >= 4:
        return extent
    return None


def _expensive(block_calls: Sequence[str]) -> bool:
    return any(c not in CHEAP_CALLS for c in block_calls)


def inline_while(sch: Schedule, wanted: Callable[[BlockRV], bool]) -> None:
    """Inline root blocks that ``wanted`` accepts into their consumers, one at a time (each
    inlining changes the list of blocks), until no wanted block is left that inlines."""
    changed = True
    while changed:
        changed = False
        for block in root_blocks(sch) or []:
            if not wanted(block):
                continue
            try:
                sch.compute_inline(block)
            except ScheduleError:
                continue
            changed = True
            break


def inline_cheap_stages(sch: Schedule) -> None:
    """Inline every data-parallel stage into its consumers, repeating until nothing changes,
    except: outputs; stages with ``if_then_else`` (padding: inlined, the condition would be
    evaluated in the consumer's innermost loop, which is also what blocks its vectorization);
    and stages that call a transcendental function and feed several consumers (``exp`` in
    softmax: computing it once and storing it is cheaper than computing it twice)."""
    params = param_buffers(sch)

    def cheap(block: BlockRV) -> bool:
        blk = sch.get(block)
        if any(id(w.buffer) in params for w in blk.writes) or blk.init is not None or \
                any(iv.iter_type != 0 for iv in blk.iter_vars):
            return False
        calls = calls_in(blk)
        return "if_then_else" not in calls and \
            not (_expensive(calls) and len(sch.get_consumers(block)) > 1)
    inline_while(sch, cheap)


def parallelize(sch: Schedule, loops: Sequence[LoopRV], work: int | None,
                cpu: CPUInfo) -> LoopRV | None:
    """Fuse the (perfectly nested) ``loops`` and make the result parallel when there is more
    than one thread and ``work`` (innermost iterations in total, None: unknown) is worth it.
    Returns the fused loop (or the single loop), None when ``loops`` is empty."""
    if not loops:
        return None
    fused = sch.fuse(*loops) if len(loops) > 1 else loops[0]
    extent = loop_extent(sch, fused)
    if cpu.threads > 1 and (extent is None or extent > 1) and \
            (work is None or work >= PARALLEL_MIN_WORK):
        sch.parallel(fused)
    return fused


def parallel_prefix(sch: Schedule, loops: Sequence[LoopRV], cpu: CPUInfo) -> list[LoopRV]:
    """The outermost of ``loops`` whose iterations, fused, give every thread enough chunks to
    balance (or all of them): fusing fewer loops keeps the index arithmetic (a division and
    a modulo per fused loop) out of the inner loops."""
    want = 16 * cpu.threads
    prefix: list[LoopRV] = []
    total = 1
    for lp in loops:
        prefix.append(lp)
        e = loop_extent(sch, lp)
        if e is None:
            break
        total *= e
        if total >= want:
            break
    return prefix


def schedule_spatial(sch: Schedule, block: BlockRV, cpu: CPUInfo) -> None:
    """Schedule one data-parallel block at the root: a vectorized innermost loop when the store
    is contiguous in it, 2-d tiles when a load is transposed against the store (the tile
    keeps the gathered rows in cache), the remaining loops fused and parallel."""
    f = block_facts(sch, block)
    if f is None or not f.is_spatial:
        parallelize_outer_spatial(sch, block, cpu)
        return
    if not f.loops:
        return
    work = f.spatial_work()
    lanes = cpu.lanes(f.store.buffer.dtype)
    inner = len(f.iters) - 1
    x = f.iters[inner]
    if not f.store.is_unit_stride(x):
        parallelize(sch, parallel_prefix(sch, list(f.loops), cpu), work, cpu)
        return
    loops = list(f.loops)
    tiled = _transpose_tile(sch, f, lanes)
    if tiled is not None:
        outer, (yi, xi) = tiled
        parallelize(sch, parallel_prefix(sch, outer, cpu), work, cpu)
        sch.vectorize(xi)
        return
    width = vector_tile(f.extent(inner), lanes)
    vec = None
    if width is not None:
        if width == f.extent(inner):
            vec = loops.pop()
        else:
            outer_x, vec = sch.split(loops[-1], [None, width])
            loops[-1] = outer_x
    elif len(loops) > 1:
        loops.pop()  # the innermost loop stays whole (LLVM may still vectorize it)
    parallelize(sch, parallel_prefix(sch, loops, cpu), work, cpu)
    if vec is not None:
        sch.vectorize(vec)


def _transpose_tile(sch: Schedule, f: BlockFacts, lanes: int
                    ) -> tuple[list[LoopRV], tuple[LoopRV, LoopRV]] | None:
    """For a store contiguous in the innermost variable ``x`` and a load contiguous in another
    variable ``y`` but strided in ``x`` (a transpose), split both by a tile ``t`` and order the
    loops ``... y_o x_o y_i x_i``: returns the outer loops and ``(y_i, x_i)``."""
    inner = len(f.iters) - 1
    x = f.iters[inner]
    ex = f.extent(inner)
    for load in f.loads:
        if not load.depends(x) or load.is_unit_stride(x) or len(load.indices) < 2:
            continue
        last = load.indices[-1]
        ys = [i for i, v in enumerate(f.iters) if v is last and i != inner]
        if not ys:
            continue
        yi_index = ys[0]
        ey = f.extent(yi_index)
        tile = next((t for t in (lanes, lanes // 2) if t >= 4 and ex and ey and
                     ex % t == 0 and ey % t == 0), None)
        if tile is None:
            return None
        loops = list(f.loops)
        y_o, y_i = sch.split(loops[yi_index], [None, tile])
        x_o, x_i = sch.split(loops[inner], [None, tile])
        outer = [y_o if i == yi_index else x_o if i == inner else lp
                 for i, lp in enumerate(loops)]
        sch.reorder(*outer, y_i, x_i)
        return outer, (y_i, x_i)
    return None


def parallelize_outer_spatial(sch: Schedule, block: BlockRV, cpu: CPUInfo) -> None:
    """The fallback for any block: the outermost loops that bind only data-parallel iteration
    variables become one parallel loop (nothing else changes)."""
    loops = sch.get_loops(block)
    blk = sch.get(block)
    realize = block_realize(sch, block)
    if realize is None:
        return
    reduce_vars = set()
    for iv, value in zip(blk.iter_vars, realize.iter_values):
        if iv.iter_type != 0:
            reduce_vars |= collect_vars(value)
    outer: list[LoopRV] = []
    for lp in loops:
        loop = sch.get(lp)
        if loop.loop_var in reduce_vars or loop.kind != "serial":
            break
        outer.append(lp)
        if not _single_child(sch, lp):
            break
    if not outer:
        return
    work = 1
    for lp in loops:
        e = loop_extent(sch, lp)
        work = None if e is None or work is None else work * e
    try:
        parallelize(sch, outer, work, cpu)
    except ScheduleError:
        pass


def _single_child(sch: Schedule, loop: LoopRV) -> bool:
    from workbench.tir.stmt import For
    body = sch.get(loop).body
    return isinstance(body, For)
