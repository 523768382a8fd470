"""MultiLevelTiling: tile a matmul/conv-like block with structure "SSRSRS" and optionally
stage its output through a write cache (reference meta_schedule.md section 4.3 item 5).

Steps on CPU: annotate ``meta_schedule.tiling_structure``; every spatial loop gets
``sample_perfect_tile(n=4)`` + ``split`` (pieces at levels 0, 1, 3, 5), every reduction loop
``sample_perfect_tile(n=2)`` + ``split`` (levels 2, 4); ``reorder`` level by level. Then write
reuse (req "may", levels [1, 2]), in TVM's order:

- the block's single consumer is already write-cache-like (an elementwise epilogue): one
  state per level with ``c = get_consumers(block)[0]; reverse_compute_at(c, ...)``, then the
  state left alone;
- otherwise: the state without a cache, then one state per level with
  ``cache_write(block, 0, scope)`` + ``reverse_compute_at`` of the cache (req "must" drops
  the no-cache state, "no" adds nothing).

``reuse_read`` (CacheRead + compute_at of operands) is GPU-only in TVM's defaults and not
implemented; ``tile_binds`` / ``vector_load_lens`` are accepted and ignored on CPU.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from workbench.meta_schedule import analysis as A
from workbench.meta_schedule.schedule_rule.schedule_rule import (
    ScheduleRule, register_schedule_rule,
)
from workbench.tir.schedule import BlockRV, LoopRV, Schedule, ScheduleError
from workbench.tir.stmt import IterType


@dataclass
class ReuseType:
    """TVM's ``ReuseType``: ``req`` is "no", "may" or "must"; ``levels`` are 1-based tile
    levels; ``scope`` the cache's storage scope."""

    req: str
    levels: list[int] = field(default_factory=list)
    scope: str = "global"

    def __post_init__(self) -> None:
        if self.req not in ("no", "may", "must"):
            raise ValueError(f"ReuseType: req must be 'no', 'may' or 'must', got {self.req!r}")
        self.levels = [int(x) for x in self.levels]

    def as_dict(self) -> dict[str, Any]:
        return {"req": self.req, "levels": list(self.levels), "scope": self.scope}


def _reuse_dict(x: ReuseType | Mapping[str, Any] | None) -> dict[str, Any] | None:
    if x is None:
        return None
    if isinstance(x, ReuseType):
        return x.as_dict()
    return ReuseType(**dict(x)).as_dict()


@register_schedule_rule("multi-level-tiling")
class MultiLevelTiling(ScheduleRule):
    def __init__(self, structure: str = "SSRSRS", tile_binds: Any = None,
                 max_innermost_factor: int = 64, vector_load_lens: Any = None,
                 reuse_read: ReuseType | Mapping[str, Any] | None = None,
                 reuse_write: ReuseType | Mapping[str, Any] | None = None) -> None:
        if set(structure) - {"S", "R"}:
            raise ValueError(f"MultiLevelTiling: structure must use only 'S' and 'R', got "
                             f"{structure!r}")
        self.structure = structure
        self.tile_binds = tile_binds  # GPU only; ignored on CPU
        self.max_innermost_factor = max_innermost_factor
        self.vector_load_lens = vector_load_lens
        # Stored as TVM's Python class does: plain dicts (``ReuseType.as_dict()``).
        self.reuse_read = _reuse_dict(reuse_read)
        self.reuse_write = _reuse_dict(reuse_write)

    def apply(self, sch: Schedule, block: BlockRV) -> list[Schedule]:
        info = A.block_info(sch, block)
        if not A.needs_multi_level_tiling(info, sch.func_index()):
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
        """TVM's AddWriteReuse (see the module docstring for the order of the states)."""
        if not self.reuse_write or self.reuse_write["req"] == "no":
            return [sch]
        levels = self.reuse_write["levels"]
        scope = self.reuse_write["scope"]
        out: list[Schedule] = []
        if self.reuse_write["req"] == "may":
            cons = A.consumers(sch, A.block_name(sch, block))
            if len(cons) == 1 and self._write_cache_like(sch, cons[0]):
                # An elementwise epilogue already is a write cache: move it into the tiles.
                for level in levels:
                    new = sch.copy()
                    try:
                        consumer = new.get_consumers(block)[0]
                        new.reverse_compute_at(consumer, tiles[level - 1][-1],
                                               preserve_unit_loops=True)
                    except (ScheduleError, IndexError):
                        continue
                    out.append(new)
                out.append(sch)
                return out
            out.append(sch.copy())  # the no-cache design
        try:
            cache = sch.cache_write(block, 0, scope)
        except ScheduleError:
            return out or [sch]
        for level in levels:
            new = sch.copy()
            try:
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
