"""TVM's Relax tuning passes: ``MetaScheduleTuneTIR`` tunes a module's PrimFuncs into the
JSON database of a work dir, ``MetaScheduleApplyDatabase(work_dir)`` (TVM's spelling) applies
it, and the tuned module computes what numpy does; the passes read the target in scope when
they are made, as TVM does."""
from __future__ import annotations

import os

import numpy as np
import pytest
from ms_tuning_workloads import fast_runner, matmul

import workbench as wb
from workbench import relax
from workbench.ir.module import IRModule
from workbench.target import Target
from workbench.transform import PassContext, Sequential

TARGET = Target("llvm -num-cores=2")


def test_tuning_passes_need_a_target_in_scope():
    with pytest.raises(ValueError, match="MetaScheduleTuneTIR: no target"):
        relax.transform.MetaScheduleTuneTIR("unused", 4)
    with pytest.raises(ValueError, match="MetaScheduleTuneIRMod: no target"):
        relax.transform.MetaScheduleTuneIRMod({}, "unused", 4)
    with pytest.raises(ValueError, match="max_trials_global must be an int >= 0"):
        relax.transform.MetaScheduleTuneTIR("unused", -2, target=TARGET)
    with TARGET:
        p = relax.transform.MetaScheduleTuneTIR("unused", 4)
        apply = relax.transform.MetaScheduleApplyDatabase("some_dir")
    assert p.target == TARGET and p.info.name == "MetaScheduleTuneTIR"
    assert apply.target == TARGET and apply.work_dir == "some_dir" and apply.database is None


@pytest.mark.tuning
def test_tune_tir_pass_writes_a_database_that_apply_database_uses(tmp_path):
    work_dir = str(tmp_path)
    mod = IRModule({"mm": matmul(32).with_attr("global_symbol", "mm")})
    with TARGET:
        tune = relax.transform.MetaScheduleTuneTIR(work_dir, 4, runner=fast_runner(),
                                                   num_trials_per_iter=4, cost_model="random",
                                                   seed=0)
        apply = relax.transform.MetaScheduleApplyDatabase(work_dir)
    with PassContext(opt_level=3):
        tuned = Sequential([tune, apply])(mod)
    assert tune.tuned == ["mm"]
    assert {"database_workload.json", "database_tuning_record.json"} <= set(os.listdir(work_dir))
    with open(os.path.join(work_dir, "database_tuning_record.json")) as f:
        assert len([ln for ln in f if ln.strip()]) == 4
    assert apply.applied == ["mm"] and tuned["mm"].attrs["tir.is_scheduled"]
    assert tuned["mm"].attrs["global_symbol"] == "mm"  # the original attrs are kept
    assert not mod["mm"].attrs.get("tir.is_scheduled", False)  # the input is unchanged
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((32, 32)).astype("float32") for _ in range(2))
    c = wb.nd.empty((32, 32), "float32")
    wb.build(tuned, TARGET)["mm"](wb.nd.array(a), wb.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-4, atol=1e-4)


def _mlp():
    from workbench.relax import op
    x = relax.Var("x", relax.TensorStructInfo((8, 16), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((16, 8), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            y = bb.emit(op.matmul(x, w))
            out = bb.emit_output(op.nn.relu(y))
        bb.emit_func_output(out)
    return bb.get()


@pytest.mark.tuning
def test_static_shape_tuning_pipeline_tunes_applies_and_builds(tmp_path):
    # TVM's e2e_opt_model spelling: the pipeline by name, then compile.
    with PassContext(opt_level=3):
        mod = relax.get_pipeline("static_shape_tuning", target=TARGET, total_trials=4,
                                 work_dir=str(tmp_path))(_mlp())
    kernels = {n: f for n, f in mod.items() if not isinstance(f, relax.Function)}
    assert list(kernels) == ["fused_matmul_relu"]
    assert kernels["fused_matmul_relu"].attrs["tir.is_scheduled"]  # from the database
    with open(os.path.join(str(tmp_path), "database_tuning_record.json")) as f:
        assert 1 <= len([ln for ln in f if ln.strip()]) <= 4
    exe = wb.compile(mod, TARGET)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 16)).astype("float32")
    w = rng.standard_normal((16, 8)).astype("float32")
    got = relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x), wb.nd.array(w))
    np.testing.assert_allclose(got.numpy(), np.maximum(x @ w, 0), rtol=1e-4, atol=1e-4)
