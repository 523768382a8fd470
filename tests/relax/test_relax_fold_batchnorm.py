"""FoldBatchnormToConv2D: batch norm after a constant-weight convolution becomes folded weights
and a per-channel shift, in the default pipeline. Results against PyTorch (the user's path:
a model exported by torch) and numpy (an NHWC graph built by hand)."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax
from workbench.relax import op as R
from workbench.relax.transform import FoldBatchnormToConv2D
from workbench.runtime.relax_vm import VirtualMachine

torch = pytest.importorskip("torch")
from workbench.relax.frontend.torch import from_exported_program  # noqa: E402

TARGET = "llvm -num-cores=2"


class ConvBnNet(torch.nn.Module):
    """A stem conv (no bias) + BN + ReLU, a depthwise conv with a bias + BN, a residual add,
    and a conv whose output is also used elsewhere (not foldable)."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 5, 3, padding=1, bias=False)
        self.b1 = torch.nn.BatchNorm2d(5)
        self.c2 = torch.nn.Conv2d(5, 5, 3, stride=1, padding=1, groups=5, bias=True)
        self.b2 = torch.nn.BatchNorm2d(5)
        self.c3 = torch.nn.Conv2d(5, 5, 1, bias=False)
        self.b3 = torch.nn.BatchNorm2d(5)

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y)) + y
        z = self.c3(y)
        return torch.sigmoid(self.b3(z)) * z


def _model():
    torch.manual_seed(0)
    m = ConvBnNet().eval()
    for bn in (m.b1, m.b2, m.b3):   # statistics far from the identity
        bn.running_mean.uniform_(-1, 1)
        bn.running_var.uniform_(0.3, 3)
        bn.weight.data.uniform_(0.5, 2)
        bn.bias.data.uniform_(-1, 1)
    return m


def _run(mod, x, params=()):
    vm = VirtualMachine(relax.build(mod, target=TARGET), wb.cpu())
    out = vm["main"](wb.nd.array(x), *params)
    out = out[0] if isinstance(out, (list, tuple)) else out
    return out.numpy()


def test_folds_the_foldable_batch_norms_and_matches_pytorch():
    m = _model()
    x = torch.randn(1, 3, 11, 9)
    mod = from_exported_program(torch.export.export(m, (x,)))
    fold = FoldBatchnormToConv2D()
    folded = fold(mod)
    assert len(fold.folded) == 2, fold.folded            # c1 + b1, c2 (+ bias) + b2
    script = folded["main"].script()
    assert script.count("R.nn.batch_norm") == 1           # b3: c3's output is used twice
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(_run(mod, x.numpy()), want, rtol=1e-5, atol=1e-5)
    # in the default pipeline: no batch-norm kernel is left for the folded ones
    lib_mod = relax.get_default_pipeline(TARGET)(mod)
    kernels = [name for name, _ in lib_mod.items() if "batch_norm" in name]
    assert len(kernels) == 1, kernels


def test_run_time_weights_are_left_alone():
    m = _model()
    x = torch.randn(1, 3, 8, 8)
    mod = from_exported_program(torch.export.export(m, (x,)), keep_params_as_input=True)
    fold = FoldBatchnormToConv2D()
    assert fold(mod)["main"] is mod["main"] and fold.folded == []
    params = [wb.nd.array(p) for p in mod["main"].attrs["params"]]
    with torch.no_grad():
        want = m(x).numpy()
    np.testing.assert_allclose(_run(mod, x.numpy(), params), want, rtol=1e-5, atol=1e-5)


def test_nhwc_convolution_folds_along_the_last_axis():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((3, 3, 4, 6)).astype("float32")          # HWIO
    gamma, beta, mean = (rng.uniform(-1, 1, 6).astype("float32") for _ in range(3))
    var = rng.uniform(0.3, 2, 6).astype("float32")
    x = relax.Var("x", relax.TensorStructInfo((1, 7, 7, 4), "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            c = bb.emit(R.nn.conv2d(x, relax.const(w), padding=1, data_layout="NHWC"))
            t = bb.emit(R.nn.batch_norm(c, relax.const(gamma), relax.const(beta),
                                        relax.const(mean), relax.const(var), axis=3,
                                        epsilon=1e-3))
            out = bb.emit_output(R.nn.relu(bb.emit(t[0])))
        bb.emit_func_output(out)
    mod = bb.get()
    fold = FoldBatchnormToConv2D()
    fold(mod)
    assert len(fold.folded) == 1
    xv = rng.standard_normal((1, 7, 7, 4)).astype("float32")
    xp = np.pad(xv.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    conv = sum(np.einsum("nhwc,co->nhwo", xp[:, i:i + 7, j:j + 7, :], w[i, j])
               for i in range(3) for j in range(3))
    want = np.maximum((conv - mean) / np.sqrt(var + 1e-3) * gamma + beta, 0)
    np.testing.assert_allclose(_run(mod, xv), want, rtol=1e-5, atol=1e-5)
