"""MultiLevelTiling: tile a matmul/conv-like block with structure "SSRSRS" and optionally
stage its output through a write cache (reference meta_schedule.md section 4.3 item 5).

Steps on CPU: annotate ``meta_schedule.tiling_structure``; every spatial loop gets
``sample_perfect_tile(n=4)`` + ``split`` (pieces at levels 0, 1, 3, 5), every reduction loop
``sample_perfect_tile(n=2)`` + ``split`` (levels 2, 4); ``reorder`` level by level. Then write
reuse (req "may", levels [1, 2]): either the single elementwise consumer is moved under the
tile levels, or a ``cache_write(..., "global")`` block is; plus the untouched state.
Part 1 keeps TVM's structure; part 2 adds read reuse/intrinsics variants.
"""
from __future__ import annotations

from typing import Any, Mapping

from workbench.meta_schedule import analysis as A
from workbench.meta_schedule.schedule_rule.schedule_rule import (
    ScheduleRule, register_schedule_rule,
)
from workbench.tir.schedule import BlockRV, LoopRV, Schedule, ScheduleError
from workbench.tir.stmt import IterType


@register_schedule_rule("multi-level-tiling")
class MultiLevelTiling(ScheduleRule):
    def __init__(self, structure: str = "SSRSRS", tile_binds: Any = None,
                 max_innermost_factor: int = 64, vector_load_lens: Any = None,
                 reuse_read: Mapping[str, Any] | None = None,
                 reuse_write: Mapping[str, Any] | None = None) -> None:
        if set(structure) - {"S", "R"}:
            raise ValueError(f"MultiLevelTiling: structure must use only 'S' and 'R', got "
                             f"{structure!r}")
        self.structure = structure
        self.tile_binds = tile_binds  # GPU only; ignored on CPU
        self.max_innermost_factor = max_innermost_factor
        self.vector_load_lens = vector_load_lens
        self.reuse_read = dict(reuse_read) if reuse_read else None
        self.reuse_write = dict(reuse_write) if reuse_write else None

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        info = A.block_info(sch, block)
        if not A.needs_multi_level_tiling(info, sch._index()):
            return [sch]
        sch.annotate(block, A.TILING_ANN, self.structure)
        tiles = self._tile_loop_nest(sch, block)
        if tiles is None:
            return [sch]
        return self._add_write_reuse(sch, block, tiles)

    # -- tiling --------------------------------------------------------------------------------
    def _tile_loop_nest(self, sch: Schedule, block: BlockRV) -> list[list[LoopRV]] | None:
        info = A.block_info(sch, block)
        iter_types = [iv.iter_type for iv in info.block.iter_vars]
        s_levels = [i for i, c in enumerate(self.structure) if c == "S"]
        r_levels = [i for i, c in enumerate(self.structure) if c == "R"]
        levels: list[list[LoopRV]] = [[] for _ in self.structure]
        for loop, itype in zip(sch.get_loops(block), iter_types):
            if itype == IterType.DATA_PAR:
                slots = s_levels
            elif itype == IterType.COMM_REDUCE:
                slots = r_levels
            else:
                continue
            factors = sch.sample_perfect_tile(loop, n=len(slots),
                                              max_innermost_factor=self.max_innermost_factor)
            pieces = sch.split(loop, factors=factors)
            for lvl, piece in zip(slots, pieces):
                levels[lvl].append(piece)
        sch.reorder(*[lp for lvl in levels for lp in lvl])
        return levels

    # -- write reuse ---------------------------------------------------------------------------
    def _add_write_reuse(self, sch: Schedule, block: BlockRV,
                         tiles: list[list[LoopRV]]) -> list[Schedule]:
        if not self.reuse_write:
            return [sch]
        levels = [int(x) for x in self.reuse_write.get("levels", [1, 2])]
        scope = self.reuse_write.get("scope", "global")
        name = A.block_name(sch, block)
        cons = A.consumers(sch, name)
        out = [sch]
        if len(cons) == 1 and self._write_cache_like(sch, cons[0]):
            # An elementwise epilogue is already a write cache: move it into the tiles.
            for level in levels:
                new = sch.copy()
                try:
                    consumer = new.get_sblock(cons[0])
                    new.reverse_compute_at(consumer, tiles[level - 1][-1],
                                           preserve_unit_loops=True)
                except (ScheduleError, IndexError):
                    continue
                out.append(new)
            return out
        for level in levels:
            new = sch.copy()
            try:
                cache = new.cache_write(block, 0, scope)
                new.reverse_compute_at(cache, tiles[level - 1][-1], preserve_unit_loops=True)
            except (ScheduleError, IndexError):
                continue
            out.append(new)
        return out

    @staticmethod
    def _write_cache_like(sch: Schedule, name: str) -> bool:
        info = A.block_info(sch, name)
        return (len(info.block.writes) == 1 and A.is_spatial(info.block)
                and A.is_injective_ordered(info.block))
