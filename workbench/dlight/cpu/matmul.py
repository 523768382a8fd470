"""``Matmul``: register-tiled outer-product reductions -- matmul, batch matmul, dense, and
conv2d in NCHW or NHWC (grouped too), with their fused elementwise epilogues.

The structural test, on the single reduction block left after inlining: it reads at least two
buffers, and there are two spatial variables ``v`` and ``u`` such that some loads depend on
``v`` but not on ``u`` (the matmul's ``B[k, j]``, the conv's weight), the others depend on
``u`` but not on ``v`` (``A[i, k]``, the conv's data), and the output is indexed by ``v``
alone in one dimension. Then one vector of the ``v`` operand, loaded once, feeds ``U``
fused multiply-adds, which is what makes a matmul compute-bound. Among the candidate pairs
the plan that fills the vector registers best wins (see :func:`plan_outer_product`).
"""
from __future__ import annotations

from workbench.dlight.analysis import (
    Access, BlockFacts, constant_param_buffers, param_buffers,
)
from workbench.dlight.base import CPUInfo
from workbench.dlight.cpu.anchor import AnchorRule
from workbench.dlight.cpu.common import divisor_at_most
from workbench.dlight.cpu.tiling import (
    TilePlan, block_tile, blocked_accumulator_budget, pick_vector_tile,
)
from workbench.tir.schedule import Schedule

__all__ = ["Matmul", "plan_outer_product"]

MAX_U = 8
#: A parameter that is already contiguous along v is still packed into panels when each
#: element is used at least this often.
MIN_PACK_REUSE = 16


def _packable(a: Access, var, V: int) -> bool:  # noqa: ANN001
    """``a`` can be repacked with ``var``'s dimension tiled by ``V`` innermost."""
    dim = a.plain_dim(var)
    if dim is None:
        return False
    ext = a.buffer.shape[dim]
    return hasattr(ext, "value") and int(ext.value) % V == 0


def _reuse(f: BlockFacts, v_loads: list[Access]) -> int:
    """How many times each element of the v operand is used: the product of the spatial
    extents it does not depend on (symbolic extents count as large)."""
    n = 1
    for i in f.spatial:
        var = f.iters[i]
        if not any(a.depends(var) for a in v_loads):
            n *= f.extent(i) or 1 << 10
    return n


def _u_tile(extent: int | None, max_u: int) -> int:
    if extent is None:
        # A symbolic extent (a dynamic sequence length) gets the widest tile: whole tiles
        # skip their bounds checks (UnswitchTilePredicates), and for a short sequence one
        # tile covers every row, so the weight is read once (with 4 rows, 7 rows read the
        # weight twice: 1.8x the time of a build for 7 rows on a Zen 4 core).
        return max_u
    best = divisor_at_most(extent, max_u)
    if best < 4 and extent > max_u:
        return max_u  # a predicated tail beats one row at a time
    return best


def plan_outer_product(f: BlockFacts, cpu: CPUInfo, params: frozenset[int] = frozenset(),
                       constants: frozenset[int] = frozenset()) -> TilePlan | None:
    """The best ``(v, V, u, U)`` for reduction block ``f`` (None: not an outer product).
    ``params`` holds the ids of the function's parameter buffers (repacking one of those is
    free for constant weights); ``constants`` those known to be compile-time constants."""
    if len(f.loads) < 2 or not f.reduction:
        return None
    lanes = cpu.lanes(f.store.buffer.dtype)
    best: tuple[float, TilePlan] | None = None
    n_store = len(f.store.indices)
    for v in f.spatial:
        var = f.iters[v]
        v_loads = f.loads_depending(var)
        others = [a for a in f.loads if not a.depends(var)]
        if not v_loads or not others or f.store.plain_dim(var) is None:
            continue
        ev = f.extent(v)
        V = pick_vector_tile(ev, lanes, 2)
        pack = [a for a in v_loads if not a.is_unit_stride(var)]
        if any(not _packable(a, var, V) for a in pack):
            continue
        # A parameter read contiguously along v but with rows of more than one tile (a
        # [K, N] weight) is packed too, into panels [N / V, K, V] that one tile walks
        # contiguously, when each element is used often enough to pay for packing it on every
        # call (free for constant weights, which are packed at compile time). A weight known
        # to be constant is packed whatever its reuse: a product of one row (a decode step's
        # matrix-vector product) otherwise walks K rows of the weight a whole row apart, a new
        # page every row (1 x 768 x 3072: 1.6 ms unpacked, 0.4 ms in panels, on Zen 4).
        reuse = _reuse(f, v_loads)
        pack += [a for a in v_loads if a not in pack and id(a.buffer) in params and
                 (reuse >= MIN_PACK_REUSE or id(a.buffer) in constants) and
                 _packable(a, var, V) and int(a.buffer.shape[a.plain_dim(var)].value) > V]
        for u in f.spatial:
            uvar = f.iters[u]
            if u == v or any(a.depends(uvar) for a in v_loads) or \
                    not any(a.depends(uvar) for a in others):
                continue
            regs = max(1, -(-V // lanes))
            U = _u_tile(f.extent(u), min(MAX_U, cpu.accumulators // regs))
            score = _score(V, lanes, U, pack, params, f, var, n_store)
            # ties: u indexing a more inner output dimension (an image row's pixels rather
            # than its rows) -- neighbouring reads of the u operand
            score *= 1 + 1e-3 * (f.store.plain_dim(uvar) or 0)
            plan = TilePlan(v, V, u, U, pack)
            w = _w_var(f, v, u, v_loads, others)
            if w is not None and regs == 1:
                W, U2 = _w_tile(f.extent(w), f.extent(u), cpu)
                if W > 1:
                    plan = TilePlan(v, V, u, U2, pack, w=w, W=W)
                    score *= 1.05
            if best is None or score > best[0]:
                best = (score, plan)
    return best[1] if best is not None else None


def _w_var(f: BlockFacts, v: int, u: int, v_loads: list[Access], others: list[Access]
           ) -> int | None:
    """A spatial variable that every load of the v operand depends on, no load of the u
    operand does, and the output indexes on its own (a blocked convolution's output-channel
    block ``[N][O/B][H][W][B]``): a third register-tile dimension. None when there is none."""
    for i in f.spatial:
        if i in (v, u):
            continue
        var = f.iters[i]
        ext = f.extent(i)
        if ext is None or ext < 2 or f.store.plain_dim(var) is None:
            continue
        if all(a.plain_dim(var) is not None for a in v_loads) and \
                not any(a.depends(var) for a in others):
            return i
    return None


def _w_tile(w_extent: int, u_extent: int | None, cpu: CPUInfo) -> tuple[int, int]:
    """``(W, U)`` (:func:`~.tiling.block_tile`) within the register budget
    (:func:`~.tiling.blocked_accumulator_budget`: 24 accumulators of 32 registers on AVX-512
    -- MLAS's 4 x 6 --, 8 of 16 on AVX2)."""
    return block_tile(w_extent, u_extent, blocked_accumulator_budget(cpu), MAX_U)


def _score(V: int, lanes: int, U: int, pack: list[Access], params: frozenset[int],
           f: BlockFacts, var, n_store: int) -> float:  # noqa: ANN001
    regs = -(-V // lanes)
    fill = V / (regs * lanes)               # lanes doing useful work
    reuse = min(U, MAX_U) / MAX_U           # FMAs per loaded vector, relative
    width = min(regs, 2) / 2                # two registers per row hide FMA latency better
    score = fill * (0.5 + 0.5 * reuse) * (0.75 + 0.25 * width)
    for a in pack:
        score *= 0.9 if id(a.buffer) in params else 0.8
    if f.store.plain_dim(var) == n_store - 1:
        score *= 1.01                       # ties: the output's contiguous dimension
    else:
        # The tile is written back transposed (element by element): about one store per
        # output against reduction-length/lanes vector FMAs -- it matters for short
        # reductions (a 1x1 convolution over few channels).
        k = 1
        for i in f.reduction:
            k *= f.extent(i) or 1 << 10
        score /= 1 + 0.5 * lanes / k
    return score


class Matmul(AnchorRule):
    """Outer-product reductions (matmul, batch matmul, dense, conv2d) with their epilogues:
    see the module docstring."""

    name = "Matmul"

    def padding_policy(self, cpu: CPUInfo) -> bool | str:
        """With AVX-512's 32 registers a blocked convolution with a strided window reads its
        input's padding in the tile (no padded copy written and read back by a pass of its
        own): ResNet's 3x3 stride-2 convolutions ran 5-16% faster (Sapphire Rapids,
        2026-12-07; ResNet-50's 128 x 56^2 one 808 -> 677 us, onnxruntime's 836). A stride-1
        window stays padded: 64 x 56^2 ran 2.9x slower with the guards in its tile, larger
        ones level. With AVX2's 16 (Haswell code on the same host) the stride-2 ones ran
        0.90-1.26x the time, so there the copy stays."""
        return "strided" if cpu.accumulators >= 16 else False

    def plan(self, sch: Schedule, anchor: BlockFacts, cpu: CPUInfo) -> TilePlan | None:
        return plan_outer_product(anchor, cpu, frozenset(param_buffers(sch)),
                                  frozenset(constant_param_buffers(sch)))
