"""Read-only analyses over scheduled PrimFuncs (TVM's ``src/tir/schedule/analysis``)."""
from workbench.tir.schedule.analysis.layout import (
    SplitTerm, split_terms, suggest_index_map, suggest_read_layout,
)
from workbench.tir.schedule.analysis.tensorize_mapping import (
    TensorizeLoopMapping, desc_inner_block, tensorize_loop_mapping,
)

__all__ = ["SplitTerm", "split_terms", "suggest_index_map", "suggest_read_layout",
           "TensorizeLoopMapping", "desc_inner_block", "tensorize_loop_mapping"]
