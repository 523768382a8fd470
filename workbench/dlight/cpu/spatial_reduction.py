"""``SpatialReduction``: reductions vectorized along an output dimension -- pooling,
depthwise and grouped conv2d, reductions over leading axes (``sum(x, axis=0)``), with their
fused elementwise epilogues.

The structural test, on the single reduction block left after inlining: the output's last
index is a spatial variable ``v``, and every load that depends on ``v`` does so in its last
index with a small constant stride (1, or a pooling / strided-conv stride). Then ``V``
consecutive outputs are one vector of accumulators: each step of the reduction loads (or, for
a stride, gathers) one vector and the accumulators stay in registers. There is no operand to
reuse across a second dimension (that would be :class:`~workbench.dlight.cpu.Matmul`), so the
tile is up to four registers wide to hide the latency of the accumulating adds.

A padding stage in front whose guard is the same for every lane of the vector (a blocked
layout: NCHW16c, NCHW8c) is inlined: the tile reads the input itself, one scalar guard per
tap (``AnchorRule.inline_padding``; on AVX2 for strided windows only). Otherwise (NCHW) it is
computed per (batch, channel) plane inside the parallel loop (``AnchorRule.pad_per_plane``):
the padded plane is written and read while it is in cache, not in a pass of its own over the
whole input (MobileNetV2's depthwise kernels 1.3-2.2x faster on a 2-core Zen 4; the model
10.7 -> 8.4 ms). On a blocked layout the threads split the output rows (``tiling._rows_first``;
pooling too, ``tiling._pool_rows_first``), padding a band of rows of one channel block at a
time where the padding is not inlined.
"""
from __future__ import annotations

from workbench.dlight.analysis import BlockFacts
from workbench.dlight.base import CPUInfo
from workbench.dlight.cpu.anchor import AnchorRule
from workbench.dlight.cpu.matmul import MAX_U, _u_tile
from workbench.dlight.cpu.tiling import TilePlan, pick_vector_tile
from workbench.tir.schedule import Schedule

__all__ = ["SpatialReduction", "plan_spatial_reduction"]

MAX_STRIDE = 4


def plan_spatial_reduction(f: BlockFacts, cpu: CPUInfo) -> TilePlan | None:
    if not f.reduction or not f.store.indices:
        return None
    last = f.store.indices[-1]
    v = next((i for i in f.spatial if f.iters[i] is last), None)
    if v is None or (f.extent(v) is not None and f.extent(v) < 2):
        return None
    var = f.iters[v]
    for a in f.loads_depending(var):
        stride = a.stride_in_last(var)
        if stride is None or not 1 <= stride <= MAX_STRIDE:
            return None
    lanes = cpu.lanes(f.store.buffer.dtype)
    V = pick_vector_tile(f.extent(v), lanes, 4)
    coef = _selected_coefficient(f, v)
    if coef is not None:
        return TilePlan(v, V, coef, f.extent(coef), unroll_reduction=True)
    if V > lanes:
        return TilePlan(v, V)
    # One register of outputs (a blocked layout's channel block): U neighbouring outputs of
    # the next-inner output dimension (a row's pixels) join the tile, so U independent chains
    # of adds hide their latency and each weight vector is loaded once for U of them.
    inner = sorted((i for i in f.spatial if i != v and f.store.plain_dim(f.iters[i]) is not None
                    and (f.extent(i) or 0) >= 2),
                   key=lambda i: f.store.plain_dim(f.iters[i]))
    if not inner:
        return TilePlan(v, V)
    u = inner[-1]
    return TilePlan(v, V, u, _u_tile(f.extent(u), min(MAX_U, cpu.accumulators)))


MAX_UNROLLED = 8


def _selected_coefficient(f: BlockFacts, v: int) -> int | None:
    """A small spatial variable that, with the (small) reduction variables, selects a constant
    coefficient in the block's body (``select(i == 2 and r == 3, -4.0, ...)``: a transform by a
    constant matrix, such as Winograd's): unrolling both makes every coefficient a constant.
    Its index, or None."""
    from workbench.tir.analysis import collect_vars
    from workbench.tir.expr import Select
    from workbench.tir.functor import post_order_visit
    if any((f.extent(i) or MAX_UNROLLED + 1) > MAX_UNROLLED for i in f.reduction):
        return None
    conds: set = set()

    def visit(node: object) -> None:
        if isinstance(node, Select):
            conds.update(id(x) for x in collect_vars(node.condition))
    post_order_visit(f.block.body, visit)
    if not any(id(f.iters[i]) in conds for i in f.reduction):
        return None
    for i in f.spatial:
        if i != v and id(f.iters[i]) in conds and 2 <= (f.extent(i) or 0) <= MAX_UNROLLED:
            return i
    return None


class SpatialReduction(AnchorRule):
    """Reductions vectorized along the output's contiguous dimension (see the module
    docstring)."""

    name = "SpatialReduction"
    pad_per_plane = True
    inline_padding = True

    def plan(self, sch: Schedule, anchor: BlockFacts, cpu: CPUInfo) -> TilePlan | None:
        return plan_spatial_reduction(anchor, cpu)
