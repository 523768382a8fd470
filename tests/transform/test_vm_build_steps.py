"""A pipeline spelled with every pass name of TVM's build pipeline (as models register their
own, e.g. ``@register_pipeline`` with a ``module_pass`` around a ``Sequential``) compiles and
computes what numpy computes; the steps Workbench's VM does not need leave the module as is."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax, tir
from workbench.relax import op
from workbench.relax.named_pipelines import PIPELINE_MAP
from workbench.transform import PassContext, Sequential, module_pass

T = relax.transform
NO_OP_STEPS = (T.RewriteDataflowReshape, T.RemovePurityChecking, T.RewriteCUDAGraph,
               T.KillAfterLastUse, T.LowerRuntimeBuiltin, T.ComputePrimValue)


def _model():
    """(n, 16) -> reshape to (n, 4, 4) and back -> matmul -> gelu -> add bias: a symbolic
    batch, a reshape kernel and an elementwise epilogue."""
    n = tir.Var("n", "int64")
    x = relax.Var("x", relax.TensorStructInfo((n, 16), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((16, 8), "float32"))
    b = relax.Var("b", relax.TensorStructInfo((8,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            r = bb.emit(op.reshape(op.reshape(x, (n, 4, 4)), (n, 16)))
            y = bb.emit(op.nn.gelu(op.matmul(r, w)))
            out = bb.emit_output(op.add(y, b))
        bb.emit_func_output(out)
    return bb.get()


def _tvm_build_pipeline(ext_mods=None):
    """TVM's default_build list, pass for pass, inside a module pass."""
    @module_pass(opt_level=0)
    def _pipeline(mod: wb.IRModule, _ctx: PassContext) -> wb.IRModule:
        return Sequential([
            T.LegalizeOps(), T.AnnotateTIROpPattern(), T.FoldConstant(), T.FuseOps(),
            T.FuseTIR(), T.DeadCodeElimination(), T.RewriteDataflowReshape(),
            T.ToNonDataflow(), T.RemovePurityChecking(), T.CallTIRRewrite(),
            T.StaticPlanBlockMemory(), T.RewriteCUDAGraph(), T.LowerAllocTensor(),
            T.KillAfterLastUse(), T.LowerRuntimeBuiltin(), T.ComputePrimValue(),
            T.VMShapeLower(), T.AttachGlobalSymbol(), T.AttachExternModules(ext_mods or []),
        ])(mod)
    return _pipeline


def _gelu(v):
    from math import erf, sqrt
    return 0.5 * v * (1 + np.vectorize(erf)(v / sqrt(2)))


def test_a_registered_pipeline_with_tvms_build_pass_names_matches_numpy():
    try:
        relax.register_pipeline("test_tvm_build_names")(_tvm_build_pipeline)
        with wb.target.Target("llvm"):
            exe = wb.compile(_model(), "llvm",
                             relax_pipeline=relax.get_pipeline("test_tvm_build_names"))
    finally:
        PIPELINE_MAP.pop("test_tvm_build_names", None)
    vm = relax.VirtualMachine(exe, wb.cpu())
    rng = np.random.default_rng(3)
    w = rng.standard_normal((16, 8)).astype("float32")
    b = rng.standard_normal(8).astype("float32")
    for batch in (1, 5):
        x = rng.standard_normal((batch, 16)).astype("float32")
        got = vm["main"](wb.nd.array(x), wb.nd.array(w), wb.nd.array(b)).numpy()
        want = _gelu(x.astype("float64") @ w) + b
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("step", NO_OP_STEPS, ids=lambda c: c.__name__)
def test_steps_the_vm_does_not_need_return_the_module_unchanged(step):
    mod = relax.get_pipeline("zero")(_model())
    p = step()
    assert p.info.name == step.__name__ and p.info.opt_level == 0
    assert p(mod) is mod


def test_attach_extern_modules_takes_only_an_empty_list():
    mod = _model()
    assert T.AttachExternModules([])(mod) is mod
    assert T.AttachExternModules()(mod) is mod
    with pytest.raises(NotImplementedError, match=r"AttachExternModules: 1 external module"):
        T.AttachExternModules([object()])
