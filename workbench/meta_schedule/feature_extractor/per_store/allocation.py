"""Group 4 (4 features): where and how big the stored buffer is allocated (TVM's group 4).

Recorded at each allocation site (an ``Allocate``/``DeclBuffer`` of the lowered IR, after
allocations moved to the innermost loop holding their uses and shrank to the region used) and
for every function parameter (as allocated outside all loops):

``[slog(alloc bytes), slog(numel x loop product at the site), slog(loop product at the
site), slog(store's loop product / loop product at the site)]``.

A stored buffer with no known allocation gets ``alloc_size = alloc_prod = 0`` and
``alloc_outer_prod = 1``.
"""
from __future__ import annotations

from dataclasses import dataclass

from workbench.tir.buffer import Buffer

from workbench.meta_schedule.feature_extractor.per_store.buffer_access import AccessCache
from workbench.meta_schedule.feature_extractor.per_store.loop_context import (
    LoopNest, slog, storage_bytes,
)

ALLOCATION_NAMES = ("alloc_size", "alloc_prod", "alloc_outer_prod", "alloc_inner_prod")


@dataclass(frozen=True, slots=True)
class Allocation:
    alloc_size: int = 0        # bytes
    alloc_prod: int = 0        # numel x alloc_outer_prod
    alloc_outer_prod: int = 1  # product of the loops around the allocation


def allocation_at(buffer: Buffer, nest: LoopNest, cache: AccessCache) -> Allocation:
    """The allocation of ``buffer`` inside the loops of ``nest``."""
    numel = 1
    for s in cache.shape(buffer):
        numel *= s
    return Allocation(numel * storage_bytes(buffer.dtype), numel * nest.prod, nest.prod)


def group4_features(alloc: Allocation | None, store_outer_prod: int) -> list[float]:
    a = alloc or Allocation()
    return [slog(a.alloc_size), slog(a.alloc_prod), slog(a.alloc_outer_prod),
            slog(store_outer_prod / a.alloc_outer_prod)]


__all__ = ["ALLOCATION_NAMES", "Allocation", "allocation_at", "group4_features"]
