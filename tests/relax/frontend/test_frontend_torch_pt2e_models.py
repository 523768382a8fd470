"""A CNN quantized with PyTorch's PT2E flow (torchao's ``prepare_pt2e`` / ``convert_pt2e`` with
the x86 Inductor quantizer: uint8 activations per tensor, int8 weights per channel) imports,
takes the blocked layout with its quantize / dequantize chains, runs its convolutions on the
uint8 x int8 kernels where the target has AVX-512 VNNI, and matches PyTorch's quantized model
(issue 21)."""
from __future__ import annotations

import numpy as np
import pytest

import frontend_zoo as zoo  # noqa: F401  (skips the module without the models extra)
from frontend_zoo import nn, torch
import workbench as wb
from workbench import options, relax
from workbench.relax.frontend.torch import from_exported_program
from workbench.relax.transform import ConvertLayoutNCHWc

pt2e = pytest.importorskip("torchao.quantization.pt2e.quantize_pt2e")
x86q = pytest.importorskip("torchao.quantization.pt2e.quantizer.x86_inductor_quantizer")


class _SmallCNN(nn.Module):
    """A stem, a residual block of 24 channels without a final ReLU (the pool after it reads a
    non-zero zero point), a strided 3x3 convolution to 40 channels, a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 24, 3, 2, 1)
        self.c1, self.c2 = nn.Conv2d(24, 24, 3, 1, 1), nn.Conv2d(24, 24, 3, 1, 1)
        self.pool = nn.MaxPool2d(3, 2, 1)
        self.head = nn.Conv2d(24, 40, 3, 2, 1)
        self.fc = nn.Linear(40, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.stem(x))
        y = self.c2(torch.relu(self.c1(y))) + y
        y = torch.relu(self.head(self.pool(y)))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))


def _calls(mod: relax.IRModule) -> list[str]:
    return [b.value.op.name for blk in mod["main"].body.blocks for b in blk.bindings
            if isinstance(b.value, relax.Call) and hasattr(b.value.op, "name")]


def test_pt2e_quantized_cnn_runs_blocked_on_int8_kernels_and_matches_pytorch():
    torch.manual_seed(0)
    model = _SmallCNN().eval()
    x = torch.randn(1, 3, 30, 30)
    quantizer = x86q.X86InductorQuantizer().set_global(
        x86q.get_default_x86_inductor_quantization_config())
    prepared = pt2e.prepare_pt2e(torch.export.export(model, (x,)).module(), quantizer)
    for _ in range(4):
        prepared(torch.randn(1, 3, 30, 30))
    quantized = pt2e.convert_pt2e(prepared)
    with torch.no_grad():
        want = quantized(x).numpy()
        mod = from_exported_program(torch.export.export(quantized, (x,)))

    # The importer spells PyTorch's quantize as multiply / round / add / clip / astype: all of
    # it stays blocked, so the only reorder is the one before the flatten.
    for mcpu, int8_convs in (("znver4", 3), ("haswell", 0)):
        layout = ConvertLayoutNCHWc(f"llvm -mcpu={mcpu}")
        names = _calls(layout(mod))
        assert layout.converted == 4
        assert names.count("relax.nn.conv2d_nchwc_int8") == int8_convs
        assert names.count("relax.layout_transform") == 1

    for opts in ({}, {"int8_conv": False}, {"convert_layout": False}):
        with options.override(**opts):
            exe = relax.build(mod, "llvm")
        got = relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x.numpy()))
        got = got[0] if isinstance(got, (tuple, list)) else got
        # PyTorch's reference dequantizes and convolves in float32; ours is exact in int32:
        # they agree to float rounding (the last dequantize's step is ~4e-3 here).
        np.testing.assert_allclose(got.numpy(), want, atol=1e-5, err_msg=str(opts))
