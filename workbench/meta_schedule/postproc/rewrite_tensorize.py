"""RewriteTensorize: tensorize every block annotated ``meta_schedule.auto_tensorize`` (TVM's
postproc of that name; reference section 6.4).

MultiLevelTilingWithIntrin leaves the annotation on the blockized outer block; after sampling
and the other postprocs, this calls ``sch.tensorize(block, <intrin>)`` (a traced primitive, so
the candidate's trace replays it) and removes the annotation. Unlike TVM, which only logs a
failed tensorize and keeps the untensorized code, a block that no longer matches its intrinsic
rejects the candidate (``apply`` returns False): what the tuner measures is then always the
intrinsic it planned. ``vectorize_init_loop`` vectorizes the innermost loop of the init a
tensorized block carries (its reduction init, kept in the block).
"""
from __future__ import annotations

from workbench.meta_schedule.postproc.postproc import Postproc, register_postproc
from workbench.meta_schedule.schedule_rule.multi_level_tiling_with_intrin import AUTO_TENSORIZE
from workbench.tir.schedule import Schedule, ScheduleError
from workbench.tir.analysis import realizes_under

__all__ = ["RewriteTensorize"]


@register_postproc("rewrite-tensorize")
class RewriteTensorize(Postproc):
    def __init__(self, vectorize_init_loop: bool = False) -> None:
        self.vectorize_init_loop = vectorize_init_loop

    def apply(self, sch: Schedule) -> bool:
        index = sch.func_index()
        todo = [(name, info.block.annotations[AUTO_TENSORIZE])
                for name, info in index.blocks.items()
                if AUTO_TENSORIZE in info.block.annotations]
        for name, intrin in todo:
            block = sch.get_sblock(name)
            try:
                sch.unannotate(block, AUTO_TENSORIZE)
                if intrin:
                    sch.tensorize(block, str(intrin))
                    if self.vectorize_init_loop:
                        self._vectorize_init(sch, name)
            except (ScheduleError, ValueError) as err:
                self.last_refusal = f"cannot tensorize block {name!r} with {intrin}: {err}"
                return False
        return True

    @staticmethod
    def _vectorize_init(sch: Schedule, name: str) -> None:
        init = sch.func_index().blocks[name].block.init
        if init is None:
            return
        for realize in realizes_under(init):
            loops = sch.get_loops(sch.get_sblock(realize.block.name_hint))
            if loops:
                sch.vectorize(loops[-1])
