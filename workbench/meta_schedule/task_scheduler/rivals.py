"""Rival tasks: two implementations of the same layers, of which the build uses the faster.

``tune_relax`` tunes a 3x3 convolution both ways, direct and Winograd
(:mod:`workbench.meta_schedule.conv_implementations`), and ``compile_relax`` builds each with
the implementation whose best record ran faster. The model's latency is then the minimum of
the two, so trials spent on the clearly slower one buy nothing: the scheduler's weighted
latency counted both, and on ResNet-18 (AVX2, 200 trials) two thirds of the budget went to
the direct kernels, 2x slower per call than their Winograd rivals and never used.

``rivals[i]`` lists the tasks that compute task ``i``'s layers another way. Task ``i`` is
*outrun* once its best latency per call and every rival's are measured and its own is more
than ``margin`` times the rivals' summed (option ``ms_rival_margin``): the schedulers then
tune it only when no other task is left, and the confirmation skips it. A margin leaves room
for the loser's search to catch up while the two are close (ResNet-18's last stage: 1.12x).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from workbench import options

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.task_scheduler.task_scheduler import TaskRecord

__all__ = ["check_rivals", "outrun_by"]


def _margin(value: float) -> None:
    if not value >= 1.0:
        raise ValueError(f"must be a number >= 1, got {value!r}")


options.register("ms_rival_margin", float, 1.3, env="WORKBENCH_MS_RIVAL_MARGIN",
                 doc="A task whose best latency is more than this many times that of its "
                     "rival implementation's tasks is tuned only when no other task is left.",
                 validate=_margin)


def check_rivals(rivals: Sequence[Sequence[int]] | None, n: int) -> list[list[int]]:
    """``rivals`` for ``n`` tasks, checked: one list of task indices per task, none naming
    its own task; None: no task has a rival."""
    if rivals is None:
        return [[] for _ in range(n)]
    out = [list(r) for r in rivals]
    if len(out) != n:
        raise ValueError(f"task_rivals: {len(out)} entries for {n} tasks (one list per task)")
    for i, r in enumerate(out):
        bad = [j for j in r if isinstance(j, bool) or not isinstance(j, int)
               or not 0 <= j < n or j == i]
        if bad:
            raise ValueError(f"task_rivals[{i}]: {bad} are not indices of other tasks "
                             f"(0..{n - 1}, not {i})")
    return out


def outrun_by(tasks: Sequence["TaskRecord"], rivals: Sequence[Sequence[int]], task_id: int,
              margin: float | None = None) -> float | None:
    """How many times slower task ``task_id``'s best is than its rivals' summed bests, when
    that is more than ``margin`` (module docstring); None when it is not outrun, has no
    rival (``rivals`` may be shorter than ``tasks``: none given), or a best is not measured
    yet."""
    theirs = rivals[task_id] if task_id < len(rivals) else []
    mine = tasks[task_id].best_latency_ms
    if not theirs or mine is None:
        return None
    bests = [tasks[j].best_latency_ms for j in theirs]
    if any(b is None for b in bests):
        return None
    ratio = mine / max(sum(bests), 1e-12)
    limit = float(options.get("ms_rival_margin")) if margin is None else margin
    return ratio if ratio > limit else None
