"""Block ``reads`` / ``writes`` regions: moved to :mod:`workbench.tir.analysis.regions`.

te builds on tir, and the schedule primitives (compute_inline) need the same regions, so the
computation lives on tir's analysis floor; this module keeps the old import path working.
"""
from workbench.tir.analysis.regions import Bounds, block_regions, bound, index_bounds

__all__ = ["Bounds", "block_regions", "bound", "index_bounds"]
