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
"""
from __future__ import annotations

from workbench.dlight.analysis import BlockFacts
from workbench.dlight.base import CPUInfo
from workbench.dlight.cpu.anchor import AnchorRule
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
    return TilePlan(v, pick_vector_tile(f.extent(v), lanes, 4))


class SpatialReduction(AnchorRule):
    """Reductions vectorized along the output's contiguous dimension (see the module
    docstring)."""

    name = "SpatialReduction"

    def plan(self, sch: Schedule, anchor: BlockFacts, cpu: CPUInfo) -> TilePlan | None:
        return plan_spatial_reduction(anchor, cpu)
