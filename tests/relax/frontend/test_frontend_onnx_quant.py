"""The ONNX importer's quantized ops against onnxruntime: QuantizeLinear / DequantizeLinear,
QLinearMatMul, QLinearConv, MatMulInteger and ConvInteger -- exactly (the integer products
are exact, the requantization is onnxruntime's float32 arithmetic)."""
from __future__ import annotations

import numpy as np
import pytest

import frontend_zoo as zoo  # noqa: F401  (skips the module without the models extra)
import workbench as wb
from workbench import relax
from workbench.relax.frontend.onnx import from_onnx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

_TYPES = {np.dtype("float32"): TensorProto.FLOAT, np.dtype("uint8"): TensorProto.UINT8,
          np.dtype("int8"): TensorProto.INT8, np.dtype("int32"): TensorProto.INT32}


def _model(nodes, inputs: dict, inits: dict, outputs: dict, opset: int = 13):
    """A graph of ``nodes``; inputs / outputs: name -> (dtype, shape); inits: name -> array."""
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(n, _TYPES[np.dtype(d)], s) for n, (d, s) in inputs.items()],
        [helper.make_tensor_value_info(n, _TYPES[np.dtype(d)], s)
         for n, (d, s) in outputs.items()],
        [numpy_helper.from_array(np.asarray(v), n) for n, v in inits.items()])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def _exact_reference(model, feeds):
    """``model`` with the int8 weights of uint8 x int8 QLinearMatMul / QLinearConv nodes
    re-expressed as uint8 (``w + 128``, zero point ``+ 128``): the same products exactly.
    Without VNNI, onnxruntime's u8 x s8 kernels sum pairs of products in saturating int16
    (``vpmaddubsw``; seen on an AVX2 AMD host: 363 of 1,024 outputs off by up to 32), while
    its u8 x u8 kernels are exact."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    inits = {t.name: t for t in m.graph.initializer}
    for node in m.graph.node:
        if node.op_type not in ("QLinearMatMul", "QLinearConv"):
            continue
        act = feeds.get(node.input[0])
        if act is None or act.dtype != np.uint8:
            continue
        for name in (node.input[3], node.input[5]):   # the weight and its zero point
            t = inits.get(name)
            if t is None or t.data_type != TensorProto.INT8:
                continue
            v = numpy_helper.to_array(t).astype(np.int16) + 128
            t.CopyFrom(numpy_helper.from_array(v.astype(np.uint8), name))
    return m


def _compare(model, feeds):
    want = ort.InferenceSession(_exact_reference(model, feeds).SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    exe = relax.build(from_onnx(model), "llvm")
    out = relax.VirtualMachine(exe, wb.cpu())["main"](*[wb.nd.array(v) for v in feeds.values()])
    got = [o.numpy() for o in (out if isinstance(out, (tuple, list)) else (out,))]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype, g.shape, w.shape)
        np.testing.assert_array_equal(g, w)


def test_quantize_dequantize_per_tensor_and_per_channel():
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 4, 5)) * 4).astype("float32")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zu"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "zu"], ["d"]),
             helper.make_node("QuantizeLinear", ["x", "sc", "zc"], ["qc"], axis=1),
             helper.make_node("DequantizeLinear", ["qc", "sc", "zc"], ["dc"], axis=1)]
    inits = {"s": np.float32(0.05), "zu": np.uint8(120),
             "sc": rng.uniform(0.01, 0.1, 4).astype("float32"),
             "zc": rng.integers(-20, 20, 4).astype("int8")}
    outs = {"q": ("uint8", [2, 4, 5]), "d": ("float32", [2, 4, 5]),
            "qc": ("int8", [2, 4, 5]), "dc": ("float32", [2, 4, 5])}
    _compare(_model(nodes, {"x": ("float32", [2, 4, 5])}, inits, outs), {"x": x})


@pytest.mark.parametrize("a_dtype,b_dtype,za,zb,y_dtype", [
    ("uint8", "int8", 131, 0, "uint8"),       # the VNNI form as it is
    ("uint8", "uint8", 7, 128, "uint8"),      # uint8 weights with a zero point
    ("int8", "int8", -3, 5, "int8"),          # int8 activations, both zero points
])
def test_qlinear_matmul_is_exact(a_dtype, b_dtype, za, zb, y_dtype):
    rng = np.random.default_rng(1)
    info_a, info_b = np.iinfo(a_dtype), np.iinfo(b_dtype)
    a = rng.integers(info_a.min, info_a.max + 1, (2, 16, 64)).astype(a_dtype)
    b = rng.integers(info_b.min, info_b.max + 1, (64, 32)).astype(b_dtype)
    inits = {"as": np.float32(0.02), "az": np.array(za, a_dtype), "b": b,
             "bs": np.float32(0.003), "bz": np.array(zb, b_dtype),
             "ys": np.float32(0.07), "yz": np.array(1, y_dtype)}
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                            ["y"])
    model = _model([node], {"a": (a_dtype, [2, 16, 64])}, inits, {"y": (y_dtype, [2, 16, 32])})
    _compare(model, {"a": a})


def test_matmul_integer_with_a_runtime_weight_is_exact():
    rng = np.random.default_rng(2)
    a = rng.integers(0, 256, (8, 48)).astype("uint8")
    b = rng.integers(0, 256, (48, 16)).astype("uint8")
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    model = _model([node], {"a": ("uint8", [8, 48]), "b": ("uint8", [48, 16])},
                   {"az": np.uint8(100), "bz": np.uint8(3)}, {"y": ("int32", [8, 16])})
    _compare(model, {"a": a, "b": b})


@pytest.mark.parametrize("group,strides,w_dtype,zw", [
    (1, [1, 1], "int8", None),        # symmetric per-channel int8 weights (the common case)
    (1, [2, 2], "uint8", 121),        # uint8 weights with a zero point, stride 2
    (2, [1, 1], "int8", 3),           # grouped, weight zero point
])
def test_qlinear_conv_is_exact(group, strides, w_dtype, zw):
    rng = np.random.default_rng(3)
    c, o = 8, 16
    x = rng.integers(0, 256, (1, c, 9, 9)).astype("uint8")
    info = np.iinfo(w_dtype)
    w = rng.integers(info.min, info.max + 1, (o, c // group, 3, 3)).astype(w_dtype)
    ws = rng.uniform(0.001, 0.01, o).astype("float32") if zw is None else np.float32(0.004)
    wz = np.zeros(o, w_dtype) if zw is None else np.array(zw, w_dtype)
    bias = rng.integers(-5000, 5000, o).astype("int32")
    inits = {"xs": np.float32(0.02), "xz": np.uint8(119), "w": w, "ws": ws, "wz": wz,
             "ys": np.float32(0.4), "yz": np.uint8(5), "bias": bias}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz",
                                            "bias"], ["y"], pads=[1, 1, 1, 1],
                            strides=strides, group=group)
    out = 9 // strides[0] + (1 if strides[0] == 2 else 0)
    model = _model([node], {"x": ("uint8", [1, c, 9, 9])}, inits,
                   {"y": ("uint8", [1, o, out, out])})
    _compare(model, {"x": x})


def test_conv_integer_is_exact():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 256, (1, 4, 7, 7)).astype("uint8")
    w = rng.integers(0, 256, (6, 4, 3, 3)).astype("uint8")
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 0, 1, 2])
    model = _model([node], {"x": ("uint8", [1, 4, 7, 7])},
                   {"w": w, "xz": np.uint8(17), "wz": np.uint8(200)},
                   {"y": ("int32", [1, 6, 7, 8])})
    _compare(model, {"x": x})


@pytest.mark.tuning
def test_tuned_qlinear_matmul_packs_its_weight_for_the_int8_kernels(tmp_path):
    # The imported uint8 x int8 product is what the tuner's int8 kernels take: the constant
    # weight is packed once at compile time and the result still matches onnxruntime.
    from workbench.meta_schedule.relax_integration import compile_relax, tune_relax
    from workbench.target import Target
    from workbench.tir import PrimFunc
    if not Target("llvm").has_feature("avx512vnni"):
        pytest.skip("host lacks AVX-512 VNNI")
    rng = np.random.default_rng(5)
    inits = {"as": np.float32(0.02), "az": np.uint8(131),
             "b": rng.integers(-128, 128, (64, 32)).astype("int8"), "bs": np.float32(0.003),
             "bz": np.int8(0), "ys": np.float32(0.07), "yz": np.uint8(128)}
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                            ["y"])
    model = _model([node], {"a": ("uint8", [16, 64])}, inits, {"y": ("uint8", [16, 32])})
    mod = from_onnx(model)
    target = "llvm -num-cores=2"
    from workbench.meta_schedule.cost_model import XGBModel
    from workbench.meta_schedule.runner import EvaluatorConfig, LocalRunner
    runner = LocalRunner(evaluator_config=EvaluatorConfig(number=1, repeat=1, min_repeat_ms=1))
    # The int8 kernels' design space is what is checked: no default-schedule trial first (at
    # this size it can measure within noise of them in a single-call timing).
    db = tune_relax(mod, None, target, str(tmp_path), max_trials_global=4,
                    num_trials_per_iter=4, strategy="replay-trace", seed=1, runner=runner,
                    cost_model=XGBModel(num_tuning_cores=1), default_schedule_first=False)
    exe = compile_relax(db, mod, target)
    scripts = "".join(f.script() for _, f in exe.lowered_mod.items() if isinstance(f, PrimFunc))
    assert "llvm.x86.tdpbusd" in scripts or "llvm.x86.avx512.vpdpbusd.512" in scripts
    assert "layout_rewrite_preproc" not in scripts
    a = rng.integers(0, 256, (16, 64)).astype("uint8")
    got = relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(a)).numpy()
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]
    np.testing.assert_array_equal(got, want)
