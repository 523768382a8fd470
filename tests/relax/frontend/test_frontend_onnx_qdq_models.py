"""Models quantized by onnxruntime's ``quantize_static`` (QDQ format, per-channel int8 weights,
int8 or uint8 activations) import, take the blocked layout, run their convolutions on the
uint8 x int8 kernels where the target has AVX-512 VNNI, and match onnxruntime (issue 21).

A QDQ model computes each convolution on dequantized values; onnxruntime runs it on integer
kernels, we on integer or float32 blocked ones: they agree to float rounding before each
QuantizeLinear, so a value at a rounding boundary may land one quantization step apart (and
carry that step on). The checks allow that and no more."""
from __future__ import annotations

import numpy as np
import pytest

import frontend_zoo as zoo  # noqa: F401  (skips the module without the models extra)
import workbench as wb
from workbench import options, relax
from workbench.relax.frontend.onnx import from_onnx
from workbench.relax.transform import ConvertLayoutNCHWc

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
torch = pytest.importorskip("torch")
quantization = pytest.importorskip("onnxruntime.quantization")


class _SmallCNN(torch.nn.Module):
    """A stem (reading the plain input), a residual block of 24 channels (padded to 32 in the
    blocked layout: the padding holds the zero point), a max pool, a strided 3x3 convolution to
    40 channels reading signed values (so its input's zero point, and its padding, are not
    0.0's bottom of the range), a global average pool and a classifier."""

    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv2d(3, 24, 3, 2, 1), nn.ReLU())
        self.body = nn.Sequential(nn.Conv2d(24, 24, 3, 1, 1), nn.ReLU(),
                                  nn.Conv2d(24, 24, 3, 1, 1))
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.head = nn.Sequential(nn.Conv2d(24, 40, 3, 2, 1), nn.ReLU(),
                                  nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(40, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        y = self.body(y) + y            # no ReLU: the head reads a non-zero zero point
        y = self.head(self.pool(y))
        return self.fc(torch.flatten(y, 1))


class _Reader(quantization.CalibrationDataReader):
    """Four random calibration inputs of ``shape`` for input "x"."""

    def __init__(self, shape: tuple) -> None:
        rng = np.random.default_rng(1)
        self.feeds = iter([{"x": rng.standard_normal(shape, np.float32)} for _ in range(4)])

    def get_next(self):  # noqa: ANN201
        return next(self.feeds, None)


def _calls(mod: relax.IRModule) -> list:
    return [b.value for blk in mod["main"].body.blocks for b in blk.bindings
            if isinstance(b.value, relax.Call)]


def _qdq_model(tmp_path, activation_type):  # noqa: ANN001, ANN202
    torch.manual_seed(0)
    model = _SmallCNN().eval()
    x = torch.randn(1, 3, 30, 30)
    fp32 = tmp_path / "fp32.onnx"
    torch.onnx.export(model, (x,), str(fp32), input_names=["x"], opset_version=17,
                      dynamo=False)

    qdq = tmp_path / "qdq.onnx"
    quantization.quantize_static(str(fp32), str(qdq), _Reader((1, 3, 30, 30)),
                                 quant_format=quantization.QuantFormat.QDQ, per_channel=True,
                                 activation_type=activation_type,
                                 weight_type=quantization.QuantType.QInt8)
    return onnx.load(str(qdq)), x.numpy()


@pytest.mark.parametrize("activations", ["QInt8", "QUInt8"])
def test_quantize_static_model_runs_blocked_and_matches_onnxruntime(tmp_path, activations):
    model, x = _qdq_model(tmp_path, getattr(quantization.QuantType, activations))
    # onnxruntime with its graph optimizations off runs the QDQ graph as written (dequantize,
    # float convolution, quantize): exact QDQ semantics on any host. Its fused int8 kernels
    # without VNNI sum u8 x s8 pairs in int16, which can saturate (its quantization docs warn
    # of it): on an AVX2 Zen 3 their uint8 model's outputs were up to 3 steps off.
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), opts,
                                   providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})[0]
    mod = from_onnx(model)

    # Every convolution (their weights are dequantized constants) takes the blocked layout,
    # and so do the activations' quantize / dequantize pairs between them: int8 tensors in
    # NCHW16c. The biases (dequantized, reshaped) are reordered at compile time: the only
    # reorder is the one out of the region, before the flatten.
    layout = ConvertLayoutNCHWc(block=16, int8=False)
    calls = _calls(layout(mod))
    assert layout.converted == 4
    names = [c.op.name for c in calls]
    assert names.count("relax.layout_transform") == 1
    assert "relax.nn.conv2d_nchwc_int8" not in names
    act_dtype = "int8" if activations == "QInt8" else "uint8"
    assert sum(c.struct_info.ndim == 5 and c.struct_info.dtype == act_dtype
               for c in calls if c.op.name == "relax.quantize") >= 5

    # On an AVX-512 VNNI target the three convolutions reading quantized blocked data become
    # uint8 x int8 ones (the stem reads the plain float input and stays float32).
    for mcpu in ("znver4", "sapphirerapids"):
        layout = ConvertLayoutNCHWc(f"llvm -mcpu={mcpu}")
        names = [c.op.name for c in _calls(layout(mod))]
        assert layout.converted == 4 and names.count("relax.nn.conv2d_nchwc_int8") == 3
        assert names.count("relax.nn.conv2d") == 1
    layout = ConvertLayoutNCHWc("llvm -mcpu=haswell")
    names = [c.op.name for c in _calls(layout(mod))]
    assert layout.converted == 4 and "relax.nn.conv2d_nchwc_int8" not in names

    def run(**opts: bool) -> np.ndarray:
        with options.override(**opts):
            exe = relax.build(mod, "llvm")
        return relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x)).numpy()

    # The host's build (integer convolutions where it has VNNI), the float32 blocked one and
    # the unblocked one.
    got, float_blocked, plain = run(), run(int8_conv=False), run(convert_layout=False)
    # The classifier's output scale: the last DequantizeLinear's.
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    last = [n for n in model.graph.node if n.op_type == "DequantizeLinear"][-1]
    step = float(inits[last.input[1]])
    for out in (got, float_blocked, plain):
        assert out.shape == want.shape and out.dtype == want.dtype
        err = np.abs(out - want)

        assert err.max() <= 2 * step + 1e-6, (err.max(), step)
        assert np.mean(err > 0.5 * step) <= 0.05, (err, step)
    np.testing.assert_allclose(got, plain, atol=2 * step + 1e-6)
    np.testing.assert_allclose(float_blocked, plain, atol=2 * step + 1e-6)


def test_qoperator_model_convolutions_run_on_the_int8_kernels(tmp_path):
    """A model in onnxruntime's QOperator format (QLinearConv nodes; the importer makes each an
    int32 convolution of uint8 data and its corrections): the layout pass runs the integer
    convolutions blocked on the int8 kernels, exactly as the unblocked build computes them."""
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(3, 24, 3, 2, 1), nn.ReLU(), nn.Conv2d(24, 24, 3, 1, 1),
                          nn.ReLU(), nn.Conv2d(24, 40, 3, 2, 1), nn.Conv2d(40, 20, 1)).eval()
    x = torch.randn(1, 3, 30, 30)
    fp32, qop = tmp_path / "fp32.onnx", tmp_path / "qop.onnx"
    torch.onnx.export(model, (x,), str(fp32), input_names=["x"], opset_version=17,
                      dynamo=False)
    quantization.quantize_static(str(fp32), str(qop), _Reader((1, 3, 30, 30)),
                                 quant_format=quantization.QuantFormat.QOperator,
                                 per_channel=True, weight_type=quantization.QuantType.QInt8)
    m = onnx.load(str(qop))
    assert sum(n.op_type == "QLinearConv" for n in m.graph.node) == 4
    mod = from_onnx(m)
    layout = ConvertLayoutNCHWc("llvm -mcpu=znver4")
    names = [c.op.name for c in _calls(layout(mod))]
    assert layout.converted == layout.int8_convs == 4
    assert names.count("relax.layout_transform") == 2       # into the region and out of it
    outs = []
    for convert in (True, False):
        with options.override(convert_layout=convert):
            exe = relax.build(mod, "llvm")
        outs.append(relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x.numpy())).numpy())
    np.testing.assert_array_equal(outs[0], outs[1])
    want = ort.InferenceSession(m.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})[0]
    step = float(onnx.numpy_helper.to_array(
        {t.name: t for t in m.graph.initializer}[m.graph.node[-1].input[1]]))
    np.testing.assert_allclose(outs[0], want, atol=step + 1e-6)
