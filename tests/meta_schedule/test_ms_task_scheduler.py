"""Task schedulers: the gradient formula and choice on a hand-made history (TVM's formula,
reference section 9), round-robin order, the statistics table layout, the factory; rival
implementations (a task its rival outruns waits until no other task is left)."""
from __future__ import annotations

import pytest

from workbench import options
from workbench.meta_schedule.task_scheduler import (
    GradientBased, RoundRobin, TaskRecord, TaskScheduler,
)
from workbench.meta_schedule.task_scheduler.rivals import check_rivals, outrun_by


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


def _rival_scheduler(kind: type, bests: list[float], rivals: list[list[int]]):
    """A scheduler past its warm-up whose task ``i`` measured ``bests[i]`` ms."""
    ts = kind(seed=7) if kind is GradientBased else kind()
    ts.tasks_ = [_record(f"t{i}", latency_ms=[b]) for i, b in enumerate(bests)]
    ts.rivals_ = check_rivals(rivals, len(bests))
    if kind is GradientBased:
        ts.best_latency_history_ = [[b] for b in bests]
        ts.round_robin_rounds_ = len(bests) + 1
    return ts


def test_outrun_by_margin_and_unmeasured_rivals():
    tasks = [_record("wino", latency_ms=[1.0]), _record("direct", latency_ms=[2.0, 1.4]),
             _record("other", latency_ms=[])]
    rivals = check_rivals([[1], [0], []], 3)
    assert outrun_by(tasks, rivals, 1, margin=1.3) == pytest.approx(1.4)
    assert outrun_by(tasks, rivals, 1, margin=1.5) is None     # close: both stay in
    assert outrun_by(tasks, rivals, 0, margin=1.3) is None     # the faster one
    assert outrun_by(tasks, rivals, 2, margin=1.3) is None     # no rival
    assert outrun_by(tasks, [], 1, margin=1.3) is None         # no rivals given at all
    unmeasured = [_record("a", latency_ms=[3.0]), _record("b", latency_ms=[1e9])]
    assert outrun_by(unmeasured, [[1], [0]], 0, margin=1.3) is None  # rival has no best yet
    with options.override(ms_rival_margin=1.5):
        assert outrun_by(tasks, rivals, 1) is None
    with pytest.raises(ValueError, match=r"task_rivals\[1\]: \[1\]"):
        check_rivals([[1], [1]], 2)
    with pytest.raises(ValueError, match="2 entries for 3 tasks"):
        check_rivals([[1], [0]], 3)
    with pytest.raises(ValueError, match="must be a number >= 1"):
        options.set("ms_rival_margin", 0.5)


@pytest.mark.parametrize("kind", [GradientBased, RoundRobin])
def test_an_outrun_task_waits_until_no_other_is_left(kind, caplog):
    """Task 2 (a direct convolution) runs 2x slower than its rival task 0 (the Winograd
    one): the schedulers tune tasks 0 and 1 and come to task 2 only when both are done,
    and say once why it is set aside."""
    ts = _rival_scheduler(kind, [1.0, 0.5, 2.0], [[2], [], [0]])
    with caplog.at_level("INFO", logger="workbench.meta_schedule"):
        picks = {ts.next_task_id() for _ in range(30)}
    assert picks == ({0} if kind is GradientBased else {0, 1})  # 0: the largest gradient
    notes = [r.getMessage() for r in caplog.records if "set aside" in r.getMessage()]
    assert len(notes) == 1 and "Task #2 ('t2')" in notes[0] and "2.00x slower" in notes[0]
    ts.tasks_[0].is_terminated = ts.tasks_[1].is_terminated = True
    assert ts.next_task_id() == 2
    # without rivals, the gradient picks the slowest task (it has the most to gain)
    plain = _rival_scheduler(kind, [1.0, 0.5, 2.0], [[], [], []])
    assert 2 in {plain.next_task_id() for _ in range(6)}
