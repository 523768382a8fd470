"""relax.call_dps_packed and nn.extern / nn.tensor_ir_op / nn.tensor_expr_op: Relax calls of
code outside the op library, run on the VM and by the numpy evaluator, checked against numpy."""
import numpy as np
import pytest

import workbench
from workbench import relax, te, topi
from workbench.relax.frontend import nn
from workbench.relax.testing import evaluate_numpy


@pytest.fixture(scope="module")
def registered():
    calls = []

    def linear(x, w, b, out):
        calls.append(tuple(x.shape))
        out.copyfrom(x.numpy() @ w.numpy().T + b.numpy())

    def split_sign(x, pos, neg):
        v = x.numpy()
        pos.copyfrom(np.maximum(v, 0))
        neg.copyfrom(np.minimum(v, 0))

    workbench.register_func("test_dps.linear", linear, override=True)
    workbench.register_func("test_dps.split_sign", split_sign, override=True)
    yield calls
    workbench.runtime.remove_global_func("test_dps.linear")
    workbench.runtime.remove_global_func("test_dps.split_sign")


def _run(mod, name, *arrays):
    vm = relax.VirtualMachine(workbench.compile(mod, target="llvm"), workbench.cpu())
    out = vm[name](*[workbench.nd.array(a) for a in arrays])
    return tuple(o.numpy() for o in out) if isinstance(out, (tuple, list)) else out.numpy()


def _linear_module():
    n = workbench.tir.Var("n", "int64")
    x = relax.Var("x", relax.TensorStructInfo((n, 8), "float32"))
    w = relax.Var("w", relax.TensorStructInfo((4, 8), "float32"))
    b = relax.Var("b", relax.TensorStructInfo((4,), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            lv = bb.emit(relax.call_dps_packed("test_dps.linear", [x, w, b],
                                               out_sinfo=relax.TensorStructInfo((n, 4), "float32")))
            gv = bb.emit_output(bb.emit_te(topi.nn.relu, lv))
        bb.emit_func_output(gv)
    return bb.get()


def test_call_dps_packed_runs_on_the_vm_and_in_the_evaluator(registered):
    mod = _linear_module()
    text = mod.script()
    assert 'R.call_dps_packed("test_dps.linear", (x, w, b), out_sinfo=R.Tensor((n, 4)' in text
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 8)).astype("float32")
    w = rng.standard_normal((4, 8)).astype("float32")
    b = rng.standard_normal(4).astype("float32")
    ref = np.maximum(x @ w.T + b, 0)
    np.testing.assert_allclose(_run(mod, "main", x, w, b), ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(evaluate_numpy(mod, "main", x, w, b), ref, rtol=1e-5, atol=1e-5)
    assert registered[-1] == (5, 8)      # the packed function saw the dynamic batch


def test_call_dps_packed_two_outputs(registered):
    x = relax.Var("x", relax.TensorStructInfo((6,), "float32"))
    bb = relax.BlockBuilder()
    si = relax.TensorStructInfo((6,), "float32")
    with bb.function("main", [x]):
        with bb.dataflow():
            t = bb.emit(relax.call_dps_packed("test_dps.split_sign", x, out_sinfo=[si, si]))
            gv = bb.emit_output(relax.op.subtract(relax.TupleGetItem(t, 0),
                                                  relax.TupleGetItem(t, 1)))
        bb.emit_func_output(gv)
    data = np.array([-2, -1, 0, 1, 2, 3], "float32")
    np.testing.assert_array_equal(_run(bb.get(), "main", data), np.abs(data))


def test_call_dps_packed_checks_arguments():
    x = relax.Var("x", relax.TensorStructInfo((2,), "float32"))
    with pytest.raises(TypeError, match="registered function's name"):
        relax.call_dps_packed(3, [x], relax.TensorStructInfo((2,), "float32"))
    with pytest.raises(TypeError, match="TensorStructInfo"):
        relax.call_dps_packed("f", [x], relax.ShapeStructInfo((2,)))
    with pytest.raises(ValueError, match="empty"):
        relax.call_dps_packed("f", [x], [])


def _tir_linear():
    M, N, K = te.var("M", "int64"), te.var("N", "int64"), te.var("K", "int64")
    X = te.placeholder((M, K), name="X")
    W = te.placeholder((N, K), name="W")
    B = te.placeholder((N,), name="B")
    k = te.reduce_axis((0, K), name="k")
    Z0 = te.compute((M, N), lambda i, j: te.sum(X[i, k] * W[j, k], axis=k), name="linear")
    Z = te.compute((M, N), lambda i, j: Z0[i, j] + B[j], name="add")
    return te.create_prim_func([X, W, B, Z])


class _WithExtern(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 12)
        self.fc2 = nn.Linear(12, 5)

    def forward(self, x):
        n = x.shape[0]
        x = nn.extern("test_dps.linear", [x, self.fc1.weight, self.fc1.bias],
                      out=nn.Tensor.placeholder((n, 12), "float32"))
        x = nn.tensor_expr_op(topi.nn.relu, "relu", [x], attrs={"my_attr": 1})
        return nn.tensor_ir_op(_tir_linear(), "tir_linear", [x, self.fc2.weight, self.fc2.bias],
                               out=nn.Tensor.placeholder((n, 5), "float32"))


def test_nn_extern_tensor_expr_and_tensor_ir_ops(registered):
    mod, params = _WithExtern().export_tvm(
        {"forward": {"x": nn.spec.Tensor(("n", 16), "float32")}})
    assert mod["relu"].attrs["my_attr"] == 1
    text = mod["forward"].script()
    assert "R.call_dps_packed(\"test_dps.linear\"" in text and "cls.tir_linear" in text
    rng = np.random.default_rng(1)
    ps = [rng.standard_normal(p.shape).astype("float32") for _, p in params]
    x = rng.standard_normal((3, 16)).astype("float32")
    w1, b1, w2, b2 = ps
    ref = np.maximum(x @ w1.T + b1, 0) @ w2.T + b2
    np.testing.assert_allclose(_run(mod, "forward", x, *ps), ref, rtol=1e-4, atol=1e-4)


def test_nn_escape_hatches_check_arguments():
    class Bad(nn.Module):
        def __init__(self, kind):
            super().__init__()
            self.kind = kind

        def forward(self, x):
            if self.kind == "out":
                return nn.extern("f", [x], out=(x.shape[0], 4))
            if self.kind == "arg":
                return nn.extern("f", [object()], out=nn.Tensor.placeholder((2,), "float32"))
            return nn.tensor_ir_op(lambda: None, "g", [x], out=x)

    spec = {"forward": {"x": nn.spec.Tensor((2, 4), "float32")}}
    with pytest.raises(TypeError, match="placeholder"):
        Bad("out").export_tvm(spec)
    with pytest.raises(TypeError, match="argument 0"):
        Bad("arg").export_tvm(spec)
    with pytest.raises(TypeError, match="tir.PrimFunc"):
        Bad("prim").export_tvm(spec)
    with pytest.raises(RuntimeError, match="tracing"):
        nn.extern("f", [], out=nn.Tensor.placeholder((2,), "float32"))


def test_call_pure_packed_returns_the_functions_value():
    def scaled_sum(x, y):
        return workbench.nd.array(x.numpy() * 2 + y.numpy())

    workbench.register_func("test_dps.scaled_sum", scaled_sum, override=True)
    try:
        si = relax.TensorStructInfo((3,), "float32")
        x, y = relax.Var("x", si), relax.Var("y", si)
        bb = relax.BlockBuilder()
        with bb.function("main", [x, y]):
            with bb.dataflow():
                lv = bb.emit(relax.call_pure_packed("test_dps.scaled_sum", x, y, sinfo_args=si))
                gv = bb.emit_output(relax.op.add(lv, x))
            bb.emit_func_output(gv)
        mod = bb.get()
        assert 'R.call_pure_packed("test_dps.scaled_sum", x, y, sinfo_args=(R.Tensor((3,)' in \
            mod.script()
        a = np.array([1, 2, 3], "float32")
        b = np.array([10, 20, 30], "float32")
        np.testing.assert_array_equal(_run(mod, "main", a, b), a * 3 + b)
        np.testing.assert_array_equal(evaluate_numpy(mod, "main", a, b), a * 3 + b)
    finally:
        workbench.runtime.remove_global_func("test_dps.scaled_sum")
    with pytest.raises(ValueError, match="sinfo_args"):
        relax.call_pure_packed("f", x)
    with pytest.raises(TypeError, match="argument 0"):
        relax.call_pure_packed("f", 3, sinfo_args=si)


def test_extern_module_types_exist_and_constructing_one_says_what_to_use():
    from typing import List

    def pipeline(ext_mods: List[nn.ExternModule] = None):  # annotations name the type
        return ext_mods or []

    assert pipeline() == []
    assert issubclass(nn.ObjectModule, nn.ExternModule)
    assert issubclass(nn.SourceModule, nn.ExternModule)
    for cls in (nn.ExternModule, nn.ObjectModule, nn.SourceModule):
        with pytest.raises(NotImplementedError, match=rf"nn.{cls.__name__}: .*nn.extern"):
            cls({"f": lambda a: a})
