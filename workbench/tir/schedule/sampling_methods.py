"""Schedule methods that sample: perfect tiles and categorical choices."""
from __future__ import annotations

from typing import Sequence

from workbench.tir.schedule.core import ScheduleCore, traced
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.handles import LoopRV
from workbench.tir.schedule.primitive import sampling as P
from workbench.tir.analysis import const_extent


class SamplingMethods(ScheduleCore):
    @traced("SamplePerfectTile", sampling=True)
    def sample_perfect_tile(self, loop: LoopRV, n: int, max_innermost_factor: int = 16,
                            decision: Sequence[int] | None = None):
        """``n`` ExprRVs whose product is the loop's extent (innermost <= the max factor)."""
        var = self._loop_var(loop, "sample_perfect_tile")
        if n < 1:
            raise ScheduleError("sample_perfect_tile", f"loop {var.name!r}", f"n must be >= 1, "
                                f"got {n}")
        extent = const_extent(self._index().loops[var].loop)
        try:
            tiles = P.sample_perfect_tile(self._rand, extent, n, max_innermost_factor, decision)
        except ValueError as e:
            raise ScheduleError("sample_perfect_tile", f"loop {var.name!r}", str(e)) from None
        return [self._new_expr_rv(t) for t in tiles], tiles

    @traced("SampleCategorical", sampling=True)
    def sample_categorical(self, candidates: Sequence[int], probs: Sequence[float],
                           decision: int | None = None):
        """One of ``candidates`` drawn with ``probs``; the decision is its index."""
        try:
            idx = P.sample_categorical(self._rand, candidates, probs, decision)
        except ValueError as e:
            raise ScheduleError("sample_categorical", "candidates", str(e)) from None
        return self._new_expr_rv(candidates[idx]), idx


__all__ = ["SamplingMethods"]
