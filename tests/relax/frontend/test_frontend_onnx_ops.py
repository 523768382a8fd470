"""The ONNX converters op family by op family, against onnxruntime: each family is one graph
with many outputs (one compile per family); the shape family has a dynamic batch
(``dim_param``) and runs at two sizes from one compile. Plus ``from_onnx``'s contract:
unsupported ops, opset, inputs, ``keep_params_in_input``."""
from __future__ import annotations

import numpy as np
import pytest

import frontend_zoo as zoo  # noqa: F401  (skips the module without the models extra)
import workbench as wb
from workbench import relax
from workbench.relax.frontend import OpNotImplemented, detach_params
from workbench.relax.frontend.onnx import from_onnx

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from onnx_graph import BOOL, F32, I64, Graph, check as _check, ort_run as _ort  # noqa: E402
from onnx_graph import rand as _rand  # noqa: E402

pytestmark = pytest.mark.slow


def test_elementwise_family():
    g = Graph()
    x, y, i, b = "x", "y", "i", "b"
    a = g("Add", g("Abs", x), g.const(0.5, "float32"))
    for op in ("Add", "Sub", "Mul", "Div", "Equal", "Less", "Greater", "LessOrEqual",
               "GreaterOrEqual", "Max", "Min", "Sum", "Mean"):
        g(op, x, y)
    g("Pow", a, y)
    g("Max", x, y, a)
    g("And", b, g("Greater", x, y))
    g("Or", b, g("Not", b))
    g("Mod", x, g.const(0.3, "float32"), fmod=1)
    g("Mod", i, g.const(3, "int64"))
    g("Div", i, g.const(4, "int64"))
    g("Where", b, x, y)
    for op in ("Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Erf", "Floor", "Ceil",
               "Round", "Sin", "Cos", "Identity", "Softplus"):
        g(op, x)
    for op in ("Log", "Sqrt", "Reciprocal"):
        g(op, a)
    g("Cast", i, to=TensorProto.FLOAT)
    g("Cast", x, to=TensorProto.INT32)
    g("CastLike", i, y)
    g("Clip", x, g.const(-0.5, "float32"), g.const(0.3, "float32"))
    g("Clip", x, "", g.const(0.2, "float32"))
    g("LeakyRelu", x, alpha=0.2)
    g("HardSigmoid", x, alpha=0.3, beta=0.4)
    g("HardSwish", x)
    g("Gelu", x)
    g("Gelu", x, approximate="tanh")
    g("Elu", x, alpha=0.7)
    g("PRelu", x, g.const(_rand(3, 1, seed=5)))
    g("PRelu", x, g.const([0.25], "float32"))
    g("Selu", x)
    g("Selu", x, alpha=1.2, gamma=0.9)
    g("Celu", x, alpha=0.6)
    g("ThresholdedRelu", x, alpha=0.4)
    g("Shrink", x, bias=0.2, lambd=0.6)
    g("Shrink", x)
    g("Sign", x)
    g("Sign", i)
    g("Softsign", x)
    g("Mish", x)
    g("Xor", b, g("Greater", x, y, out=False))
    g("IsNaN", g("Div", x, x, out=False))
    inf = g("Div", x, g.const(0.0, "float32"), out=False)
    g("IsInf", inf)
    g("IsInf", inf, detect_negative=0)
    g("IsInf", inf, detect_positive=0)
    for op in ("Sinh", "Cosh", "Tan", "Asinh", "Atan"):
        g(op, x)
    unit = g("Tanh", x, out=False)
    g("Asin", unit)
    g("Acos", unit)
    for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
        g(op, i, g.const(6, "int64"))
    g("BitwiseNot", i)
    u = g("Cast", g("Abs", i, out=False), to=TensorProto.UINT32, out=False)
    g("BitShift", u, g.const(np.asarray(2, "uint32")), direction="LEFT")
    g("BitShift", u, g.const(np.asarray([[[1, 0, 2, 3]]], "uint32")), direction="RIGHT")
    ms = "com.microsoft"
    g("BiasGelu", x, g.const(_rand(4, seed=6)), domain=ms)
    g("FastGelu", x, g.const(_rand(4, seed=7)), domain=ms)
    g("FastGelu", x, domain=ms)
    g("Acosh", g("Add", a, g.const(1.0, "float32"), out=False))
    g("Atanh", g("Mul", g("Tanh", x, out=False), g.const(0.9, "float32"), out=False))
    g("Softmax", x, axis=1)
    g("LogSoftmax", x)
    model = g.model([helper.make_tensor_value_info(n, t, [2, 3, 4])
                     for n, t in (("x", F32), ("y", F32), ("i", I64), ("b", BOOL))])
    rng = np.random.default_rng(1)
    _check(model, {"x": _rand(2, 3, 4), "y": _rand(2, 3, 4, seed=2),
                   "i": rng.integers(-9, 9, (2, 3, 4)).astype("int64"),
                   "b": rng.random((2, 3, 4)) > 0.5})


def test_nn_family():
    g = Graph()
    x = "x"
    w = g.const(_rand(6, 4, 3, 3, seed=3))
    g("Conv", x, w, g.const(_rand(6, seed=4)), pads=[1, 1, 1, 1])
    g("Conv", x, w, auto_pad="SAME_UPPER", strides=[2, 2])
    g("Conv", x, g.const(_rand(4, 2, 3, 3, seed=5)), group=2, dilations=[2, 2], pads=[2, 2, 2, 2])
    seq = g("Reshape", x, g.const([1, 4, 64], "int64"))
    g("Conv", seq, g.const(_rand(5, 4, 3, seed=6)), pads=[1, 1])
    g("MaxPool", x, kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    g("MaxPool", x, kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)
    g("MaxPool", seq, kernel_shape=[3], strides=[2])
    g("AveragePool", x, kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)
    g("AveragePool", x, kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    g("GlobalAveragePool", x)
    g("GlobalMaxPool", x)
    c = [g.const(v) for v in (_rand(4, seed=7) + 1, _rand(4, seed=8),
                              _rand(4, seed=9) * 0.1, np.abs(_rand(4, seed=10)) + 0.5)]
    g("BatchNormalization", x, *c, epsilon=1e-3)
    x3 = g("Reshape", x, g.const([4, 8, 8], "int64"), out=False)
    sk = g("SkipLayerNormalization", x3, g("Sin", x3, out=False), g.const(_rand(8, seed=23)),
           g.const(_rand(8, seed=24)), g.const(_rand(8, seed=25)), epsilon=1e-5,
           domain="com.microsoft", outputs=4, out=False)
    g("Identity", sk[0])
    g("Identity", sk[3])
    g("MatMulInteger16", g("Cast", x, to=TensorProto.INT16, out=False),
      g.const(np.arange(-12, 12).reshape(8, 3).astype("int16")), domain="com.microsoft",
      out_type=TensorProto.INT32)
    dq = g("DynamicQuantizeLinear", x, outputs=3, out=False)
    for k in range(3):
        g("Identity", dq[k])
    g("Compress", x, g.const([True, False, True, True]), axis=1)
    g("Compress", x, g.const([False, True, True]))
    g("Add", g("Cast", g("NonZero", g.const([[1, 0], [0, 3]], "float32"), out=False),
               to=TensorProto.FLOAT, out=False), g.const(0.5, "float32"))
    g("InstanceNormalization", x, g.const(_rand(4, seed=18)), g.const(_rand(4, seed=19)),
      epsilon=1e-3)
    g("LayerNormalization", x, g.const(_rand(8, seed=11)), g.const(_rand(8, seed=12)))
    g("LayerNormalization", x, g.const(_rand(4, 8, 8, seed=13)), axis=1, epsilon=1e-3)
    m2 = g("Reshape", x, g.const([8, 32], "int64"))
    g("Gemm", m2, g.const(_rand(16, 32, seed=14)), g.const(_rand(16, seed=15)), transB=1,
      alpha=0.5, beta=2.0)
    g("Gemm", m2, g.const(_rand(8, 5, seed=16)), transA=1)
    g("MatMul", x, g.const(_rand(8, 3, seed=17)))
    g("Flatten", x, axis=2)
    g("Dropout", x)
    g("ReduceMean", x, g.const([2, 3], "int64"))
    g("ReduceSum", x, g.const([1], "int64"), keepdims=0)
    g("ReduceMax", x, g.const([-1], "int64"))
    g("ReduceMin", x, g.const([0, 2], "int64"), keepdims=0)
    g("ReduceProd", x, g.const([3], "int64"))
    g("ReduceSumSquare", x, g.const([1], "int64"))
    g("ReduceL2", x, g.const([2, 3], "int64"))
    g("ReduceL1", x, g.const([1, 2], "int64"))
    g("ReduceLogSum", g("Abs", x, out=False), g.const([3], "int64"), keepdims=0)
    g("ReduceLogSumExp", x, g.const([1, 3], "int64"), keepdims=0)
    g("ReduceLogSumExp", x, g.const([2], "int64"))
    g("MeanVarianceNormalization", x)
    g("MeanVarianceNormalization", x, axes=[1, 3])
    g("GroupNormalization", x, g.const(_rand(4, seed=20)), g.const(_rand(4, seed=21)),
      num_groups=2, epsilon=1e-3)
    g("RMSNormalization", x, g.const(_rand(8, seed=22)), axis=-1)
    g("LpNormalization", x, axis=1)
    g("LpNormalization", x, axis=-1, p=1)
    g("LRN", x, size=3, alpha=1e-3, beta=0.7, bias=2.0)
    g("LRN", x, size=5)
    g("Hardmax", x, axis=1)
    g("Hardmax", x)
    g("DepthToSpace", x, blocksize=2)
    g("DepthToSpace", x, blocksize=2, mode="CRD")
    g("SpaceToDepth", x, blocksize=2)
    g("EyeLike", m2, k=3)
    g("EyeLike", m2, k=-2, dtype=TensorProto.INT64)
    g("OneHot", g.const([[0, 3], [-1, 7]], "int64"), g.const(5, "int64"),
      g.const([0.5, 2.0], "float32"), axis=1)
    g("OneHot", g("ArgMax", x, axis=1, out=False), g.const([4], "int64"),
      g.const([0, 1], "int64"))
    g("ArgMax", x, axis=1)
    g("ArgMin", x, axis=3, keepdims=0)
    model = g.model([helper.make_tensor_value_info("x", F32, [1, 4, 8, 8])], opset=23)
    _check(model, {"x": _rand(1, 4, 8, 8)})


def test_shape_family_with_a_dynamic_batch():
    """Shape arithmetic on a symbolic batch (computed at import time, the target shapes
    become ShapeExprs), slicing, gathering, joining and splitting; one compile, two sizes."""
    g = Graph()
    x = "x"
    shape = g("Shape", x, out=False)
    n = g("Gather", shape, g.const(0, "int64"), axis=0, out=False)
    target = g("Concat", g("Unsqueeze", n, g.const([0], "int64"), out=False),
               g.const([-1], "int64"), axis=0, out=False)
    flat = g("Reshape", x, target)
    g("Reshape", x, g.const([0, 4, 3], "int64"))
    g("ConstantOfShape", g("Shape", x, start=1, out=False),
      value=numpy_helper.from_array(np.asarray([2.5], "float32")))
    g("Expand", g.const(_rand(1, 3, 1, seed=3)), shape)
    g("Expand", x, g.const([1, 1, 4], "int64"))
    g("Transpose", x, perm=[2, 0, 1])
    g("Squeeze", g("Unsqueeze", x, g.const([1, -1], "int64"), out=False),
      g.const([1], "int64"))
    g("Split", x, g.const([1, 2], "int64"), axis=1, outputs=2)
    g("Split", flat, axis=1, num_outputs=3, outputs=3)
    g("Slice", x, g.const([0, 1], "int64"), g.const([2, 4], "int64"), g.const([1, 2], "int64"))
    g("Slice", x, g.const([-1], "int64"), g.const([-4], "int64"), g.const([1], "int64"),
      g.const([-1], "int64"))
    g("Gather", x, g.const([[2, 0], [1, -1]], "int64"), axis=1)
    g("Gather", x, g.const(-1, "int64"), axis=2)
    g("Tile", x, g.const([1, 2, 1], "int64"))
    g("Trilu", g("Gather", x, g.const(0, "int64"), out=False), upper=0)
    g("Trilu", x, g.const(1, "int64"))
    g("Concat", x, g("Neg", x, out=False), axis=-1)
    g("Add", g("Range", g.const(0, "int64"), g.const(5, "int64"), g.const(2, "int64"),
               out=False), g.const(1, "int64"))
    g("Range", g.const(1, "int64"), n, g.const(1, "int64"))
    g("Range", g("Mul", n, g.const(3, "int64"), out=False), g.const(0, "int64"),
      g.const(-2, "int64"))
    three_n = g("Div", g("Mul", n, g.const(6, "int64"), out=False), g.const(2, "int64"),
                out=False)
    g("Reshape", x, g("Concat", g("Unsqueeze", three_n, g.const([0], "int64"), out=False),
                      g.const([4], "int64"), axis=0, out=False))
    size_over_4 = g("Div", g("Size", x, out=False), g.const(4, "int64"), out=False)
    g("Reshape", x, g("Concat", g("Unsqueeze", size_over_4, g.const([0], "int64"),
                                  out=False), g.const([-1], "int64"), axis=0, out=False))
    model = g.model([helper.make_tensor_value_info("x", F32, ["N", 3, 4])], opset=18)
    mod = from_onnx(model)
    n_var, = {d for p in mod["main"].params for d in p.struct_info.values
              if isinstance(d, wb.tir.SizeVar)}
    assert n_var.name == "N"
    exe = relax.build(mod, "llvm")
    for batch in (2, 5):
        _check(model, {"x": _rand(batch, 3, 4, seed=batch)}, exe)


def test_shapes_read_from_tensors_at_run_time():
    """Expand / ConstantOfShape / Reshape (0 and -1) / Tile to shapes held in input tensors,
    Range over bounds in tensors: tensor_to_shape + match_cast name the dims; one compile runs
    several shapes."""
    g = Graph()
    g("Expand", "x", "s")
    g("ConstantOfShape", "s", value=numpy_helper.from_array(np.asarray([1.5], "float32")))
    g("Reshape", "x", "r")
    g("Tile", "x", "t")
    g("Range", "a", "b", "d")
    g("Range", g("Cast", "a", to=TensorProto.FLOAT, out=False),
      g("Cast", "b", to=TensorProto.FLOAT, out=False), g.const(0.75, "float32"))
    g("Add", g("Expand", "x", g("Shape", g("ConstantOfShape", "s", out=False), out=False),
               out=False), g.const(1.0, "float32"))
    model = g.model([helper.make_tensor_value_info("x", F32, [1, 3, 1]),
                     helper.make_tensor_value_info("s", I64, [3]),
                     helper.make_tensor_value_info("r", I64, [2]),
                     helper.make_tensor_value_info("t", I64, [3])] +
                    [helper.make_tensor_value_info(k, I64, []) for k in "abd"])
    exe = relax.build(from_onnx(model), "llvm")
    for s, r, t, abd in (([2, 3, 4], [0, -1], [1, 2, 3], (1, 8, 3)),
                         ([1, 1, 5], [-1, 1], [2, 1, 1], (5, -4, -2))):
        _check(model, {"x": _rand(1, 3, 1), "s": np.asarray(s, "int64"),
                       "r": np.asarray(r, "int64"), "t": np.asarray(t, "int64"),
                       **{k: np.asarray(v, "int64") for k, v in zip("abd", abd)}}, exe)


# ---- from_onnx's contract --------------------------------------------------------------------

def _two_unsupported():
    g = Graph()
    r = g("Relu", "x", out=False)
    s = g("Det", r, out=False)
    values, _ = g("TfIdfVectorizer", s, outputs=2, out=False, mode="TF", min_gram_length=1,
                  max_gram_length=1, max_skip_count=0, ngram_counts=[0], ngram_indexes=[0],
                  pool_int64s=[1])
    g("Relu", values)
    g("Det", values)
    return g.model([helper.make_tensor_value_info("x", F32, [2, 4])])


def test_unsupported_ops_are_listed_with_their_nodes():
    with pytest.raises(OpNotImplemented) as info:
        from_onnx(_two_unsupported())
    text = str(info.value)
    assert "Det: used at Det_2, Det_5" in text
    assert "TfIdfVectorizer: used at TfIdfVectorizer_3" in text
    assert {u.op for u in info.value.unsupported} == {"Det", "TfIdfVectorizer"}


def test_opset_override_and_model_type():
    model = _two_unsupported()
    with pytest.raises(NotImplementedError, match="opset 12, converted to 13"), \
            pytest.warns(UserWarning, match="lower than the model's opset 20"):
        from_onnx(model, opset=12)
    with pytest.raises(TypeError, match="onnx.ModelProto"):
        from_onnx(model.graph)


def _linear_model():
    g = Graph()
    g("Gemm", "in.put", g.const(_rand(3, 4, seed=1)), g.const(_rand(3, seed=2)), transB=1)
    g("Relu", "in.put")
    return g.model([helper.make_tensor_value_info("in.put", F32, ["batch", 4])])


def test_keep_params_in_input_shape_dict_and_names():
    model = _linear_model()
    mod = from_onnx(model, keep_params_in_input=True)
    main = mod["main"]
    assert [p.name_hint for p in main.params] == ["in_put", "c0", "c1"]
    assert main.attrs["num_input"] == 1
    mod, params = detach_params(mod)
    np.testing.assert_array_equal(params["main"][0].numpy(), _rand(3, 4, seed=1))
    exe = relax.build(mod, "llvm")
    x = _rand(5, 4, seed=3)
    vm = relax.VirtualMachine(exe, wb.cpu())
    gemm, relu = vm["main"](wb.nd.array(x), *params["main"])
    want = _ort(model, {"in.put": x})
    np.testing.assert_allclose(gemm.numpy(), want[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(relu.numpy(), want[1])

    fixed = from_onnx(model, shape_dict={"in.put": [7, 4]})["main"]
    assert [int(d.value) for d in fixed.params[0].struct_info.values] == [7, 4]
    as64 = from_onnx(model, dtype_dict={"in.put": "float64"})["main"]
    assert as64.params[0].struct_info.dtype == "float64"


def test_onnx_spans_are_node_names_and_op_types():
    model = _linear_model()
    exe = relax.build(from_onnx(model), "llvm")
    labels = sorted(s.label() for s in exe.call_sources.values())
    assert labels == ["Gemm_1", "Relu_2"]
    ops = sorted(t for s in exe.call_sources.values() for t in s.op_types)
    assert ops == ["Gemm", "Relu"]


@pytest.mark.filterwarnings("ignore::UserWarning")  # the checker on sequence outputs
def test_sequence_family_with_run_time_positions():
    """Sequences are import-time lists of tensors; positions given at run time pick among
    same-shaped items with take / where (one compile, run at several positions)."""
    g = Graph()
    x, y, z, w, pos = "x", "y", "z", "w", "pos"
    s = g("SequenceConstruct", x, y, z, out=False)
    g("SequenceAt", s, pos)
    g("SequenceAt", s, g.const(-1, "int64"))
    g("SequenceLength", s)
    g("ConcatFromSequence", g("SequenceErase", s, pos, out=False), axis=1)
    g("ConcatFromSequence", g("SequenceInsert", s, w, pos, out=False), axis=0, new_axis=1)
    g("ConcatFromSequence", g("SequenceErase", s, out=False), axis=-1)
    empty = g("SequenceEmpty", out=False, dtype=TensorProto.FLOAT)
    one = g("SequenceInsert", empty, x, out=False)
    g("SequenceAt", g("SequenceInsert", one, w, g.const(0, "int64"), out=False),
      g.const(1, "int64"))
    g("ConcatFromSequence", g("SplitToSequence", x, axis=2, keepdims=0, out=False), axis=-1,
      new_axis=1)
    g("SequenceAt", g("SplitToSequence", x, g.const([1, 2], "int64"), axis=1, out=False),
      g.const(1, "int64"))
    g("SequenceLength", g("SplitToSequence", x, g.const(3, "int64"), axis=2, out=False))
    model = g.model([helper.make_tensor_value_info(n, F32, [2, 3, 4]) for n in "xyzw"] +
                    [helper.make_tensor_value_info(pos, I64, [])], opset=17)
    exe = relax.build(from_onnx(model), "llvm")
    data = {n: _rand(2, 3, 4, seed=k) for k, n in enumerate("xyzw")}
    for p in (0, 2, -1, -3):
        _check(model, {**data, "pos": np.asarray(p, "int64")}, exe)


@pytest.mark.filterwarnings("ignore::UserWarning")  # the checker on optional types
def test_optionals_are_known_at_import_time():
    g = Graph()
    full = g("Optional", "x", out=False)
    empty = g("Optional", out=False, type=helper.make_tensor_type_proto(F32, [2, 3]))
    g("OptionalHasElement", full)
    g("OptionalHasElement", empty)
    g("Relu", g("OptionalGetElement", full, out=False))
    g("OptionalGetElement", g("Optional", g("SequenceConstruct", "x", "x", out=False),
                              out=False), out=False)
    model = g.model([helper.make_tensor_value_info("x", F32, [2, 3])], opset=18)
    _check(model, {"x": _rand(2, 3)})


def test_sequence_at_a_run_time_position_over_different_shapes_is_refused():
    g = Graph()
    g("SequenceAt", g("SequenceConstruct", "x", "y", out=False), "pos")
    model = g.model([helper.make_tensor_value_info("x", F32, [2, 3]),
                     helper.make_tensor_value_info("y", F32, [1, 3]),
                     helper.make_tensor_value_info("pos", I64, [])], opset=17)
    with pytest.raises(NotImplementedError, match="different shapes"):
        from_onnx(model)
