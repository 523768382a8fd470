"""Wrong inputs to a compiled function raise errors that name the function and the parameter
(TVM's ErrorContext), with TVM's error classes; the VM stays usable afterwards."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax
from workbench.runtime.relax_vm import InternalError

from relax_compile_models import MODELS, input_for


@pytest.fixture(scope="module")
def mlp():
    mod, names, params, ref = MODELS["mlp"][0]()
    exe = relax.build(mod, "llvm")
    vm = relax.VirtualMachine(exe, wb.cpu())
    return vm, [wb.nd.array(p) for p in params], ref, params


def test_relax_compile_wrong_argument_count(mlp):
    vm, params, _, _ = mlp
    with pytest.raises(InternalError, match=r"expects 5 arguments \(x, fc1.weight, fc1.bias, "
                                            r"fc2.weight, fc2.bias\), but 2"):
        vm["forward"](wb.nd.array(input_for("mlp", 2)), params[0])


def test_relax_compile_wrong_shape_names_parameter(mlp):
    vm, params, _, _ = mlp
    with pytest.raises(RuntimeError, match=r"fn=forward, loc=param\[0\], param=x.*shape\[1\] "
                                           r"mismatch to specified constant"):
        vm["forward"](wb.nd.array(np.zeros((2, 7), "float32")), *params)
    bad = [params[0], wb.nd.array(np.zeros(15, "float32")), *params[2:]]
    with pytest.raises(RuntimeError, match=r"param=fc1.bias"):
        vm["forward"](wb.nd.array(input_for("mlp", 2)), *bad)
    with pytest.raises(ValueError, match=r"param=x.*expect Tensor with ndim 2 but get 3"):
        vm["forward"](wb.nd.array(np.zeros((2, 8, 1), "float32")), *params)


def test_relax_compile_wrong_dtype_names_parameter(mlp):
    vm, params, _, _ = mlp
    with pytest.raises(ValueError, match=r"param=x.*expect Tensor with dtype float32 but get "
                                         r"float64"):
        vm["forward"](wb.nd.array(np.zeros((2, 8), "float64")), *params)


def test_relax_compile_non_tensor_names_parameter(mlp):
    vm, params, _, _ = mlp
    with pytest.raises(TypeError, match=r"param=fc2.weight.*expect a Tensor but get int"):
        vm["forward"](wb.nd.array(input_for("mlp", 2)), *params[:2], 7, params[3])


def test_relax_compile_vm_usable_after_error(mlp):
    vm, params, ref, raw = mlp
    with pytest.raises(RuntimeError):
        vm["forward"](wb.nd.array(np.zeros((2, 7), "float32")), *params)
    x = input_for("mlp", 3)
    np.testing.assert_allclose(vm["forward"](wb.nd.array(x), *params).numpy(), ref(x, raw),
                               rtol=1e-4, atol=1e-5)


def test_relax_compile_unlegalized_op_is_reported():
    from workbench.relax.vm_codegen import vm_codegen
    x = relax.Var("x", relax.TensorStructInfo((4,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        out = bb.emit(relax.op.exp(x))
        bb.emit_func_output(out)
    with pytest.raises(ValueError, match=r"still calls the op relax.exp"):
        vm_codegen(bb.get())
