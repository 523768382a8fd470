"""tir.build: TVM's name for compiling PrimFuncs to a runtime Module (checked with numpy)."""
import numpy as np
import pytest

import workbench
from workbench import te, tir


def _funcs():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] * 3.0, name="B")
    C = te.compute((8,), lambda i: A[i] - 1.0, name="C")
    return (te.create_prim_func([A, B]).with_attr("global_symbol", "triple"),
            te.create_prim_func([A, C]).with_attr("global_symbol", "dec"))


@pytest.mark.not_roundtrip("te.create_prim_func gives two functions made from one placeholder "
                           "the same buffer object (TVM makes one per function)")
def test_tir_build_primfunc_and_module():
    triple, dec = _funcs()
    a = workbench.nd.array(np.arange(8, dtype="float32"))
    out = workbench.nd.empty((8,), "float32")
    lib = tir.build(triple, target="llvm")
    lib["triple"](a, out)
    np.testing.assert_array_equal(out.numpy(), np.arange(8) * 3.0)
    lib = tir.build(workbench.IRModule({"triple": triple, "dec": dec}))
    lib["dec"](a, out)
    np.testing.assert_array_equal(out.numpy(), np.arange(8) - 1.0)


def test_tir_build_rejects_what_it_cannot_build():
    triple, _ = _funcs()
    with pytest.raises(ValueError, match="pipeline"):
        tir.build(triple, pipeline="custom")
    with pytest.raises(TypeError, match="PrimFunc or an IRModule"):
        tir.build("triple")
    from workbench import relax
    x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(relax.op.add(x, x)))
    with pytest.raises(TypeError, match="not PrimFuncs"):
        tir.build(bb.get())
