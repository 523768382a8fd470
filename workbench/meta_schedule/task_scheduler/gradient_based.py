"""GradientBased: spend trials where the latency is still dropping (reference section 9).

After a round-robin warm-up (each task once), every task's history is the best latency after
each of its batches. For an alive task with history ``h`` (length ``m``, best ``h[-1]``)::

    g1 = (h[m-1-w] - h[-1]) / w   if m >= w + 1 else 0      # recent improvement, window w
    g2 = h[-1] / m                                          # how much could still go
    grad = (alpha * g1 + (1 - alpha) * g2) * weight         # -1e9 without a valid result

The task with the largest gradient is tuned next; ties across all tasks pick at random.
Beyond TVM: a task its rival implementation outruns (:mod:`.rivals`) is left out while any
other task is alive -- the build will not call it, whatever its gradient says.
"""
from __future__ import annotations

from typing import Any

from workbench.meta_schedule.task_scheduler.task_scheduler import (
    FAILED_LATENCY_MS, TaskScheduler,
)
from workbench.tir.schedule.handles import RandomEngine


class GradientBased(TaskScheduler):
    def __init__(self, *, alpha: float = 0.2, window_size: int = 3, seed: int = -1) -> None:
        super().__init__()
        self.alpha = alpha
        self.window_size = window_size
        self.seed = seed
        self._rand = RandomEngine(None if seed == -1 else seed)
        self.round_robin_rounds_ = 0
        self.best_latency_history_: list[list[float]] = []

    def tune(self, tasks: Any, task_weights: Any, *args: Any, **kwargs: Any) -> None:
        self.round_robin_rounds_ = 0
        self.best_latency_history_ = [[] for _ in tasks]
        super().tune(tasks, task_weights, *args, **kwargs)

    def task_gradient(self, task_id: int) -> float:
        """The gradient of one task from its history (module docstring)."""
        h = self.best_latency_history_[task_id]
        m = len(h)
        if m == 0 or h[-1] >= FAILED_LATENCY_MS:
            return -1e9
        w = self.window_size
        best = h[-1]
        g1 = (h[m - 1 - w] - best) / w if m >= w + 1 else 0.0
        g2 = best / m
        return (self.alpha * g1 + (1 - self.alpha) * g2) * self.tasks_[task_id].task_weight

    def next_task_id(self) -> int:
        n = len(self.tasks_)
        if self.round_robin_rounds_ == 0:
            self.print_tuning_statistics()
        while self.round_robin_rounds_ < n:
            task_id = self.round_robin_rounds_
            self.round_robin_rounds_ += 1
            if not self.tasks_[task_id].is_terminated:
                return task_id
        if self.round_robin_rounds_ == n:
            self.round_robin_rounds_ += 1
            for i, task in enumerate(self.tasks_):
                if not task.is_terminated and task.runner_futures is not None:
                    self.join_running_task(i)
        for i in range(n):
            self.touch_task(i)
        alive = [i for i, t in enumerate(self.tasks_) if not t.is_terminated]
        if not alive:
            return -1
        alive = [i for i in alive if not self.task_outrun(i)] or alive
        grads = [self.task_gradient(i) for i in alive]
        if max(grads) == min(grads):
            task_id = alive[self._rand.randint(0, len(alive))]
        else:
            task_id = alive[grads.index(max(grads))]
        if self.tasks_[task_id].runner_futures is not None:
            self.join_running_task(task_id)
        return task_id

    def join_running_task(self, task_id: int) -> list:
        results = super().join_running_task(task_id)
        task = self.tasks_[task_id]
        if task.latency_ms:
            self.best_latency_history_[task_id].append(min(task.latency_ms))
        return results
