"""Task schedulers: the gradient formula and choice on a hand-made history (TVM's formula,
reference section 9), round-robin order, the statistics table layout, the factory."""
from __future__ import annotations

import pytest

from workbench.meta_schedule.task_scheduler import (
    GradientBased, RoundRobin, TaskRecord, TaskScheduler,
)


class _Ctx:
    def __init__(self, name: str) -> None:
        self.task_name = name
        self.mod = None


def _record(name: str, weight: float = 1.0, flop: float = 1e6,
            latency_ms: list[float] | None = None) -> TaskRecord:
    rec = TaskRecord(_Ctx(name), weight)
    rec.flop = flop
    rec.latency_ms = list(latency_ms or [])
    return rec


def _gradient_scheduler(histories, weights) -> GradientBased:
    ts = GradientBased(alpha=0.2, window_size=3, seed=7)
    ts.tasks_ = [_record(f"t{i}", w) for i, w in enumerate(weights)]
    ts.best_latency_history_ = [list(h) for h in histories]
    ts.round_robin_rounds_ = len(histories) + 1  # warm-up done
    return ts


def test_gradient_formula_by_hand():
    h0 = [10.0, 8.0, 6.0, 5.0, 4.0]   # m = 5 >= w + 1: backward gradient over 3 batches
    h1 = [3.0, 2.0]                  # m = 2 < w + 1: only the optimistic term
    ts = _gradient_scheduler([h0, h1, []], [1.0, 2.0, 1.0])
    g1 = (h0[5 - 1 - 3] - 4.0) / 3   # (8 - 4) / 3
    g2 = 4.0 / 5
    assert ts.task_gradient(0) == pytest.approx(0.2 * g1 + 0.8 * g2)
    assert ts.task_gradient(1) == pytest.approx((0.2 * 0 + 0.8 * (2.0 / 2)) * 2.0)
    assert ts.task_gradient(2) == -1e9  # nothing measured yet


def test_gradient_picks_the_largest_and_skips_terminated():
    ts = _gradient_scheduler([[10.0, 8.0, 6.0, 5.0, 4.0], [3.0, 2.0], []], [1.0, 2.0, 1.0])
    # gradients: task0 = 0.2*4/3 + 0.8*0.8 = 0.9067, task1 = 1.6, task2 = -1e9
    assert ts.next_task_id() == 1
    ts.tasks_[1].is_terminated = True
    assert ts.next_task_id() == 0
    ts.tasks_[0].is_terminated = True
    assert ts.next_task_id() == 2
    ts.tasks_[2].is_terminated = True
    assert ts.next_task_id() == -1


def test_gradient_history_failures_and_ties():
    # A task whose best is still a failure (1e9 ms) gets -1e9, like an unmeasured one.
    ts = _gradient_scheduler([[1e9], [1e9]], [1.0, 1.0])
    picks = {ts.next_task_id() for _ in range(40)}
    assert picks == {0, 1}  # all equal: uniformly random among the alive tasks


def test_gradient_warmup_is_round_robin():
    ts = GradientBased()
    ts.tasks_ = [_record("a"), _record("b"), _record("c")]
    ts.best_latency_history_ = [[], [], []]
    assert [ts.next_task_id() for _ in range(3)] == [0, 1, 2]


def test_round_robin_order():
    ts = RoundRobin()
    ts.tasks_ = [_record("a"), _record("b"), _record("c")]
    assert [ts.next_task_id() for _ in range(4)] == [0, 1, 2, 0]
    ts.tasks_[1].is_terminated = True
    assert [ts.next_task_id() for _ in range(3)] == [2, 0, 2]
    for t in ts.tasks_:
        t.is_terminated = True
    assert ts.next_task_id() == -1


def test_statistics_table_layout():
    ts = RoundRobin()
    ts.tasks_ = [_record("main", flop=4194304, latency_ms=[1e9, 0.2149525, 0.3]),
                 _record("other", weight=3, flop=100)]
    ts.tasks_[0].is_terminated = True
    text = ts.tuning_statistics()
    lines = text.splitlines()
    assert lines[0] == (" ID |  Name |    FLOP | Weight | Speed (GFLOPS) | Latency (us) | "
                        "Weighted Latency (us) | Trials | Done ")
    assert set(lines[1]) == {"-"} and len(lines[1]) == len(lines[0])
    assert lines[2] == ("  0 |  main | 4194304 |      1 |        19.5127 |     214.9525 |"
                        "              214.9525 |      3 |    Y ")
    assert lines[3] == ("  1 | other |     100 |      3 |            N/A |          N/A |"
                        "                   N/A |      0 |      ")
    assert lines[5:] == ["Total trials: 3", "Total latency (us): 214.952"]


def test_factory():
    assert isinstance(TaskScheduler.create(), GradientBased)
    assert isinstance(TaskScheduler.create("round-robin"), RoundRobin)
    with pytest.raises(ValueError, match="round-robin"):
        TaskScheduler.create("fifo")
