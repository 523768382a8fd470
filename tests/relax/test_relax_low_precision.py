"""Low-precision Relax models: int8 matmul/linear and conv2d accumulating in int32,
requantize, and bf16 matmul accumulating in float32 -- compiled, run on the VM, and compared
with numpy (exactly for the integer paths)."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax
from workbench.relax import op as R
from workbench.relax.struct_info import TensorStructInfo


def _build(make, *inputs):
    """A Relax module whose "main" takes ``inputs`` (name, shape, dtype) and returns
    ``make(*vars)``."""
    bb = relax.BlockBuilder()
    params = [relax.Var(name, TensorStructInfo(shape, dtype)) for name, shape, dtype in inputs]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(make(*params))
        bb.emit_func_output(out)
    return bb.get()


def _run(mod, *arrays):
    exe = relax.build(mod, "llvm")
    vm = relax.VirtualMachine(exe, wb.cpu())
    return vm["main"](*(wb.nd.array(a) for a in arrays)).numpy()


def _requant_ref(acc, in_scale, in_zp, out_scale, out_zp, dtype="int8"):
    q = np.round((acc.astype(np.float64) - in_zp) * (np.float64(in_scale) / out_scale))
    q = q.astype(np.int64) + out_zp
    info = np.iinfo(dtype)
    return np.clip(q, info.min, info.max).astype(dtype)


def test_int8_linear_int32_accumulation_then_requantize_is_exact():
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (8, 64)).astype("uint8")
    w = rng.integers(-128, 128, (32, 64)).astype("int8")     # (out, in), a constant weight
    in_scale, out_scale, in_zp, out_zp = 0.02, 0.7, 3, -5

    def model(xv):
        acc = R.linear(xv, relax.const(w), out_dtype="int32")
        return R.requantize(acc, relax.const(np.float32(in_scale)),
                            relax.const(np.int32(in_zp)), relax.const(np.float32(out_scale)),
                            relax.const(np.int32(out_zp)), out_dtype="int8")
    mod = _build(model, ("x", (8, 64), "uint8"))
    got = _run(mod, x)
    acc = x.astype(np.int32) @ w.astype(np.int32).T
    want = _requant_ref(acc, np.float32(in_scale), in_zp, np.float32(out_scale), out_zp)
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, want)
    # The reference evaluator agrees too.
    from workbench.relax.testing import evaluate_numpy
    np.testing.assert_array_equal(evaluate_numpy(mod, "main", x), want)


def test_int8_matmul_int32_is_exact():
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (16, 48)).astype("int8")
    b = rng.integers(-128, 128, (48, 32)).astype("int8")
    mod = _build(lambda av, bv: R.matmul(av, bv, out_dtype="int32"),
                 ("a", (16, 48), "int8"), ("b", (48, 32), "int8"))
    got = _run(mod, a, b)
    np.testing.assert_array_equal(got, a.astype(np.int32) @ b.astype(np.int32))


def test_int8_conv2d_nhwc_int32_is_exact():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 256, (1, 10, 10, 16)).astype("uint8")
    w = rng.integers(-128, 128, (3, 3, 16, 32)).astype("int8")
    mod = _build(lambda xv: R.nn.conv2d(xv, relax.const(w), padding=(1, 1),
                                        data_layout="NHWC", out_dtype="int32"),
                 ("x", (1, 10, 10, 16), "uint8"))
    got = _run(mod, x)
    xp = np.pad(x.astype(np.int64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    want = np.zeros((1, 10, 10, 32), np.int64)
    for dh in range(3):
        for dw in range(3):
            want += np.einsum("nhwc,co->nhwo", xp[:, dh:dh + 10, dw:dw + 10, :],
                              w[dh, dw].astype(np.int64))
    np.testing.assert_array_equal(got, want.astype(np.int32))


def test_requantize_per_channel_and_saturation():
    rng = np.random.default_rng(3)
    acc = rng.integers(-40000, 40000, (4, 6)).astype("int32")
    in_scale = rng.uniform(0.001, 0.01, 6).astype("float32")
    out_scale = np.float32(0.05)
    mod = _build(lambda a: R.requantize(a, relax.const(in_scale), relax.const(np.int32(0)),
                                        relax.const(out_scale), relax.const(np.int32(10)),
                                        axis=1, out_dtype="uint8"),
                 ("acc", (4, 6), "int32"))
    got = _run(mod, acc)
    want = _requant_ref(acc, in_scale[None, :], 0, out_scale, 10, "uint8")
    np.testing.assert_array_equal(got, want)
    assert got.min() == 0 and got.max() == 255            # both ends saturate


def test_requantize_checks_its_arguments():
    bb = relax.BlockBuilder()
    x = relax.Var("x", TensorStructInfo((4,), "float32"))
    with pytest.raises(relax.OpError, match="data must be an integer tensor"):
        with bb.function("main", [x]):
            bb.emit(R.requantize(x, relax.const(np.float32(1)), relax.const(np.int32(0)),
                                 relax.const(np.float32(1)), relax.const(np.int32(0))))


def test_bf16_matmul_float32_accumulation():
    import ml_dtypes
    bf = ml_dtypes.bfloat16
    rng = np.random.default_rng(4)
    a = rng.uniform(-1, 1, (16, 64)).astype(bf)
    w = rng.uniform(-1, 1, (64, 32)).astype(bf)
    mod = _build(lambda av: R.matmul(av, relax.const(w), out_dtype="float32"),
                 ("a", (16, 64), "bfloat16"))
    got = _run(mod, a)
    want = a.astype(np.float32) @ w.astype(np.float32)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_bf16_astype_round_trip_matches_ml_dtypes():
    import ml_dtypes
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(1000) * 100).astype("float32")
    mod = _build(lambda v: R.astype(R.astype(v, "bfloat16"), "float32"),
                 ("x", (1000,), "float32"))
    got = _run(mod, x)
    np.testing.assert_array_equal(got, x.astype(ml_dtypes.bfloat16).astype(np.float32))


def test_bf16_padding_constant():
    import ml_dtypes
    from workbench import te, topi
    x = te.placeholder((3, 4), "bfloat16", name="x")
    func = te.create_prim_func([x, topi.nn.pad(x, (1, 1), pad_value=0.5)])
    mod = wb.build(func, target="llvm")
    xv = np.arange(12, dtype="float32").reshape(3, 4).astype(ml_dtypes.bfloat16)
    out = wb.nd.empty((5, 6), "bfloat16")
    mod(wb.nd.array(xv), out)
    np.testing.assert_array_equal(out.numpy().astype(np.float32),
                                  np.pad(xv.astype(np.float32), 1, constant_values=0.5))


def _ort_run(node_type, inputs, attrs=None, out_dtype=None):
    """Run one ONNX node (inputs: name -> array, the first a graph input, the rest
    initializers) in onnxruntime."""
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import helper, numpy_helper
    names = list(inputs)
    first = inputs[names[0]]
    x_info = helper.make_tensor_value_info(names[0], helper.np_dtype_to_tensor_dtype(first.dtype),
                                           first.shape)
    y_info = helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(
        np.dtype(out_dtype)), first.shape)
    inits = [numpy_helper.from_array(inputs[n], n) for n in names[1:]]
    node = helper.make_node(node_type, names, ["y"], **(attrs or {}))
    graph = helper.make_graph([node], "g", [x_info], [y_info], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {names[0]: first})[0]


@pytest.mark.parametrize("out_dtype", ["uint8", "int8"])
def test_quantize_matches_onnxruntime_exactly(out_dtype):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal((6, 40)) * 30).astype("float32")
    x[0, :8] = [0.25, 0.75, 1.25, -0.25, -1.25, 1e30, -1e30, 0.0]  # exact ties; saturation
    scale = np.float32(0.5)
    zp = np.array(3 if out_dtype == "uint8" else -2, out_dtype)
    want = _ort_run("QuantizeLinear", {"x": x, "s": np.array(scale), "z": zp},
                    out_dtype=out_dtype)
    mod = _build(lambda xv: R.quantize(xv, relax.const(scale), relax.const(zp),
                                       out_dtype=out_dtype), ("x", (6, 40), "float32"))
    got = _run(mod, x)
    assert got.dtype == np.dtype(out_dtype)
    np.testing.assert_array_equal(got, want)
    from workbench.relax.testing import evaluate_numpy
    np.testing.assert_array_equal(evaluate_numpy(mod, "main", x), want)


def test_per_channel_quantize_and_dequantize_match_onnxruntime_exactly():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 5, 3)).astype("float32")
    scale = rng.uniform(0.005, 0.05, 5).astype("float32")
    zp = rng.integers(-10, 10, 5).astype("int8")
    want_q = _ort_run("QuantizeLinear", {"x": x, "s": scale, "z": zp}, {"axis": 1}, "int8")
    q = _run(_build(lambda xv: R.quantize(xv, relax.const(scale), relax.const(zp), axis=1),
                    ("x", x.shape, "float32")), x)
    np.testing.assert_array_equal(q, want_q)
    want_d = _ort_run("DequantizeLinear", {"q": q, "s": scale, "z": zp}, {"axis": 1}, "float32")
    d = _run(_build(lambda qv: R.dequantize(qv, relax.const(scale), relax.const(zp), axis=1),
                    ("q", q.shape, "int8")), q)
    assert d.dtype == np.float32
    np.testing.assert_array_equal(d, want_d)


def test_quantize_checks_its_arguments():
    from workbench.relax.op import OpError
    with pytest.raises(OpError, match="data must be a float tensor"):
        _build(lambda xv: R.quantize(xv, relax.const(np.float32(1)), relax.const(np.int8(0))),
               ("x", (4,), "int32"))
    with pytest.raises(OpError, match="out_dtype must be a float type"):
        _build(lambda xv: R.dequantize(xv, relax.const(np.float32(1)), relax.const(np.int8(0)),
                                       out_dtype="int32"), ("x", (4,), "int8"))
