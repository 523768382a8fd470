"""Register tiling of one reduction block: the schedule behind the ``Matmul`` and
``SpatialReduction`` rules.

A :class:`TilePlan` names a spatial iteration variable ``v`` to vectorize (``V`` lanes) and,
for outer-product reductions, a second one ``u`` whose ``U`` iterations reuse each vector of
the operand that depends on ``v`` (a matmul's ``i`` for ``v = j``). :func:`apply_tile_plan`
builds::

    for outer in parallel(<spatial tiles>):         # the operand of v: its panel stays hot
        acc[U, V] = 0                                # init, vectorized
        for <reduction loops>:
            for u_i in unroll(U):
                for v_i in vectorized(V):
                    acc[u_i, v_i] += a(u_i) * b(v_i)  # U x V/lanes accumulators in registers
        out[tile] = epilogue(acc[tile])              # fused elementwise epilogue (or a copy)

The accumulator is the block's output buffer made local to the tile (an elementwise epilogue
is moved under the tile with ``reverse_compute_at``, else a ``cache_write`` stages it), with the
``v`` dimension laid out last (``transform_layout``) so every accumulator access is one
contiguous vector. Loads of the ``v`` operand that are not contiguous in ``v`` are repacked
``[..., v // V, ..., v % V]``: a parameter through a block annotated as layout-rewrite
preproc (what ``RewriteLayout`` makes, so ``PrepackConstantWeights`` packs a constant weight
once at compile time), an intermediate through a plain ``cache_read``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from workbench.dlight.analysis import Access, BlockFacts, param_buffers
from workbench.dlight.base import CPUInfo
from workbench.dlight.cpu.common import (
    PARALLEL_MIN_WORK, loop_extent, parallelize, schedule_spatial,
)
from workbench.tir.analysis import collect_vars
from workbench.tir.schedule import BlockRV, LoopRV, Schedule, ScheduleError
from workbench.tir.tensor_intrin.x86 import LOCAL_SUFFIX
from workbench.tir.transform.remove_weight_layout_rewrite_block import PREPROC_ANNOTATION

__all__ = ["TilePlan", "apply_tile_plan", "pick_vector_tile", "vector_width_ok"]


@dataclass
class TilePlan:
    v: int                      # index of the vectorized iteration variable
    V: int                      # its tile (vector lanes, possibly several registers)
    u: int | None = None        # index of the register-blocked variable, if any
    U: int = 1                  # its tile
    pack: list[Access] = field(default_factory=list)
    # A second variable the v operand depends on and the u operand does not (a blocked
    # convolution's output-channel block index): W of its iterations are in the register tile
    # too, so one broadcast of the u operand feeds W x V/lanes accumulators (MLAS's NCHWc
    # kernel: 4 filter blocks x 6 pixels).
    w: int | None = None
    W: int = 1
    # Unroll the reduction loops too (small reductions whose coefficients are constants
    # selected by the loop indices: Winograd's transforms fold to a few FMAs).
    unroll_reduction: bool = False
    # A load of a padded prologue buffer computed per iteration of the parallel loop: only
    # the leading outer loops that index it directly (a conv's batch and channel) are fused
    # and parallel, the rest stay serial inside, so one plane of it is padded at a time.
    plane: Access | None = None
    # A reduction variable kept inside the tile, below v (an int8 dot product's 4 input
    # channels per 32-bit lane), and the tensor intrinsic that then computes each (v, inner)
    # sub-tile instead of a vectorized v loop (``dot_16x4_vnni``: one vpdpbusd; its
    # ``_local`` variant when the accumulator is a local copy).
    inner: int | None = None
    intrin: str | None = None


def pick_vector_tile(extent: int | None, lanes: int, max_regs: int) -> int:
    """The ``v`` tile: up to ``max_regs`` whole registers that divide the extent, else the
    extent itself when it fits one register, else the largest divisor below one register
    (at least 4 lanes), else one register with a predicated tail. Never a width above one
    register that is not a whole number of registers: LLVM splits such vectors (28 lanes)
    into pieces that run an order of magnitude slower than two whole registers."""
    if extent is None:
        return lanes
    for regs in range(max_regs, 0, -1):
        if extent % (regs * lanes) == 0:
            return regs * lanes
    if extent <= lanes:
        return extent
    for d in range(lanes - 1, 3, -1):
        if extent % d == 0:
            return d
    return lanes


def vector_width_ok(width: int, lanes: int) -> bool:
    """A vector of ``width`` lanes compiles well: at most one register, or whole registers."""
    return width <= lanes or width % lanes == 0


def _split(sch: Schedule, loop: LoopRV, extent: int | None, tile: int
           ) -> tuple[LoopRV | None, LoopRV]:
    if extent is not None and tile >= extent:
        return None, loop
    outer, inner = sch.split(loop, [None, tile])
    return outer, inner


def apply_tile_plan(sch: Schedule, f: BlockFacts, plan: TilePlan, epilogue: BlockRV | None,
                    cpu: CPUInfo) -> LoopRV | None:
    """Tile reduction block ``f`` by ``plan`` (see the module docstring). ``epilogue`` is the
    block's elementwise consumer to fuse under the tile, or None. Returns the parallel loop
    (the outer loops fused; with ``plan.plane``, only its leading ones), or None."""
    anchor = f.rv
    v_var = f.iters[plan.v]
    lanes = cpu.lanes(f.store.buffer.dtype)
    v_o, v_i = _split(sch, f.loops[plan.v], f.extent(plan.v), plan.V)
    u_o = u_i = None
    if plan.u is not None:
        if plan.U > 1:
            u_o, u_i = _split(sch, f.loops[plan.u], f.extent(plan.u), plan.U)
        else:
            u_o = f.loops[plan.u]
    w_o = w_i = None
    if plan.w is not None and plan.W > 1:
        w_o, w_i = _split(sch, f.loops[plan.w], f.extent(plan.w), plan.W)
    # Spatial loops outside the tile: the ones the v operand depends on first, then v's outer
    # part, then the others (u's outer part last), so one panel of the v operand is reused by
    # every tile of the rest.
    v_loads = f.loads_depending(v_var)
    deps = {id(x) for a in v_loads for i in a.indices for x in collect_vars(i)}
    spatial = [i for i in f.spatial if i not in (plan.v, plan.u)]
    if plan.unroll_reduction and v_loads:
        # A transform's tile loops: the ones the input walks in its outer dimensions first,
        # so each tile's window is read once while it is in cache.
        load = v_loads[0]
        spatial.sort(key=lambda i: min(load.dims_of(f.iters[i]) or [len(load.indices)]))
    first, rest = [], []
    for i in spatial:
        loop = w_o if i == plan.w and w_i is not None else f.loops[i]
        if loop is not None:
            (first if id(f.iters[i]) in deps else rest).append(loop)
    outer = first + [lp for lp in (v_o,) if lp is not None] + rest + \
        [lp for lp in (u_o,) if lp is not None]
    reds = [f.loops[i] for i in f.reduction if i != plan.inner]
    inner = [lp for lp in (w_i, u_i, v_i) if lp is not None]
    if plan.inner is not None:
        inner.append(f.loops[plan.inner])
    sch.reorder(*outer, *reds, *inner)
    if not outer:
        outer = [sch.add_unit_loop(reds[0] if reds else inner[0])]
    tile_loop = outer[-1]

    # The accumulator: local to the tile, v's dimension last. An elementwise epilogue moves
    # under the tile (the output buffer then only lives there); otherwise a local copy of
    # the tile is written back once the reduction is done.
    store_dim = f.store.plain_dim(v_var)
    moved = False
    tile_block = None
    if epilogue is not None and id(f.store.buffer) not in param_buffers(sch):
        _move_dim_last(sch, anchor, store_dim, len(f.store.indices))
        moved = True
        try:
            sch.reverse_compute_at(epilogue, tile_loop)
            tile_block = epilogue
        except ScheduleError:
            tile_block = None
    if tile_block is None:
        tile_block = sch.cache_write(anchor, 0, "local")
        if not moved:
            _move_dim_last(sch, anchor, store_dim, len(f.store.indices))
        sch.reverse_compute_at(tile_block, tile_loop)
        if epilogue is not None:
            schedule_spatial(sch, epilogue, cpu)
    fused_epilogue = tile_block

    work = f.work()
    k = len(outer) if plan.plane is None else _plane_depth(f, outer, plan.plane)
    fused = parallelize(sch, outer[:k], work, cpu)
    above = fused if k == len(outer) else outer[-1]   # the tile's own loops are below this
    # Vectorize before decompose_reduction: the update block it leaves (no init) is not a
    # reduction block any more, and parallel/vectorize refuse it (TVM's compact dataflow).
    if plan.intrin is None:
        sch.vectorize(v_i)
    if reds:
        init = sch.decompose_reduction(anchor, reds[0])
        _vectorize_tile(sch, init, above, lanes)
    if plan.intrin is not None:
        # The accumulator is the anchor's own buffer (an epilogue moved under the tile) or a
        # local copy (cache_write): the intrinsic's variant for that scope.
        local = sch.get(anchor).writes[0].buffer.scope == "local"
        sch.tensorize(v_i, plan.intrin + (LOCAL_SUFFIX if local else ""))
    for lp in (w_i, u_i):
        if lp is not None:
            sch.unroll(lp)
    if plan.unroll_reduction:
        for lp in reds:
            sch.unroll(lp)
    if fused_epilogue is not None:
        _vectorize_tile(sch, fused_epilogue, above, lanes)
    for access in plan.pack:
        _pack(sch, anchor, access, v_var, plan.V,
              [f.iters[i] for i in f.spatial if i != plan.v], cpu)
    return fused


def _plane_depth(f: BlockFacts, outer: list[LoopRV], plane: Access) -> int:
    """How many leading ``outer`` loops bind an iteration variable that indexes ``plane``
    directly (at least one)."""
    k = 0
    for lp in outer:
        i = next((i for i, loop in enumerate(f.loops) if loop is lp), None)
        if i is None or plane.plain_dim(f.iters[i]) is None:
            break
        k += 1
    return max(k, 1)


def _move_dim_last(sch: Schedule, block: BlockRV, dim: int | None, ndim: int) -> None:
    if dim is None or dim == ndim - 1:
        return
    order = [d for d in range(ndim) if d != dim] + [dim]
    sch.transform_layout(block, ("write", 0), lambda *i: tuple(i[d] for d in order),
                         assume_injective_transform=True)


def _vectorize_tile(sch: Schedule, block: BlockRV, above: LoopRV | None, lanes: int) -> None:
    """Vectorize the innermost loop of ``block`` below ``above`` and unroll the loops between
    (a tile's init, copy-out or epilogue: a few constant-extent loops)."""
    loops = sch.get_loops(block)
    if above is not None:
        above_var = sch.get(above).loop_var
        idx = next((k for k, lp in enumerate(loops) if sch.get(lp).loop_var is above_var), -1)
        loops = loops[idx + 1:]
    if not loops:
        return
    extents = [loop_extent(sch, lp) for lp in loops]
    inner = extents[-1]
    if inner is not None and inner > 1:
        if vector_width_ok(inner, lanes):
            sch.vectorize(loops[-1])
        elif inner % (lanes // 2) == 0:
            sch.vectorize(sch.split(loops[-1], [None, lanes // 2])[1])
    for lp, e in zip(loops[:-1], extents[:-1]):
        if e is not None and 1 < e <= 16:
            sch.unroll(lp)


def _pack(sch: Schedule, anchor: BlockRV, access: Access, v_var, V: int,  # noqa: ANN001
          spatial_vars: list, cpu: CPUInfo) -> None:
    """Repack ``access.buffer`` so the ``v`` dimension's tile is innermost."""
    dim = access.plain_dim(v_var)
    ndim = len(access.indices)
    blk = sch.get(anchor)
    read_index = next(k for k, r in enumerate(blk.reads) if r.buffer is access.buffer)
    is_param = id(access.buffer) in param_buffers(sch)
    copy = sch.cache_read(anchor, read_index, "global")
    if is_param:
        # 1, not True: trace JSON stores booleans as ints and a replay must give the same IR.
        sch.annotate(copy, PREPROC_ANNOTATION, 1)

    # Panels: the dimensions indexed by spatial variables (a batch) first, then v's tile
    # index, then the rest (the reduction dimensions) in order, then the lane within the tile
    # -- the order the tiled loop nest walks them in.
    outer = [d for d in range(ndim) if d != dim and
             any(x in collect_vars(access.indices[d]) for x in spatial_vars)]
    rest = [d for d in range(ndim) if d != dim and d not in outer]

    def packed(*i):  # noqa: ANN002, ANN202
        return tuple(i[d] for d in outer) + (i[dim] // V,) + tuple(i[d] for d in rest) + \
            (i[dim] % V,)
    sch.transform_layout(anchor, ("read", read_index), packed, assume_injective_transform=True)
    if is_param:
        # The preproc block must stay one loop per variable, reading the source in order, for
        # RemoveWeightLayoutRewriteBlock to strip it (a constant is then packed at compile
        # time). Its loops go in the destination's order (v's loop innermost) -- LLVM spends
        # seconds on a loop nest that scatters across the whole buffer -- and the outermost
        # one that is not a unit loop runs in parallel.
        loops = sch.get_loops(copy)
        order = [loops[d] for d in outer + rest + [dim]]
        sch.reorder(*order)
        work = 1
        for lp in order:
            work *= loop_extent(sch, lp) or 1 << 10
        big = [lp for lp in order if (loop_extent(sch, lp) or 2) > 1]
        if big and cpu.threads > 1 and work >= PARALLEL_MIN_WORK:
            sch.parallel(big[0])
    else:
        # A copy made here can iterate over the packed layout instead (a gather: contiguous,
        # vectorizable stores).
        sch.transform_block_layout(copy, packed)
        schedule_spatial(sch, copy, cpu)
