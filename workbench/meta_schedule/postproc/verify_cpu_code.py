"""VerifyCPUCode: reject a schedule whose function fails Workbench's IR verifier.

Not in the default llvm list (TVM has no CPU verifier there); useful with custom rules that
may produce malformed IR, so the failure is counted as a postproc failure, not a build error.
"""
from __future__ import annotations

from workbench.meta_schedule.postproc.postproc import Postproc, register_postproc
from workbench.tir.analysis.verify import verify_prim_func
from workbench.tir.schedule import Schedule


@register_postproc("verify-cpu-code")
class VerifyCPUCode(Postproc):
    def apply(self, sch: Schedule) -> bool:
        try:
            verify_prim_func(sch.mod[sch.func_working_on])
        except ValueError:
            return False
        return True
