"""RoundRobin: tune the alive tasks in turn (reference section 9)."""
from __future__ import annotations

from workbench.meta_schedule.task_scheduler.task_scheduler import TaskScheduler


class RoundRobin(TaskScheduler):
    def __init__(self) -> None:
        super().__init__()
        self.task_id = -1

    def tune(self, *args, **kwargs) -> None:  # type: ignore[override]
        self.task_id = -1
        super().tune(*args, **kwargs)

    def next_task_id(self) -> int:
        n = len(self.tasks_)
        for i in range(n):
            self.touch_task(i)
        for _ in range(n):
            self.task_id = (self.task_id + 1) % n
            if not self.tasks_[self.task_id].is_terminated:
                if self.tasks_[self.task_id].runner_futures is not None:
                    self.join_running_task(self.task_id)
                return self.task_id
        return -1
