"""TIR transformations and the lowering pipeline (see :mod:`.pipeline`)."""
from workbench.tir.transform.flatten_buffer import flatten_buffer
from workbench.tir.transform.legalize_bf16 import legalize_bf16
from workbench.tir.transform.lower_blocks import lower_init_block, lower_opaque_block
from workbench.tir.transform.lower_match_buffer import lower_match_buffer
from workbench.tir.transform.pipeline import (
    LOWERING_PIPELINE, Pass, PassRecord, lower, lower_with_log,
)
from workbench.tir.transform.simplify import simplify_func
from workbench.tir.transform.unroll_loop import unroll_loop
from workbench.tir.transform.vectorize_loop import vectorize_loop
from workbench.tir.transform.remove_weight_layout_rewrite_block import (
    RemoveWeightLayoutRewriteBlock, remove_weight_layout_rewrite_block,
)
from workbench.tir.transform.prim_func_pass import PrimFuncPass, prim_func_pass
