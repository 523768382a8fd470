"""Postprocessors (TVM's ``meta_schedule.postproc``). See :mod:`.postproc`."""
from workbench.meta_schedule.postproc.disallow_dynamic_loop import DisallowDynamicLoop
from workbench.meta_schedule.postproc.postproc import Postproc, PyPostproc, register_postproc
from workbench.meta_schedule.postproc.rewrite_parallel_vectorize_unroll import (
    RewriteParallelVectorizeUnroll,
)
from workbench.meta_schedule.postproc.rewrite_layout import RewriteLayout
from workbench.meta_schedule.postproc.rewrite_reduction_block import RewriteReductionBlock
from workbench.meta_schedule.postproc.rewrite_tensorize import RewriteTensorize
from workbench.meta_schedule.postproc.verify_cpu_code import VerifyCPUCode

__all__ = ["Postproc", "PyPostproc", "register_postproc", "DisallowDynamicLoop",
           "RewriteParallelVectorizeUnroll", "RewriteReductionBlock", "RewriteLayout",
           "VerifyCPUCode", "RewriteTensorize"]
