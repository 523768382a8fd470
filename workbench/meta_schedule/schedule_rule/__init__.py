"""Schedule rules (TVM's ``meta_schedule.schedule_rule``). See :mod:`.schedule_rule`."""
from workbench.meta_schedule.schedule_rule.add_rfactor import AddRFactor
from workbench.meta_schedule.schedule_rule.apply_custom_rule import (
    ApplyCustomRule, register_custom_schedule_rule,
)
from workbench.meta_schedule.schedule_rule.auto_inline import AutoInline
# Registers the custom rule "flash_attention" (the fused attention kernel's tuning space).
from workbench.meta_schedule.schedule_rule import flash_attention as _flash_attention  # noqa: F401
from workbench.meta_schedule.schedule_rule.inline_constant_scalars import InlineConstantScalars
from workbench.meta_schedule.schedule_rule.multi_level_tiling import MultiLevelTiling, ReuseType
from workbench.meta_schedule.schedule_rule.multi_level_tiling_with_intrin import (
    MultiLevelTilingMicroKernel, MultiLevelTilingWithIntrin,
)
from workbench.meta_schedule.schedule_rule.parallel_vectorize_unroll import (
    ParallelizeVectorizeUnroll,
)
from workbench.meta_schedule.schedule_rule.random_compute_location import RandomComputeLocation
# Registers the custom rule "winograd_transform" (a Winograd convolution's four transforms).
from workbench.meta_schedule.schedule_rule import winograd as _winograd  # noqa: F401
from workbench.meta_schedule.schedule_rule.schedule_rule import (
    PyScheduleRule, ScheduleRule, register_schedule_rule,
)

__all__ = ["ScheduleRule", "PyScheduleRule", "register_schedule_rule", "ApplyCustomRule",
           "register_custom_schedule_rule", "InlineConstantScalars", "AutoInline", "AddRFactor",
           "MultiLevelTiling", "ReuseType", "MultiLevelTilingWithIntrin",
           "MultiLevelTilingMicroKernel", "ParallelizeVectorizeUnroll",
           "RandomComputeLocation"]
