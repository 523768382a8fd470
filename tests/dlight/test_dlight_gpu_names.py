"""dlight.gpu: TVM's GPU rules decline CPU targets, so a CUDA default-schedule pipeline run
with the llvm target leaves the module unchanged (and it still computes what numpy does)."""
import numpy as np
import pytest

import workbench
from workbench import dlight as dl
from workbench import te
from workbench.ir import structural_equal


def _module():
    A = te.placeholder((16, 8), name="A")
    B = te.placeholder((8, 4), name="B")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((16, 4), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return workbench.IRModule({"main": te.create_prim_func([A, B, C])})


def test_gpu_rules_leave_a_cpu_module_unchanged():
    mod = _module()
    rules = (dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(), dl.gpu.GeneralReduction(),
             dl.gpu.LowBatchGEMV(4), dl.gpu.Transpose(), dl.gpu.RMSNorm(), dl.gpu.Fallback())
    p = dl.ApplyDefaultSchedule(*rules, target="llvm")
    out = p(mod)
    assert structural_equal(out["main"], mod["main"]) and p.applied == {}
    lib = workbench.compile(out, target="llvm")
    a = np.random.default_rng(0).standard_normal((16, 8)).astype("float32")
    b = np.random.default_rng(1).standard_normal((8, 4)).astype("float32")
    c = workbench.nd.empty((16, 4), "float32")
    lib["main"](workbench.nd.array(a), workbench.nd.array(b), c)
    np.testing.assert_allclose(c.numpy(), a @ b, rtol=1e-5, atol=1e-5)


def test_gpu_rules_next_to_cpu_rules_let_the_cpu_rules_schedule():
    p = dl.ApplyDefaultSchedule(dl.gpu.Matmul(), *dl.cpu.default_rules(), target="llvm")
    p(_module())
    assert p.applied and not any(r.startswith("gpu.") for r in p.applied.values())


def test_gpu_rule_applied_directly_explains():
    with pytest.raises(NotImplementedError, match="no GPU"):
        dl.gpu.Matmul().apply(_module()["main"], workbench.target.Target("llvm"), False)
