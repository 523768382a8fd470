"""Default-schedule rules for CPUs (the ``llvm`` target), tried in this order by
:func:`default_rules`: :class:`Attention` (the fused streaming attention), :class:`Conv2dInt8`
(the blocked int8 convolution), :class:`Winograd` (a Winograd convolution with an L2-sized
weight, tile group by tile group), :class:`Matmul`, :class:`SpatialReduction`,
:class:`RowReduction`, :class:`Injective`, :class:`Chain` (multi-stage kernels, stage by
stage), then :class:`Fallback`, which only parallelizes and vectorizes."""
from __future__ import annotations

from workbench.dlight.cpu.attention import Attention
from workbench.dlight.cpu.chain import Chain
from workbench.dlight.cpu.conv_int8 import Conv2dInt8
from workbench.dlight.cpu.fallback import Fallback
from workbench.dlight.cpu.injective import Injective
from workbench.dlight.cpu.matmul import Matmul
from workbench.dlight.cpu.row_reduction import RowReduction
from workbench.dlight.cpu.spatial_reduction import SpatialReduction
from workbench.dlight.cpu.winograd import Winograd

__all__ = ["Attention", "Conv2dInt8", "Winograd", "Matmul", "SpatialReduction", "RowReduction",
           "Injective", "Chain", "Fallback", "default_rules"]


def default_rules() -> list:
    """The CPU rules in the order they are tried (a new list each call)."""
    return [Attention(), Conv2dInt8(), Winograd(), Matmul(), SpatialReduction(), RowReduction(),
            Injective(), Chain(), Fallback()]
