"""TVM's named pipelines (``relax.get_pipeline`` / ``register_pipeline``), ``relax.build`` /
``workbench.compile`` with ``relax_pipeline`` / ``tir_pipeline`` and the target in scope, and
``with target:`` / ``Target.current`` / ``Target.from_device``. Results are checked against
numpy."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax, tir
from workbench.relax import op
from workbench.relax.named_pipelines import PIPELINE_MAP
from workbench.target import Target
from workbench.transform import PassContext, Sequential, module_pass


def _mlp():
    """matmul -> relu -> add, with a 2-d input and weight."""
    x = relax.Var("x", relax.TensorStructInfo((8, 16), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((16, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            y = bb.emit(op.matmul(x, w))
            z = bb.emit(op.nn.relu(y))
            out = bb.emit_output(op.add(z, z))
        bb.emit_func_output(out)
    return bb.get()


def _inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((8, 16)).astype("float32"),
            rng.standard_normal((16, 4)).astype("float32"))


def _run(exe):
    x, w = _inputs()
    out = relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x), wb.nd.array(w))
    return out.numpy()


def _expected():
    x, w = _inputs()
    return 2 * np.maximum(x @ w, 0)


def test_zero_pipeline_fuses_and_the_build_matches_numpy():
    fused = relax.get_pipeline("zero")(_mlp())
    kernels = [n for n, f in fused.items() if isinstance(f, tir.PrimFunc)]
    assert kernels == ["fused_matmul_relu_add"]
    assert "R.call_tir(cls.fused_matmul_relu_add" in fused["main"].script()
    for pipeline in (None, "default", "default_build"):
        exe = wb.compile(fused, "llvm", relax_pipeline=pipeline)
        assert exe.kernel_names == ["fused_matmul_relu_add"]
        np.testing.assert_allclose(_run(exe), _expected(), rtol=1e-5, atol=1e-5)


def test_default_build_does_not_fuse_and_default_does():
    plain = wb.compile(_mlp(), "llvm", relax_pipeline="default_build")
    assert sorted(plain.kernel_names) == ["add", "matmul", "relu"]
    fused = wb.compile(_mlp(), "llvm", relax_pipeline="default")
    assert fused.kernel_names == ["fused_matmul_relu_add"]
    for exe in (plain, fused):
        np.testing.assert_allclose(_run(exe), _expected(), rtol=1e-5, atol=1e-5)


def test_a_pass_object_as_the_relax_pipeline():
    lowered = Sequential([relax.get_pipeline("zero"), relax.get_pipeline("default_build")])
    exe = relax.build(_mlp(), "llvm", relax_pipeline=lowered)
    np.testing.assert_allclose(_run(exe), _expected(), rtol=1e-5, atol=1e-5)
    with pytest.raises(TypeError, match="relax_pipeline must be a pipeline name, a Pass"):
        relax.build(_mlp(), "llvm", relax_pipeline=42)


def test_unknown_pipeline_names_the_registered_ones():
    with pytest.raises(ValueError) as err:
        relax.get_pipeline("fast")
    for name in ("zero", "default", "default_build", "static_shape_tuning"):
        assert repr(name) in str(err.value)
    with pytest.raises(ValueError, match="unknown pipeline 'fast'"):
        wb.compile(_mlp(), "llvm", relax_pipeline="fast")


def test_register_pipeline_adds_a_name_once():
    try:
        @relax.register_pipeline("test_only_legalize")
        def only_legalize(scale: int = 1):
            return Sequential([relax.transform.LegalizeOps()], name=f"legalize{scale}")

        p = relax.get_pipeline("test_only_legalize", scale=3)
        assert p.info.name == "legalize3"
        assert "R.call_tir" in p(_mlp())["main"].script()
        with pytest.raises(ValueError, match="already registered"):
            relax.register_pipeline("test_only_legalize")
    finally:
        PIPELINE_MAP.pop("test_only_legalize", None)


def test_static_shape_tuning_checks_its_arguments():
    with pytest.raises(ValueError, match="total_trials must be an int >= 0"):
        relax.get_pipeline("static_shape_tuning", total_trials=-1, target="llvm")
    with pytest.raises(ValueError, match="target is required"):
        relax.get_pipeline("static_shape_tuning", total_trials=0, target=None)


def test_static_shape_tuning_with_no_trials_applies_an_empty_work_dir(tmp_path):
    # total_trials=0 skips tuning, as TVM does; the database is empty, so the kernels stay
    # as the zero pipeline made them and the default schedules apply at build time.
    p = relax.get_pipeline("static_shape_tuning", total_trials=0, target="llvm",
                           work_dir=str(tmp_path))
    mod = p(_mlp())
    assert [n for n, f in mod.items() if isinstance(f, tir.PrimFunc)] == \
        ["fused_matmul_relu_add"]
    np.testing.assert_allclose(_run(wb.compile(mod, "llvm")), _expected(), rtol=1e-5,
                               atol=1e-5)


# ---- the target in scope -------------------------------------------------------------------

def test_target_scope_current_and_from_device():
    assert Target.current() is None
    with pytest.raises(ValueError, match="no target is in scope"):
        Target.current(allow_none=False)
    outer, inner = Target("llvm -num-cores=2"), Target("llvm -num-cores=1")
    with outer:
        assert Target.current() is outer
        with inner:
            assert Target.current() is inner
        assert Target.current() is outer
    assert Target.current() is None
    assert Target.from_device(wb.cpu()) == Target("llvm")
    assert Target.from_device("cpu") == Target("llvm")
    with pytest.raises(ValueError, match="not a CPU device"):
        Target.from_device(wb.device("cuda") if hasattr(wb, "device") else "cuda")


def test_build_reads_the_target_in_scope_and_runs_its_pipeline_under_it():
    seen = []

    @module_pass(opt_level=0)
    def record_target(mod, ctx):
        seen.append(Target.current())
        return mod

    pipeline = Sequential([record_target, relax.get_pipeline("zero"),
                           relax.get_pipeline("default_build")])
    target = Target("llvm -num-cores=1")
    with target:
        exe = wb.compile(_mlp(), relax_pipeline=pipeline)
    assert seen == [target]
    exe = relax.build(_mlp(), Target("llvm -num-cores=2"), relax_pipeline=pipeline)
    assert seen[-1] == Target("llvm -num-cores=2")
    np.testing.assert_allclose(_run(exe), _expected(), rtol=1e-5, atol=1e-5)


def test_tir_only_compile_takes_a_tir_pipeline_pass():
    from workbench import te
    a = te.placeholder((64,), "float32", name="a")
    b = te.compute((64,), lambda i: a[i] * 2.0, name="b")
    func = te.create_prim_func([a, b])
    calls = []

    @tir.transform.prim_func_pass(opt_level=0)
    def count(f, mod, ctx):
        calls.append(Target.current())
        return f

    with Target("llvm"):
        rt = wb.compile(func, tir_pipeline=count)
    assert calls == [Target("llvm")]
    x = np.arange(64, dtype="float32")
    y = wb.nd.empty((64,), "float32")
    rt["main"](wb.nd.array(x), y)
    np.testing.assert_allclose(y.numpy(), 2 * x)


def test_pipelines_run_under_a_pass_context_opt_level():
    # DeadCodeElimination is at TVM's level 1: PassContext(opt_level=0) leaves it out of the
    # default pipeline, and the build still computes the right thing.
    names = []
    from workbench.instrument import pass_instrument

    @pass_instrument
    class Names:
        def run_before_pass(self, mod, info):
            names.append(info.name)

    with PassContext(opt_level=0, instruments=[Names()]):
        exe = wb.compile(_mlp(), "llvm")
    assert "DeadCodeElimination" not in names and "FuseTIR" in names
    np.testing.assert_allclose(_run(exe), _expected(), rtol=1e-5, atol=1e-5)
