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

    class Reader(quantization.CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(1)
            self.feeds = iter([{"x": rng.standard_normal((1, 3, 30, 30), np.float32)}
                               for _ in range(4)])

        def get_next(self):  # noqa: ANN202
            return next(self.feeds, None)

    qdq = tmp_path / "qdq.onnx"
    quantization.quantize_static(str(fp32), str(qdq), Reader(),
                                 quant_format=quantization.QuantFormat.QDQ, per_channel=True,
                                 activation_type=activation_type,
                                 weight_type=quantization.QuantType.QInt8)
    return onnx.load(str(qdq)), x.numpy()


@pytest.mark.parametrize("activations", ["QInt8", "QUInt8"])
def test_quantize_static_model_runs_blocked_and_matches_onnxruntime(tmp_path, activations):
    model, x = _qdq_model(tmp_path, getattr(quantization.QuantType, activations))
    session = ort.InferenceSession(model.SerializeToString(),
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
        assert np.mean(err > 0.5 * step) <= 0.05
    np.testing.assert_allclose(got, plain, atol=2 * step + 1e-6)
    np.testing.assert_allclose(float_blocked, plain, atol=2 * step + 1e-6)
