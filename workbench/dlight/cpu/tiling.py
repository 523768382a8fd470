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

from workbench import options
from workbench.dlight.analysis import Access, BlockFacts, param_buffers
from workbench.dlight.base import CPUInfo
from workbench.dlight.cpu.common import (
    PARALLEL_MIN_WORK, loop_extent, parallelize, schedule_spatial,
)
from workbench.ir import dtype as dt
from workbench.tir.analysis import collect_vars
from workbench.tir.expr import IntImm
from workbench.tir.schedule import BlockRV, LoopRV, Schedule, ScheduleError
from workbench.tir.tensor_intrin.x86 import LOCAL_SUFFIX
from workbench.tir.transform.remove_weight_layout_rewrite_block import PREPROC_ANNOTATION

__all__ = ["TilePlan", "apply_tile_plan", "pick_vector_tile", "vector_width_ok",
           "blocked_accumulator_budget", "block_tile"]


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


def blocked_accumulator_budget(cpu: CPUInfo) -> int:
    """Accumulator registers of a register tile over output-channel blocks x pixels (W x U,
    :attr:`TilePlan.w`), whose step also holds W weight vectors and a broadcast input: 24
    of AVX-512's 32 registers (MLAS's 4 x 6); 8 of AVX2's 16 (4 x 2 or 2 x 4). With 12 there
    (4 x 3, MLAS's AVX2 tile, or 2 x 6), LLVM's code spills: Haswell code ran blocked 3x3
    convolutions at 86-95 GFLOPS against 147-184 with 4 x 2 (Zen 4, whose 256-bit FMAs
    peak as high as its 512-bit ones), and 1x1 ones at 170-180 against 192-208."""
    return 24 if cpu.vector_bits >= 512 else 8


def block_tile(w_extent: int | None, u_extent: int | None, budget: int, max_u: int,
               whole: bool = False) -> tuple[int, int]:
    """``(W, U)`` of a register tile over W blocks of a w variable (at most 4, dividing its
    extent) by U of a u variable (at most ``max_u`` and u's extent), W x U within ``budget``
    accumulators, with the most FMAs per loaded value ``W*U / (W + U)``; of equals, the one
    with the least tail. A U that does not divide u's extent costs nothing for its tail: the
    last tile runs a version of its own with only its pixels (UnswitchTilePredicates) --
    counted as lost work, the tiles came out narrower (4 x 5 on ResNet's 14-pixel rows, 4 x 4
    on 7) and ResNet-50 ran 2% slower (1.001x against 0.982x onnxruntime's time, in turns on
    Sapphire Rapids). With ``whole`` a U that does not divide is not allowed (an intrinsic
    covering whole tiles only). An unknown extent allows only 1."""
    best = (0.0, 1, 1)
    for W in range(1, 5):
        if w_extent is None or w_extent % W:
            continue
        for U in range(1, min(max_u, budget // W, u_extent or max_u) + 1):
            if whole and (u_extent is None or u_extent % U):
                continue
            eff = 1.0 if u_extent is None else u_extent / (-(-u_extent // U) * U)
            score = W * U / (W + U) + 1e-3 * eff
            if score > best[0] + 1e-9:
                best = (score, W, U)
    return best[1], best[2]


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
    v_outer = [lp for lp in (v_o,) if lp is not None]
    u_outer = [lp for lp in (u_o,) if lp is not None]
    outer = first + v_outer + rest + u_outer
    n_parallel = None          # how many leading ``outer`` loops are fused parallel
    w_loop = {plan.w: w_o} if w_i is not None else {}     # w's loop outside the tile, if any
    row = _rows_first(sch, f, plan, v_loads, spatial, w_loop, cpu)
    if row is not None:
        # the weights' loops (output-channel blocks) inside the rows' loops
        first, rest = row[1], row[2]
        row = row[0]
        # Rows outermost: each thread computes its band of output rows for every channel,
        # the band the same kernel of the next layer reads (see _rows_first).
        at = rest.index(row)
        if plan.plane is None:
            outer = rest[:at + 1] + first + v_outer + rest[at + 1:] + u_outer
        else:
            # the plane is padded per band of rows under the parallel loop: a few rows of
            # one channel block at a time, on the stack
            i_row = next(i for i, lp in enumerate(f.loops) if lp is row)
            bands = _row_bands(sch, row, plan.plane, f.iters[i_row], cpu)
            band_o, band_i = sch.split(row, [bands, None])
            outer = rest[:at] + [band_o] + first + v_outer + [band_i] + rest[at + 1:] + \
                u_outer
            n_parallel = at + 1 + len(first)
    reds = [f.loops[i] for i in f.reduction if i != plan.inner]
    chunks = None
    if row is None:
        at = len(first) + len(v_outer)
        chunks = _reduction_chunks(sch, f, plan, outer[:at], outer[at:], reds, cpu)
    if chunks is not None:
        # the chunks' loops outside the plane's tiles (see _reduction_chunks)
        chunk, whole = chunks
        chunk_o, chunk_i = sch.split(reds[0], [None, chunk])
        hoisted = reds[1:1 + whole]
        reds = [chunk_i] + reds[1 + whole:]
        outer = outer[:at] + [chunk_o] + hoisted + outer[at:]
    inner = [lp for lp in (w_i, u_i, v_i) if lp is not None]
    if plan.inner is not None:
        inner.append(f.loops[plan.inner])
    sch.reorder(*outer, *reds, *inner)
    if chunks is not None:
        # the tile's accumulator is the plane's (the loops from the chunks' loops down)
        reds = outer[at:at + 1 + chunks[1]] + reds
        outer = outer[:at]
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
    if n_parallel is not None:
        k = n_parallel
    else:
        k = len(outer) if plan.plane is None else _plane_depth(f, outer, plan.plane)
    fused = parallelize(sch, outer[:k], work, cpu)
    above = fused if k == len(outer) else outer[-1]   # the tile's own loops are below this
    # Vectorize before decompose_reduction: the update block it leaves (no init) is not a
    # reduction block any more, and parallel/vectorize refuse it (TVM's compact dataflow).
    if plan.intrin is None:
        sch.vectorize(v_i)
    # a plane's accumulator (reduction chunks): unroll its tile's loops, not its rows
    tile_copies = plan.W * plan.U if chunks is not None else None
    if reds:
        init = sch.decompose_reduction(anchor, reds[0])
        _vectorize_tile(sch, init, above, lanes, tile_copies)
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
        _vectorize_tile(sch, fused_epilogue, above, lanes, tile_copies)
    for access in plan.pack:
        _pack(sch, anchor, access, v_var, plan.V,
              [f.iters[i] for i in f.spatial if i != plan.v], cpu)
    return fused


#: A register tile's weights for one chunk of the reduction -- one step of its outer loops,
#: over all of its inner ones -- at most this size (an L1 cache's share) make
#: :func:`_reduction_chunks` split the reduction.
CHUNK_WEIGHT_BYTES = 32 * 1024
#: Where one step's weights alone are above CHUNK_WEIGHT_BYTES (a 3x3 kernel's 16 input
#: channels for 64 output channels: 36 KB), chunks of one step, up to this size ...
CHUNK_ONE_STEP_MAX_BYTES = 64 * 1024
#: ... unless a chunk of fewer loops (within CHUNK_WEIGHT_BYTES) and the plane's accumulator
#: fit this (Sapphire Rapids' L1): then those loops leave the tile too.
CHUNK_L1_BYTES = 48 * 1024
#: ... unless the plane's accumulator would be larger than this.
CHUNK_MAX_ACC_BYTES = 256 * 1024


def _reduction_chunks(sch: Schedule, f: BlockFacts, plan: TilePlan, panel: list[LoopRV],
                      plane: list[LoopRV], reds: list[LoopRV], cpu: CPUInfo
                      ) -> tuple[int, int] | None:
    """How the reduction runs in chunks outside the tiles of the plane: ``(chunk, whole)``,
    ``chunk`` iterations of the first reduction loop (a blocked convolution's input-channel
    blocks) a chunk and the ``whole`` reduction loops after it outside the tiles too (a 3x3
    kernel's rows); None to keep each tile's whole reduction inside it.

    The tile of W output-channel blocks reads W weight vectors per step of the reduction, so
    a 1x1 convolution over 1,024 input channels streams a 256 KB panel through each tile of 5
    pixels from the L2 cache: per step 256 bytes for 20 FMAs, about what L2 delivers. In
    chunks of input channels whose panel fits L1 (:data:`CHUNK_WEIGHT_BYTES`: 128 channels x
    64 output channels), each chunk runs over every tile of the plane (``panel``'s loops stay
    outside, the ``plane`` loops go inside the chunks' loops) and its weights are read from
    L2 once: onnxruntime's pointwise kernel (MLAS: 128 input channels a batch, accumulating
    into the output) in effect. The tile's accumulator is then the plane's, kept in memory
    between chunks (at most :data:`CHUNK_MAX_ACC_BYTES`). Only for a tile over output-channel
    blocks (``plan.w``) with a plain reduction, whose panel loops still give every thread
    work: those loops are then all that runs in parallel. ResNet-50 on a 2-core Sapphire
    Rapids, untuned, in turns with onnxruntime: 1.04x its time without chunks, 0.99x with
    chunks of 1x1 convolutions only, 0.99x with 3x3 ones too (against 1.03x in that run).

    Where one step of the first loop is above :data:`CHUNK_WEIGHT_BYTES` (a 3x3 kernel's 16
    input channels for 64 output channels: 36 KB), a chunk is one step
    (:data:`CHUNK_ONE_STEP_MAX_BYTES`) -- or, when the plane's accumulator is small, the
    loops after the first leave the tile too, whole, until a chunk fits
    :data:`CHUNK_WEIGHT_BYTES` and, with the accumulator, :data:`CHUNK_L1_BYTES`: a 3x3
    kernel's chunk is then one row of it (12 KB), which stays in L1 with a 7x7 plane's
    accumulator (22 KB) while every tile of the plane reads it. Default schedules on Sapphire
    Rapids, in turns, warm / with the weights flushed: ResNet-18's 512 x 7^2 direct kernel
    0.94x / 0.92x the time of one-block chunks (which with the accumulator overflow its 48 KB
    L1); chunks of one tap (4 KB) ran 1.04-1.17x slower warm; with the 64-260 KB
    accumulators of 14^2 and 28^2 planes, which live in L2 anyway, rows of the kernel as
    chunks ran 1.00-1.06x slower (three passes over them)."""
    if plan.w is None or plan.inner is not None or plan.unroll_reduction or plan.plane \
            is not None or not reds or not panel or not plane:
        return None
    extents = [loop_extent(sch, lp) for lp in reds]
    e0 = extents[0]
    if e0 is None or e0 < 2 or any(e is None for e in extents):
        return None
    nbytes = dt.parse(f.store.buffer.dtype).bits // 8
    step = plan.W * plan.V * nbytes
    for e in extents[1:]:
        step *= e
    if step * e0 <= CHUNK_WEIGHT_BYTES:
        return None                             # the panel fits already
    acc = plan.W * plan.U * plan.V * nbytes
    for lp in plane:
        acc *= loop_extent(sch, lp) or 1 << 20
    chunk = max((d for d in range(1, e0) if e0 % d == 0 and d * step <= CHUNK_WEIGHT_BYTES),
                default=0)
    whole = 0
    if not chunk:
        # one step is too big: fewer loops a chunk, if they fit L1 with the accumulator
        size = step
        while size > CHUNK_WEIGHT_BYTES and whole + 1 < len(reds):
            whole += 1
            size //= extents[whole]
        if size + acc > CHUNK_L1_BYTES:
            whole = 0                           # the accumulator is in L2 anyway
        if not whole and step > CHUNK_ONE_STEP_MAX_BYTES:
            return None
        chunk = 1
    par = 1
    for lp in panel:
        par *= loop_extent(sch, lp) or 0
    if acc > CHUNK_MAX_ACC_BYTES or par < cpu.threads or (par % cpu.threads and
                                                          par < 4 * cpu.threads):
        return None
    return chunk, whole


#: Weights (the operand of the vectorized variable, a parameter) at most this size are read
#: by every thread when the rows go first (see :func:`_rows_first`). Measured on a Zen 4
#: (1 MB L2 a core), in turns: 512 KB made ResNet-18/50 and EfficientNet-B0 1.5-2.4% slower,
#: 128 KB left them even or faster while MobileNetV2 gained 8%. On a 2-core Sapphire Rapids
#: (2 MB L2 a core, a last-level cache as slow as memory), in turns against 128 KB: 256 KB
#: ran MobileNetV2 0.90x with Haswell code (its 576 -> 96 projections, 221 KB, took 262 us
#: a call in the model against 107 alone: each thread read the rows the other core wrote),
#: EfficientNet-B0 0.97x, ResNet-50 0.98x, MobileNetV3-Large and ResNet-18 1.00x; with
#: AVX-512 code 0.99-1.00x everywhere. 512 KB ran ResNet-18 1.11x slower there.
ROWS_FIRST_MAX_WEIGHT_BYTES = 256 * 1024
#: A band of padded rows computed under the parallel loop lives on the stack: at most this.
ROW_BAND_MAX_BYTES = 48 * 1024


def _rows_first(sch: Schedule, f: BlockFacts, plan: TilePlan, v_loads: list[Access],
                spatial: list[int], w_loop: dict, cpu: CPUInfo
                ) -> tuple[LoopRV, list[LoopRV], list[LoopRV]] | None:
    """The output-row loop to split the threads by, with the spatial loops outside the tile
    that the weights depend on and those they do not (rows first); None to keep the weight
    panels first.

    Why: a convolution whose threads each own a set of output-channel blocks reads its input
    from the core that wrote it only if the layer before split its output the same way --
    and a 1x1 or dense convolution reads every input channel. MobileNetV2's expand, depthwise
    and project kernels split by channels, channels and rows: on 2 cores with private L2s
    half of each input then came from the other core (a 14x14 depthwise conv: 10 us alone,
    17 us after a row-split consumer). Split by rows everywhere, each core reads what it
    wrote (but for the few halo rows of a window). Only for small weights -- every thread
    then reads them whole, where a channel split keeps each thread's panel hot -- that are
    parameters of the kernel (a convolution's, not a matmul over activations)."""
    if cpu.threads < 2 or not options.get("parallel_rows_first"):
        return None
    params = param_buffers(sch)
    # (an input read through inlined padding depends on every output variable: not a weight)
    acts = [a for a in v_loads if all(a.depends(f.iters[i]) for i in f.spatial)]
    weights = {id(a.buffer): a for a in v_loads
               if id(a.buffer) in params and not any(a is b for b in acts)}
    if not weights:
        plane = plan.plane or (acts[0] if len(acts) == 1 else None)
        return _pool_rows_first(sch, f, plane, spatial, w_loop, cpu)
    nbytes = 0
    for a in weights.values():
        n = 1
        for e in a.buffer.shape:
            if not isinstance(e, IntImm):
                return None
            n *= e.value
        nbytes += n * dt.parse(a.buffer.dtype).bits // 8
    if nbytes > ROWS_FIRST_MAX_WEIGHT_BYTES:
        return None
    deps = {id(x) for a in weights.values() for i in a.indices for x in collect_vars(i)}
    first, rest = [], []
    for i in spatial:
        loop = w_loop[i] if i in w_loop else f.loops[i]
        if loop is not None:
            (first if id(f.iters[i]) in deps else rest).append(loop)
    return _row_loop(sch, first, rest, cpu)


def _row_loop(sch: Schedule, first: list[LoopRV], rest: list[LoopRV], cpu: CPUInfo
              ) -> tuple[LoopRV, list[LoopRV], list[LoopRV]] | None:
    """:func:`_rows_first`'s answer for these loops: the first of ``rest`` that is not a
    unit loop is the rows' (at least a row per thread), or None."""
    if not first:
        return None
    for lp in rest:     # the batch (extent 1), then the rows
        e = loop_extent(sch, lp)
        if e is None or e > 1:
            return (lp, first, rest) if e is not None and e >= cpu.threads else None
    return None


def _pool_rows_first(sch: Schedule, f: BlockFacts, plane: Access | None, spatial: list[int],
                     w_loop: dict, cpu: CPUInfo
                     ) -> tuple[LoopRV, list[LoopRV], list[LoopRV]] | None:
    """:func:`_rows_first` for a window over an input with no weights (pooling), ``plane``
    the load of the padded plane (or of the input, its padding read in the tile): the loops
    indexing the input's planes directly (channel blocks) take the weights' place, so the
    threads split by bands of output rows, each reading the rows the layer before wrote on
    its core -- not by whole planes padded into a buffer the size of the input (ResNet's 3x3
    max pool after the stem: 4 planes of 64 channels, 2 per thread, ran 2-7x slower in the
    model than alone)."""
    if plane is None:
        return None
    first, rest = [], []
    for i in spatial:
        loop = w_loop[i] if i in w_loop else f.loops[i]
        if loop is None:
            continue
        plain = plane.plain_dim(f.iters[i]) is not None
        (first if plain and (loop_extent(sch, loop) or 0) > 1 else rest).append(loop)
    return _row_loop(sch, first, rest, cpu)


def _row_bands(sch: Schedule, row: LoopRV, plane: Access, row_var, cpu: CPUInfo) -> int:  # noqa: ANN001
    """How many bands to cut ``row``'s output rows into: a multiple of the thread count
    (each thread its own bands, in row order) whose padded input rows of one channel block
    fit :data:`ROW_BAND_MAX_BYTES`."""
    h = loop_extent(sch, row) or 1
    dims = plane.dims_of(row_var)
    shape = [e.value if isinstance(e, IntImm) else None for e in plane.buffer.shape]
    if not dims or any(e is None for e in shape[dims[0]:]):
        return min(h, cpu.threads)
    d = dims[0]
    row_bytes = dt.parse(plane.buffer.dtype).bits // 8
    for e in shape[d + 1:]:
        row_bytes *= e
    in_rows = shape[d]
    bands = cpu.threads
    while bands * 2 <= h:
        per = -(-h // bands)
        need = -(-per * in_rows // h) + 2
        if need * row_bytes <= ROW_BAND_MAX_BYTES:
            break
        bands *= 2
    return min(bands, h)


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


def _vectorize_tile(sch: Schedule, block: BlockRV, above: LoopRV | None, lanes: int,
                    max_unrolled: int | None = None) -> None:
    """Vectorize the innermost loop of ``block`` below ``above`` and unroll the loops between
    (a tile's init, copy-out or epilogue: a few constant-extent loops); with
    ``max_unrolled``, only the inner ones whose extents multiply to at most that (a plane's
    accumulator: its rows stay loops)."""
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
    copies = 1
    for lp, e in reversed(list(zip(loops[:-1], extents[:-1]))):
        if e is not None and 1 < e <= 16:
            copies *= e
            if max_unrolled is not None and copies > max_unrolled:
                break
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
