"""Read-only analyses over scheduled PrimFuncs (TVM's ``src/tir/schedule/analysis``)."""
from workbench.tir.schedule.analysis.layout import (
    SplitTerm, split_terms, suggest_index_map, suggest_read_layout,
)

__all__ = ["SplitTerm", "split_terms", "suggest_index_map", "suggest_read_layout"]
