"""Tuning whole Relax models (issue 7): extract_tasks on an MLP and a CNN (fused kernels,
call-count weights, structural dedup), MetaScheduleApplyDatabase, and tune_relax +
compile_relax end to end (the tuned graph runs on the VM and matches numpy)."""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import workbench as wb
from workbench.ir.structural import structural_equal
from workbench.meta_schedule.database import MemoryDatabase
from workbench.meta_schedule.relax_integration import (
    _fuse, compile_relax, extract_tasks, tune_relax,
)
from workbench.relax.frontend import nn
from workbench.relax.transform import MetaScheduleApplyDatabase
from workbench.runtime.relax_vm import VirtualMachine
from workbench.tir.function import PrimFunc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "relax"))
from relax_compile_models import make_cnn, make_mlp  # noqa: E402

TARGET = "llvm -num-cores=2"


class DeepMLP(nn.Module):
    """Three equal 16x16 layers: two equal matmul+add+relu kernels (named differently by
    FuseTIR), three equal transposes, and a last matmul+add."""

    def __init__(self) -> None:
        self.fc1 = nn.Linear(16, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 16)

    def forward(self, x: nn.Tensor) -> nn.Tensor:
        return self.fc3(nn.relu(self.fc2(nn.relu(self.fc1(x)))))


def deep_mlp(batch=4):
    model = DeepMLP()
    mod, _ = model.export_tvm({"forward": {"x": nn.spec.Tensor((batch, 16), "float32")}})
    rng = np.random.default_rng(0)
    params = [(rng.standard_normal(p.shape) * 0.3).astype("float32")
              for _, p in model.named_parameters()]
    return mod, params


def deep_reference(x, p):
    w1, b1, w2, b2, w3, b3 = p
    h = np.maximum(x @ w1.T + b1, 0)
    h = np.maximum(h @ w2.T + b2, 0)
    return h @ w3.T + b3


def _weights(tasks):
    return {t.task_name: t.weight for t in tasks}


def test_extract_tasks_mlp():
    mod, _, _, _ = make_mlp(4)
    tasks = extract_tasks(mod, "llvm")
    assert _weights(tasks) == {"transpose": 1, "fused_matmul_add_relu": 1, "transpose1": 1,
                               "fused_matmul1_add1": 1}
    for t in tasks:
        assert list(t.mod) == ["main"] and t.dispatched[0] is t.mod
        func = t.mod["main"]
        assert func.attrs["global_symbol"] == "main" and func.attrs["tir.noalias"]


def test_extract_tasks_dedup_and_weights():
    mod, _ = deep_mlp()
    fused = _fuse(mod, "llvm")
    # FuseTIR shares structurally equal fused kernels: one relu kernel, called twice ...
    assert "fused_matmul_add_relu" in fused and "fused_matmul_add_relu1" not in fused
    tasks = extract_tasks(mod, "llvm")
    # ... one task of weight 2; the three equal transposes one of weight 3.
    assert _weights(tasks) == {"transpose": 3, "fused_matmul_add_relu": 2,
                               "fused_matmul_add": 1}
    assert [t.task_name for t in tasks] == ["transpose", "fused_matmul_add_relu",
                                            "fused_matmul_add"]


def test_extract_tasks_cnn_are_the_vm_kernels():
    mod, _, _, _ = make_cnn(2)
    tasks = extract_tasks(mod, "llvm")
    assert _weights(tasks) == {"reshape": 1, "fused_conv2d_add_batch_norm_relu": 1,
                               "max_pool2d": 1, "reshape1": 1, "transpose": 1,
                               "fused_matmul_add1": 1}
    exe = wb.relax.build(mod, "llvm")
    assert set(_weights(tasks)) <= set(exe.kernel_names)


def test_extract_tasks_with_params_and_symbolic_batch():
    mod, names, params, _ = make_mlp("n")
    tasks = extract_tasks(mod, "llvm", params=dict(zip(names, params)))
    assert {"fused_matmul_add_relu", "fused_matmul1_add1"} <= set(_weights(tasks))


def test_apply_database_without_records_leaves_module_alone():
    mod, _ = deep_mlp()
    fused = _fuse(mod, "llvm")
    p = MetaScheduleApplyDatabase(MemoryDatabase())
    out = p(fused)
    assert p.applied == []
    for name, func in fused.items():
        assert out[name] is func
    # No database at all: a no-op too.
    assert MetaScheduleApplyDatabase()(fused)["transpose"] is fused["transpose"]


@pytest.mark.tuning
def test_tune_relax_then_compile_relax(tmp_path):
    from ms_tuning_workloads import fast_runner, xgb_1thread
    mod, params = deep_mlp()
    db = tune_relax(mod, None, TARGET, str(tmp_path), max_trials_global=16,
                    max_trials_per_task=8, num_trials_per_iter=8,
                    op_names=["fused_matmul_add_relu"], strategy="replay-trace",
                    runner=fast_runner(), cost_model=xgb_1thread(), seed=0, dashboard="text")
    assert len(db) == 8
    assert os.path.exists(tmp_path / "database_tuning_record.json")

    fused = _fuse(mod, "llvm")
    apply = MetaScheduleApplyDatabase(db, TARGET)
    out = apply(fused)
    # The shared relu kernel gets the tuned schedule; the untuned last layer is untouched.
    assert sorted(apply.applied) == ["fused_matmul_add_relu"]
    assert out["fused_matmul_add"] is fused["fused_matmul_add"]
    assert out["transpose"] is fused["transpose"]
    for name in apply.applied:
        func = out[name]
        assert isinstance(func, PrimFunc) and func.attrs["tir.is_scheduled"]
        # The original attrs (global_symbol, op_pattern, ...) are kept.
        assert dict(func.attrs) == {**fused[name].attrs, "tir.is_scheduled": True}
        text = func.script()
        assert "T.parallel" in text or "T.vectorized" in text
        # It is the database's best schedule.
        best = db.query_ir_module(wb.IRModule({"main": fused[name].with_attr(
            "global_symbol", "main")}), None)
        assert best is not None
        assert structural_equal(func.body, best["main"].body)

    exe = compile_relax(db, mod, TARGET)
    kernels = {n: f for n, f in exe.lowered_mod.items() if isinstance(f, PrimFunc)}
    # The tuned kernel keeps the database's schedule; the untuned last layer gets a default
    # one (workbench.dlight), or stays a loop nest with default_schedule=False.
    assert structural_equal(kernels["fused_matmul_add_relu"].body,
                            out["fused_matmul_add_relu"].body)
    assert kernels["fused_matmul_add"].attrs.get("tir.is_scheduled")
    plain = compile_relax(db, mod, TARGET, default_schedule=False).lowered_mod
    assert structural_equal(plain["fused_matmul_add_relu"].body,
                            out["fused_matmul_add_relu"].body)
    assert not plain["fused_matmul_add"].attrs.get("tir.is_scheduled")
    x = np.random.default_rng(1).standard_normal((4, 16)).astype("float32")
    dev = wb.cpu()
    vm = VirtualMachine(exe, dev)
    got = vm["forward"](*[wb.nd.array(a, dev) for a in (x, *params)]).numpy()
    np.testing.assert_allclose(got, deep_reference(x, params), rtol=1e-4, atol=1e-5)

    # relax.build(database=...) is the same hook; a second database changes nothing new.
    exe2 = wb.relax.build(mod, TARGET, database=db)
    assert exe2.lowered_mod["fused_matmul_add_relu"].attrs.get("tir.is_scheduled")


def test_sampled_schedules_of_cnn_kernels_compile_and_match():
    """Legalized kernels have int64 shapes; topi's conv2d / pool axes follow them, so moving
    or inlining the padding stage never mixes int32 and int64 indices (it used to: half the
    sampled conv2d candidates failed to compile)."""
    from workbench.meta_schedule.search_strategy.base import TraceApplier
    from workbench.meta_schedule.tune_context import TuneContext

    mod, _, _, _ = make_cnn(2)
    tasks = [t for t in extract_tasks(mod, "llvm -num-cores=2")
             if "conv2d" in t.task_name or "pool" in t.task_name]
    assert len(tasks) == 2
    rng = np.random.RandomState(0)

    def run(m, inputs):
        out = wb.nd.array(np.zeros_like(inputs[-1]))
        wb.build(m, target="llvm")["main"](*[wb.nd.array(a) for a in inputs[:-1]], out)
        return out.numpy()

    for task in tasks:
        func = task.dispatched[0]["main"]
        # positive inputs: batch-norm variances must be
        args = [rng.uniform(0.5, 1.5, [int(d.value) for d in func.buffer_map[p].shape])
                .astype("float32") for p in func.params]
        expected = run(task.dispatched[0], args)
        ctx = TuneContext(task.dispatched[0], target="llvm -num-cores=2",
                          space_generator="post-order-apply", search_strategy="replay-trace",
                          rand_state=5)
        spaces = ctx.generate_design_space()
        applier = TraceApplier(ctx.mod, ctx.space_generator.postprocs)
        for i in range(4):
            sch = applier.apply(spaces[i % len(spaces)].trace.simplified(remove_postproc=True),
                                100 + i, keep_decisions=False)
            assert sch is not None, applier.summary()
            np.testing.assert_allclose(run(sch.mod, args), expected, rtol=1e-4, atol=1e-4,
                                       err_msg=f"{task.task_name} candidate {i}")
