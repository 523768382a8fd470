"""RoundRobin: tune the alive tasks in turn (reference section 9).

Beyond TVM: a task its rival implementation outruns (:mod:`.rivals`) is skipped while any
other task is alive."""
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
        alive = [i for i, t in enumerate(self.tasks_) if not t.is_terminated]
        if not alive:
            return -1
        eligible = [i for i in alive if not self.task_outrun(i)] or alive
        self.task_id = next((i for i in eligible if i > self.task_id), eligible[0])
        if self.tasks_[self.task_id].runner_futures is not None:
            self.join_running_task(self.task_id)
        return self.task_id
