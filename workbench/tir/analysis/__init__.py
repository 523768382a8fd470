"""TIR's analysis floor: the one home of block / buffer / region / interval facts.

te, dlight, meta_schedule (rules, postprocessors, the feature extractor) and tir's own schedule
primitives ask these questions; each answer is computed here once, by a public function:

- :mod:`.blocks`: walking statements (:func:`child_stmts`, :func:`blocks_under`,
  :func:`realizes_under`).
- :mod:`.exprs`: the variables an expression uses (:func:`collect_vars`,
  :func:`vars_in_order`), constants (:func:`const_int`, :func:`const_extent` of a loop).
- :mod:`.regions`: a block's ``reads`` / ``writes`` (:func:`block_regions`) and the symbolic
  bounds of an index over the block variables (:func:`index_bounds`).
- :mod:`.intervals`: exact integer bounds (:func:`const_interval`), and which of TIR's interval
  evaluators answers which question.
- :mod:`.verify`: :func:`verify_prim_func`, the well-formedness check run before codegen.
"""
from workbench.tir.analysis.blocks import blocks_under, child_stmts, realizes_under
from workbench.tir.analysis.exprs import collect_vars, const_extent, const_int, vars_in_order
from workbench.tir.analysis.intervals import Interval, const_interval
from workbench.tir.analysis.regions import Bounds, block_regions, index_bounds
from workbench.tir.analysis.verify import IRVerifyError, verify_prim_func

__all__ = [
    "child_stmts", "blocks_under", "realizes_under",
    "collect_vars", "vars_in_order", "const_int", "const_extent", "Interval", "const_interval",
    "Bounds", "block_regions", "index_bounds", "IRVerifyError", "verify_prim_func",
]
