"""RewriteLayout: TVM's layout-rewrite postproc (reference meta_schedule.md section 5 item 4),
present in the llvm list at TVM's position but **currently a no-op**.

What TVM does: for every layout-free buffer (PrimFunc attr ``layout_free_buffers``, block
annotation ``layout_free_placeholders``), find the block reading it, derive from the tiled
loop nest an IndexMap that orders the buffer like the tiled accesses (SuggestIndexMap), insert
``cache_read(block, i, "global")`` annotated ``meta_schedule.layout_rewrite_preproc`` and
``transform_layout`` the read buffer, so weights are pre-packed; the builder then strips the
preproc block so the measured kernel reads the packed layout.

Why a no-op here: Workbench's builder has no RemoveWeightLayoutRewriteBlock step and the relax
side has no pass to pre-pack constants, so a rewritten kernel would be measured *with* the
packing copy (slower, misleading) or would need callers to pass packed weights. For
functions without layout-free buffers (every plain ``tune_tir`` workload) TVM's postproc
does nothing either, so results there are identical. ``apply`` always returns True and
records nothing in the trace.
"""
from __future__ import annotations

from workbench.meta_schedule.postproc.postproc import Postproc, register_postproc
from workbench.tir.schedule import Schedule


@register_postproc("rewrite-layout")
class RewriteLayout(Postproc):
    def apply(self, sch: Schedule) -> bool:
        return True
