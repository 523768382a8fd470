"""Schedule rules (TVM's ``meta_schedule.schedule_rule``). See :mod:`.schedule_rule`."""
from workbench.meta_schedule.schedule_rule.auto_inline import AutoInline
from workbench.meta_schedule.schedule_rule.multi_level_tiling import MultiLevelTiling
from workbench.meta_schedule.schedule_rule.parallel_vectorize_unroll import (
    ParallelizeVectorizeUnroll,
)
from workbench.meta_schedule.schedule_rule.random_compute_location import RandomComputeLocation
from workbench.meta_schedule.schedule_rule.schedule_rule import (
    PyScheduleRule, ScheduleRule, register_schedule_rule,
)

__all__ = ["ScheduleRule", "PyScheduleRule", "register_schedule_rule", "AutoInline",
           "MultiLevelTiling", "ParallelizeVectorizeUnroll", "RandomComputeLocation"]
