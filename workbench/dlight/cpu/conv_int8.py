"""``Conv2dInt8``: the default schedule of the blocked uint8 x int8 convolution
(:mod:`workbench.topi.nn.conv2d_nchwc_int8`) and its fused epilogue.

The register tile is W output-channel blocks x U pixels of a row, each accumulator one vector
of 16 int32 output channels; for every (input-channel block, ky, kx, group of 4 channels) the
tile does W x U dot products of four input bytes (broadcast) with a 64-byte weight tile:
``dot_16x4_vnni`` (one ``vpdpbusd``) on AVX-512 VNNI targets, its exact plain-vector
equivalent (``dot_16x4_u8i8i32_generic``) elsewhere. The epilogue (the int32 -> float32
rescaling and whatever the graph fused after it) runs on the tile while it is in registers.
"""
from __future__ import annotations

from workbench.dlight.analysis import BlockFacts
from workbench.dlight.base import CPUInfo
from workbench.dlight.cpu.anchor import AnchorRule
from workbench.dlight.cpu.matmul import MAX_U
from workbench.dlight.cpu.tiling import TilePlan, block_tile
from workbench.tir.schedule import Schedule
from workbench.tir.tensor_intrin.x86 import GENERIC_DOT_16x4_INTRIN, VNNI_DOT_16x4_INTRIN

__all__ = ["Conv2dInt8"]

#: The compute's block name (its ``te.compute`` name).
BLOCK_NAME = "conv2d_NCHWc_int8"


def plan_conv2d_int8(f: BlockFacts, cpu: CPUInfo) -> TilePlan | None:
    """The tile of a ``conv2d_NCHWc_int8`` block: its iteration variables are (n, o, y, x, ob;
    rc, ry, rx, rf, rs) in that order (the compute's)."""
    if f.name != BLOCK_NAME or len(f.iters) != 10 or f.extent(4) != 16 or f.extent(9) != 4:
        return None
    o, x, ob, rs = 1, 3, 4, 9
    W, U = _tile(f.extent(o), f.extent(x), cpu)
    intrin = VNNI_DOT_16x4_INTRIN if cpu.vnni else GENERIC_DOT_16x4_INTRIN
    return TilePlan(ob, 16, x, U, w=o if W > 1 else None, W=W, inner=rs, intrin=intrin)


def _tile(o_extent: int | None, x_extent: int | None, cpu: CPUInfo) -> tuple[int, int]:
    """``(W, U)`` (:func:`~.tiling.block_tile`): whole tiles only (the intrinsic has no
    predicated tail), within 24 accumulators of 32 registers with AVX-512, 12 of 16
    otherwise (budgets of 4-12 ran int8 ResNet-18 alike with Haswell code on a Zen 4)."""
    return block_tile(o_extent, x_extent, 24 if cpu.vector_bits >= 512 else 12, MAX_U,
                      whole=True)


class Conv2dInt8(AnchorRule):
    """The blocked int8 convolution (see the module docstring)."""

    name = "Conv2dInt8"

    def plan(self, sch: Schedule, anchor: BlockFacts, cpu: CPUInfo) -> TilePlan | None:
        return plan_conv2d_int8(anchor, cpu)
