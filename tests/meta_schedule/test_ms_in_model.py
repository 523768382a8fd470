"""Tuned kernels checked inside the model (issue 27): check_in_model profiles the untuned and
the tuned build of a real model in turns and leaves out a record that loses there.

The losing record is made on purpose: an empty trace (the kernel's plain loops: one thread,
no vectorisation) that claims to have run in a nanosecond, against the default schedule of a
matmul large enough that the difference is many times the noise."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax
from workbench.meta_schedule.database import MemoryDatabase, TuningRecord
from workbench.meta_schedule.in_model import WithoutWorkloads, check_in_model
from workbench.meta_schedule.relax_integration import compile_relax, extract_tasks
from workbench.relax.frontend import nn
from workbench.tir.schedule import Schedule

M, K, N = 128, 256, 256
TARGET = "llvm -num-cores=2"


class MatmulRelu(nn.Module):
    def __init__(self) -> None:
        self.w = nn.Parameter((K, N))

    def forward(self, x: nn.Tensor):
        return nn.relu(nn.op.matmul(x, self.w)) + 1.0


@pytest.fixture(scope="module")
def model():
    mod, _ = MatmulRelu().export_tvm({"forward": {"x": nn.spec.Tensor((M, K), "float32")}})
    rng = np.random.default_rng(0)
    x = rng.standard_normal((M, K)).astype("float32")
    w = rng.standard_normal((K, N)).astype("float32")
    return mod, [x, w]


def _naive_records(mod) -> tuple[MemoryDatabase, list[str]]:
    """A database holding, for the matmul task, an unscheduled kernel that claims 1 ns (its
    trace only looks the block up: a record needs one instruction to be valid)."""
    db = MemoryDatabase()
    names = []
    for task in extract_tasks(mod, TARGET):
        if "matmul" not in task.task_name:
            continue
        workload = db.commit_workload(task.dispatched[0])
        sch = Schedule(task.dispatched[0])
        sch.get_block("T_matmul")
        db.commit_tuning_record(TuningRecord(sch.trace, workload, [1e-9], TARGET))
        names += task.kernel_names
    assert names, "the model has no matmul task"
    return db, names


def test_a_record_that_loses_in_the_model_is_not_used(model):
    mod, inputs = model
    db, names = _naive_records(mod)
    check = check_in_model(db, mod, TARGET, inputs, rounds=3, func_name="forward")
    table = check.table
    assert set(table.index) == set(names) and table.index.name == "Kernel"
    row = table.loc[names[0]]
    # The naive kernel is far slower in the model than the default schedule; its record
    # promised ~1 ns per call.
    assert row["Tuned (us)"] > 3 * row["Default (us)"], row
    assert row["Record vs model"] > 1e3 and row["Calls"] == 1
    assert not row["Used"] and check.hidden == names == check.profile_hidden
    assert check.tuned_us > check.untuned_us
    # The executable it returns runs the default schedule again: as fast as untuned, right.
    x, w = inputs
    vm = relax.VirtualMachine(check.exe, wb.cpu())
    out = vm["forward"](wb.nd.array(x), wb.nd.array(w)).numpy()
    np.testing.assert_allclose(out, np.maximum(x @ w, 0) + 1, rtol=1e-4, atol=1e-3)
    again = check_in_model(WithoutWorkloads(db, [t.dispatched[0] for t in
                                                 extract_tasks(mod, TARGET)]),
                           mod, TARGET, inputs, rounds=1, func_name="forward")
    assert len(again.table) == 0 and again.hidden == []
    assert "records not used" in check._repr_html_()
    # the record was dropped, so the build with every record was timed too, and lost
    assert set(check.model_ms) == {"untuned", "tuned", "all records"}
    assert min(check.model_ms.values()) > 0 and not check.all_records_kept
    assert check.model_ms["all records"] > 2 * check.model_ms["tuned"]
    assert "whole model, end to end (untuned" in check._repr_html_()


@pytest.mark.parametrize("tuned_ms", [1.5, 1.01])
def test_a_tuned_build_slower_end_to_end_gives_way_to_the_untuned_one(model, monkeypatch,
                                                                       tuned_ms):
    """The last step times the checked build against the untuned one end to end; when the
    checked one is slower (made so here: the timing says so), even by 1%, the untuned build
    is what the check returns, and it says so."""
    import workbench.meta_schedule.in_model as in_model
    mod, inputs = model
    db, _ = _naive_records(mod)
    timed = []

    def slower_tuned(builds, func_name, args, rounds, dev):  # noqa: ANN001, ANN202
        timed.append(sorted(builds))
        return {"untuned": 1.0, "tuned": tuned_ms, "all records": tuned_ms}
    monkeypatch.setattr(in_model, "_time_models", slower_tuned)
    check = check_in_model(db, mod, TARGET, inputs, rounds=1, func_name="forward")
    assert timed == [["all records", "tuned", "untuned"]] and check.untuned_kept
    assert not check.all_records_kept
    assert check.exe.kernel_names == relax.build(mod, TARGET).kernel_names
    assert "the untuned build is used" in check._repr_html_()
    x, w = inputs
    out = relax.VirtualMachine(check.exe, wb.cpu())["forward"](wb.nd.array(x), wb.nd.array(w))
    np.testing.assert_allclose(out.numpy(), np.maximum(x @ w, 0) + 1, rtol=1e-4, atol=1e-3)


def test_records_a_profile_dropped_come_back_when_faster_end_to_end(model, monkeypatch):
    """A record the per-kernel profile drops (here a naive kernel, on purpose) is used after
    all when the build with every record runs fastest end to end (made so here: the timing
    says so): the check returns that build, hides nothing and marks every row used."""
    import workbench.meta_schedule.in_model as in_model
    mod, inputs = model
    db, names = _naive_records(mod)
    monkeypatch.setattr(in_model, "_time_models", lambda builds, *a: {
        "untuned": 1.0, "tuned": 1.0, "all records": 0.9})
    check = check_in_model(db, mod, TARGET, inputs, rounds=1, func_name="forward")
    assert check.all_records_kept and not check.untuned_kept and check.hidden == []
    assert check.profile_hidden == names     # what the profile alone said
    assert bool(check.table.loc[names[0], "Used"])
    assert check.exe.kernel_names == compile_relax(db, mod, TARGET).kernel_names
    assert "the all records build is used" in check._repr_html_()
    x, w = inputs   # the naive kernel is slow, but right
    out = relax.VirtualMachine(check.exe, wb.cpu())["forward"](wb.nd.array(x), wb.nd.array(w))
    np.testing.assert_allclose(out.numpy(), np.maximum(x @ w, 0) + 1, rtol=1e-4, atol=1e-3)


def test_without_workloads_hides_only_the_named_workloads(model):
    mod, _ = model
    db, _ = _naive_records(mod)
    tasks = extract_tasks(mod, TARGET)
    (matmul,) = [t for t in tasks if "matmul" in t.task_name]
    assert db.query_tuning_record(matmul.dispatched[0], TARGET) is not None
    hidden = WithoutWorkloads(db, [matmul.dispatched[0]])
    assert hidden.query_tuning_record(matmul.dispatched[0], TARGET) is None
    assert WithoutWorkloads(db, []).query_tuning_record(matmul.dispatched[0]) is not None
    exe = compile_relax(hidden, mod, TARGET)
    assert exe.kernel_names == relax.build(mod, TARGET).kernel_names
    with pytest.raises(NotImplementedError, match="only answers queries"):
        hidden.commit_workload(matmul.dispatched[0])


def test_bad_arguments_are_named(model):
    mod, inputs = model
    with pytest.raises(TypeError, match="database must be a Database"):
        check_in_model("db.json", mod, TARGET, inputs)
    with pytest.raises(ValueError, match="rounds must be an int >= 1"):
        check_in_model(MemoryDatabase(), mod, TARGET, inputs, rounds=0)


def test_compile_relax_checks_the_records_in_the_model_when_given_inputs(model):
    mod, inputs = model
    db, names = _naive_records(mod)
    exe = compile_relax(db, mod, TARGET, check_inputs=inputs)
    assert exe.in_model_check.hidden == names
    x, w = inputs
    out = relax.VirtualMachine(exe, wb.cpu())["forward"](wb.nd.array(x), wb.nd.array(w))
    np.testing.assert_allclose(out.numpy(), np.maximum(x @ w, 0) + 1, rtol=1e-4, atol=1e-3)
    with pytest.raises(ValueError, match="check_inputs takes the default build"):
        compile_relax(db, mod, TARGET, check_inputs=inputs, fuse=False)
