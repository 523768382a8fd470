"""The walk that turns lowered TIR into per-store feature rows (TVM's PerStoreFeatureCollector).

Contract: every ``BufferStore`` whose value is not a literal constant (so reduction inits are
skipped) produces the features of groups 1, 2, 3 and 5 keyed by the **stored buffer**: a later
store to the same buffer replaces the earlier one, and rows come out in the order buffers were
first stored to. This is TVM's behaviour (its rows are per stored buffer, not per statement).
Group 4 is recorded at allocation sites and for function parameters, then joined by buffer.
Walk-wide tables (bytes touched under each loop) are shared by all stores, which is how serial
reuse between consecutive statements is seen.
"""
from __future__ import annotations

from dataclasses import dataclass

from workbench.ir.module import IRModule
from workbench.tir import expr as E
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRVisitor
from workbench.tir.stmt import Allocate, Block, BufferStore, DeclBuffer, For

from workbench.meta_schedule.feature_extractor.per_store.allocation import (
    Allocation, allocation_at, group4_features,
)
from workbench.meta_schedule.feature_extractor.per_store.arith_features import (
    count_arith, float_op_count, group1_features,
)
from workbench.meta_schedule.feature_extractor.per_store.arith_intensity import (
    arith_intensity_curve,
)
from workbench.meta_schedule.feature_extractor.per_store.buffer_access import (
    AccessCache, TouchedTable, buffer_access_features, group2_features,
)
from workbench.meta_schedule.feature_extractor.per_store.loop_context import LoopNest
from workbench.meta_schedule.feature_extractor.per_store.outer_product import group5_features


@dataclass(frozen=True)
class FeatureConfig:
    """TVM's PerStoreFeature knobs (plus ``is_gpu``, which TVM takes from the target)."""

    buffers_per_store: int = 5
    arith_intensity_curve_num_samples: int = 10
    cache_line_bytes: int = 64
    is_gpu: bool = False

    @property
    def length(self) -> int:
        """Columns of groups 1-5: 57 + 18 x buffers + samples + 4 + 3 (164 by default)."""
        return 57 + 18 * self.buffers_per_store + self.arith_intensity_curve_num_samples + 7


@dataclass
class _Row:
    order: int
    front: list[float]       # groups 1, 2, 3
    outer_prod: int          # group 5's loop product, which group 4's last column divides
    group5: list[float]
    buffers: tuple[str, ...]  # stored buffer, then the buffers of columns B0.. (debugging)


@dataclass(frozen=True)
class RowInfo:
    """What one feature row describes: the stored buffer and, in column order, the buffers
    whose access features fill ``B0.*``, ``B1.*``, ..."""

    stored: str
    accessed: tuple[str, ...]


class _Collector(IRVisitor):
    def __init__(self, config: FeatureConfig) -> None:
        self.config = config
        self.nest = LoopNest()
        self.cache = AccessCache()
        self.touched: TouchedTable = {}
        self.rows: dict[E.Var, _Row] = {}
        self.allocs: dict[E.Var, Allocation] = {}

    # Expressions hold no stores; skipping them keeps the walk to statements.
    def visit_PrimExpr(self, e: E.PrimExpr) -> None:
        pass

    def visit_For(self, loop: For) -> None:
        self.nest.push(loop)
        self.visit(loop.body)
        self.nest.pop()

    def visit_Allocate(self, alloc: Allocate) -> None:
        self.visit(alloc.body)
        decl = alloc.body
        if isinstance(decl, DeclBuffer) and decl.buffer.data is alloc.buffer_var:
            self.allocs[alloc.buffer_var] = allocation_at(decl.buffer, self.nest, self.cache)

    def visit_Block(self, block: Block) -> None:
        # Only reached for IR that skipped lowering: allocate where the block sits.
        self.generic_visit(block)
        for buf in block.alloc_buffers:
            self.allocs[buf.data] = allocation_at(buf, self.nest, self.cache)

    def visit_BufferStore(self, store: BufferStore) -> None:
        if isinstance(store.value, (E.IntImm, E.FloatImm)):
            return
        cfg, nest = self.config, self.nest
        counts = count_arith(store.value)
        accesses, touched_bytes = buffer_access_features(
            store, nest, self.cache, self.touched, cfg.cache_line_bytes)
        front = group1_features(counts, nest, cfg.is_gpu)
        front += group2_features(accesses, cfg.buffers_per_store)
        front += arith_intensity_curve(cfg.arith_intensity_curve_num_samples, nest,
                                       touched_bytes, float_op_count(counts))
        key = store.buffer.data
        old = self.rows.get(key)
        names = tuple(a.buffer.name for a in accesses[:cfg.buffers_per_store])
        self.rows[key] = _Row(len(self.rows) if old is None else old.order, front, nest.prod,
                              group5_features(nest), (store.buffer.name,) + names)

    def add_params(self, func: PrimFunc) -> None:
        empty = LoopNest()
        for buf in func.buffer_map.values():
            self.allocs[buf.data] = allocation_at(buf, empty, self.cache)

    def export(self) -> tuple[list[list[float]], list[RowInfo]]:
        out, info = [], []
        for key, row in sorted(self.rows.items(), key=lambda kv: kv[1].order):
            out.append(row.front + group4_features(self.allocs.get(key), row.outer_prod)
                       + row.group5)
            info.append(RowInfo(row.buffers[0], row.buffers[1:]))
        return out, info


def collect_rows(lowered: IRModule | PrimFunc, config: FeatureConfig
                 ) -> tuple[list[list[float]], list[RowInfo]]:
    """Feature rows (groups 1-5) of a module already lowered for feature extraction, and
    what each row describes."""
    funcs = [lowered] if isinstance(lowered, PrimFunc) else \
        [f for _, f in lowered.items() if isinstance(f, PrimFunc)]
    c = _Collector(config)
    for func in funcs:
        c.visit(func.body)
        c.add_params(func)
    return c.export()


__all__ = ["FeatureConfig", "RowInfo", "collect_rows"]
