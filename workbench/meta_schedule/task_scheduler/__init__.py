"""Task schedulers (TVM's ``meta_schedule.task_scheduler``). See :mod:`.task_scheduler`."""
from workbench.meta_schedule.task_scheduler.gradient_based import GradientBased
from workbench.meta_schedule.task_scheduler.round_robin import RoundRobin
from workbench.meta_schedule.task_scheduler.task_scheduler import (
    NoValidCandidateWarning, PyTaskScheduler, TaskRecord, TaskScheduler,
)

__all__ = ["TaskScheduler", "PyTaskScheduler", "TaskRecord", "GradientBased", "RoundRobin",
           "NoValidCandidateWarning"]
