"""FoldConstant: kernel calls on constants only are computed at compile time."""
from __future__ import annotations

import numpy as np

import workbench as wb
from workbench import relax, tir
from workbench.relax import op as R
from workbench.relax.expr import Constant
from workbench.relax.op.base import is_call_tir
from workbench.relax.transform import BindParams, FoldConstant, LegalizeOps


def _linear_module(batch):
    x = relax.Var("x", relax.TensorStructInfo((batch, 8), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((6, 8), "float32"))
    b = relax.Var("b", relax.TensorStructInfo((6,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            wt = bb.emit(R.permute_dims(w))              # folds
            wt2 = bb.emit(R.multiply(wt, R.permute_dims(R.permute_dims(wt))))  # cascades
            y = bb.emit(R.matmul(x, wt2))                # x is an input: stays
            out = bb.emit_output(R.add(y, b))
        bb.emit_func_output(out)
    return bb.get()


def _bindings(func):
    return [b for block in func.body.blocks for b in block.bindings]


def test_constant_kernel_calls_are_computed_and_the_rest_stays():
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((6, 8)).astype("float32"), rng.standard_normal(6).astype("float32")
    mod = LegalizeOps()(BindParams("main", {"w": w, "b": b})(_linear_module(3)))
    p = FoldConstant()
    out = p(mod)
    values = [bd.value for bd in _bindings(out["main"])]
    folded = [v for v in values if isinstance(v, Constant)]
    assert len(p.folded) == 4 and len(folded) == 4
    np.testing.assert_array_equal(folded[0].data.numpy(), w.T)
    np.testing.assert_allclose(folded[-1].data.numpy(), w.T * w.T, rtol=1e-6)
    calls = [v for v in values if is_call_tir(v)]
    assert [c.args[0].name_hint for c in calls] == ["matmul", "add"]
    x = rng.standard_normal((3, 8)).astype("float32")
    exe = relax.build(out)
    got = relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x)).numpy()
    np.testing.assert_allclose(got, x @ (w.T * w.T) + b, rtol=1e-5, atol=1e-5)


def test_nothing_to_fold_without_constants_or_with_symbolic_shapes():
    n = tir.SizeVar("n", "int64")
    mod = LegalizeOps()(_linear_module(n))
    p = FoldConstant()
    assert p(mod)["main"] is mod["main"] and p.folded == []


def test_relax_build_folds_bound_weight_transposes():
    rng = np.random.default_rng(1)
    w, b = rng.standard_normal((6, 8)).astype("float32"), rng.standard_normal(6).astype("float32")
    exe = relax.build(_linear_module(2), params={"w": w, "b": b})
    assert not any("transpose" in k for k in exe.kernel_names)
    x = rng.standard_normal((2, 8)).astype("float32")
    got = relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x)).numpy()
    np.testing.assert_allclose(got, x @ (w.T * w.T) + b, rtol=1e-5, atol=1e-5)


def test_a_fold_that_would_blow_up_a_constant_is_left_alone():
    b = relax.Var("b", relax.TensorStructInfo((4,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [b]):
        with bb.dataflow():
            out = bb.emit_output(R.broadcast_to(b, (512, 256, 4)))
        bb.emit_func_output(out)
    mod = LegalizeOps()(BindParams("main", {"b": np.ones(4, "float32")})(bb.get()))
    p = FoldConstant()
    p(mod)
    assert p.folded == []


def test_folding_runs_host_code_whatever_the_build_target(monkeypatch):
    """The folded kernels run here, at compile time: they are built for this host ("llvm"),
    not for the module's target, whose code this machine may not run (AVX-512 code on an
    AVX2-only host died of SIGILL inside relax.build)."""
    import importlib
    codegen_build = importlib.import_module("workbench.codegen.build")   # the module
    seen = []
    real = codegen_build.build

    def spy(mod, target=None, *args, **kwargs):
        seen.append(str(target))
        return real(mod, target, *args, **kwargs)

    monkeypatch.setattr(codegen_build, "build", spy)
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((6, 8)).astype("float32"), rng.standard_normal(6).astype("float32")
    mod = LegalizeOps()(BindParams("main", {"w": w, "b": b})(_linear_module(3)))
    p = FoldConstant("llvm -mcpu=sapphirerapids -num-cores=2")
    out = p(mod)
    assert seen == ["llvm"] and len(p.folded) == 4
    folded = [bd.value for bd in _bindings(out["main"]) if isinstance(bd.value, Constant)]
    np.testing.assert_allclose(folded[-1].data.numpy(), w.T * w.T, rtol=1e-6)
