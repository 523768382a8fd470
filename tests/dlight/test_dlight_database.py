"""A partly tuned model: kernels with a tuning record keep the tuned schedule, the others get
default schedules (ApplyDefaultSchedule runs after MetaScheduleApplyDatabase)."""
from __future__ import annotations

import numpy as np

import workbench as wb
from workbench import relax
from workbench.ir.structural import structural_equal
from workbench.meta_schedule.arg_info import ArgInfo
from workbench.meta_schedule.database import MemoryDatabase, TuningRecord
from workbench.meta_schedule.relax_integration import compile_relax, extract_tasks
from workbench.relax import op as R
from workbench.relax.pipeline import get_default_pipeline
from workbench.target import Target
from workbench.tir.schedule import Schedule

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from dlight_cases import make_module  # noqa: E402

TARGET = Target("llvm")


def _model():
    """``softmax(a @ b + c)``: a fused matmul kernel and a softmax kernel."""
    return make_module([("a", (32, 48)), ("b", (48, 40)), ("c", (32, 40))],
                       lambda a, b, c: R.nn.softmax(R.add(R.matmul(a, b), c), axis=-1))


def _hand_schedule(task_mod) -> Schedule:
    """A schedule no default rule would make (a 3-way split of the rows, columns unrolled)."""
    sch = Schedule(task_mod)
    block = next(b for b in sch.get_child_blocks(sch.get_sblock("root"))
                 if sch.get(b).init is not None)
    i, j, k = sch.get_loops(block)
    i0, i1 = sch.split(i, [None, 3])
    sch.reorder(i0, k, i1, j)
    sch.unroll(i1)
    return sch


def test_database_covered_kernel_keeps_its_tuned_schedule():
    mod = _model()
    tasks = {t.task_name: t for t in extract_tasks(mod, TARGET)}
    (mm_name,) = [n for n in tasks if "matmul" in n]
    (other,) = [n for n in tasks if n != mm_name]
    task = tasks[mm_name]
    tuned = _hand_schedule(task.mod)
    db = MemoryDatabase()
    db.commit_tuning_record(TuningRecord(tuned.trace, db.commit_workload(task.mod), [1e-4],
                                         TARGET, ArgInfo.from_entry_func(tuned.mod)))

    pipeline = get_default_pipeline(TARGET, database=db)
    ds = next(p for p in pipeline if p.name == "ApplyDefaultSchedule")
    applied_db = next(p for p in pipeline if p.name == "MetaScheduleApplyDatabase")
    exe = relax.build(mod, TARGET, relax_pipeline=pipeline)
    assert applied_db.applied == [mm_name]
    assert ds.skipped == [mm_name] and ds.applied == {other: "RowReduction"}
    kernel = exe.lowered_mod[mm_name]
    assert structural_equal(kernel.body, tuned.mod["main"].body)
    assert exe.lowered_mod[other].attrs["tir.is_scheduled"]

    rng = np.random.default_rng(5)
    a, b, c = (rng.standard_normal(s).astype("float32") for s in ((32, 48), (48, 40), (32, 40)))
    z = a @ b + c
    e = np.exp(z - z.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    for compiled in (exe, compile_relax(db, mod, TARGET)):
        vm = relax.VirtualMachine(compiled, wb.cpu())
        got = vm["main"](wb.nd.array(a), wb.nd.array(b), wb.nd.array(c)).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
