"""RewriteReductionBlock: split every reduction block's init out with ``decompose_reduction``
at its first non-data-parallel loop (reference meta_schedule.md section 5 item 3)."""
from __future__ import annotations

from workbench.meta_schedule.postproc.postproc import Postproc, register_postproc
from workbench.tir.schedule import Schedule
from workbench.meta_schedule import analysis as A
from workbench.meta_schedule.schedule_rule.multi_level_tiling_with_intrin import AUTO_TENSORIZE
from workbench.tir.stmt import IterType


@register_postproc("rewrite-reduction-block")
class RewriteReductionBlock(Postproc):
    def apply(self, sch: Schedule) -> bool:
        while True:
            target = self._next(sch)
            if target is None:
                return True
            name, depth = target
            block = sch.get_sblock(name)
            loops = sch.get_loops(block)
            sch.decompose_reduction(block, loops[depth])

    @staticmethod
    def _next(sch: Schedule) -> tuple[str, int] | None:
        """The first block with an init and the depth of its first reduction-ish loop."""
        for name in sch.func_index().block_order:
            info = sch.func_index().blocks[name]
            if info.block.init is None or AUTO_TENSORIZE in info.block.annotations:
                # A block to be tensorized keeps its init: the intrinsic describes the
                # update, and lowering runs the init before the first update.
                continue
            if not A.has_reduction(info.block):
                # An init block whose reduction iterators were all unit and dropped (e.g. the
                # rfactor block of a split with a unit piece): one update per init, nothing to
                # decompose, and decompose_reduction would refuse; lowering handles the init.
                continue
            for depth, itype in enumerate(A.loop_iter_types(info.loops)):
                if itype != IterType.DATA_PAR:
                    return name, depth
        return None
