"""Space generators (TVM's ``meta_schedule.space_generator``). See :mod:`.space_generator`."""
from workbench.meta_schedule.space_generator.post_order_apply import PostOrderApply
from workbench.meta_schedule.space_generator.schedule_fn import ScheduleFn
from workbench.meta_schedule.space_generator.space_generator import (
    PySpaceGenerator, SpaceGenerator,
)
from workbench.meta_schedule.space_generator.space_generator_union import SpaceGeneratorUnion

__all__ = ["SpaceGenerator", "PySpaceGenerator", "PostOrderApply", "ScheduleFn",
           "SpaceGeneratorUnion"]
