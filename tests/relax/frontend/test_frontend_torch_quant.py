"""The PyTorch importer's ``quantized_decomposed`` quantize / dequantize ops (PT2E quantized
programs), per tensor and per channel, exactly against PyTorch."""
from __future__ import annotations

import numpy as np

import frontend_zoo as zoo  # noqa: F401  (skips the module without the models extra)
from frontend_zoo import nn, torch
import workbench as wb
from workbench import relax
from workbench.relax.frontend.torch import from_exported_program

import torch.ao.quantization.fx._decomposed  # noqa: E402,F401  (registers the ops)

qd = torch.ops.quantized_decomposed


class QDQ(nn.Module):
    """Activations quantized per tensor (uint8), a weight dequantized per channel (int8), the
    linear in float between them, its output quantized again (int8)."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(0)
        w = torch.randn(24, 40, generator=g)
        scales = w.abs().amax(dim=1) / 127
        self.register_buffer("w_scales", scales)
        self.register_buffer("w_zps", torch.zeros(24, dtype=torch.int64))
        self.register_buffer("w_q", qd.quantize_per_channel(
            w, scales, self.w_zps, 0, -127, 127, torch.int8))
        self.register_buffer("x_scales", torch.tensor([0.03, 0.05, 0.02], dtype=torch.float64))
        self.register_buffer("x_zps", torch.tensor([1, -2, 0], dtype=torch.int64))

    def forward(self, x):
        q = qd.quantize_per_tensor(x, 0.0173, 131, 0, 255, torch.uint8)
        xd = qd.dequantize_per_tensor(q, 0.0173, 131, 0, 255, torch.uint8)
        wd = qd.dequantize_per_channel(self.w_q, self.w_scales, self.w_zps, 0, -127, 127,
                                       torch.int8)
        y = torch.nn.functional.linear(xd, wd)
        yq = qd.quantize_per_tensor(y, 0.05, -3, -128, 127, torch.int8)
        # per channel along axis 1 with float64 scales (promotes the product)
        xc = qd.quantize_per_channel(x[:, :3], self.x_scales, self.x_zps, 1, -128, 127,
                                     torch.int8)
        xcd = qd.dequantize_per_channel(xc, self.x_scales, self.x_zps, 1, -128, 127,
                                        torch.int8)
        return q, xd, yq, xc, xcd


def test_quantized_decomposed_ops_match_pytorch_exactly():
    model = QDQ().eval()
    x = torch.randn(5, 40, generator=torch.Generator().manual_seed(1)) * 3
    x[0, :4] = torch.tensor([0.0173 * 0.5, 0.0173 * 1.5, 1e9, -1e9])     # ties, saturation
    with torch.no_grad():
        want = model(x)
        ep = torch.export.export(model, (x,))
    mod = from_exported_program(ep)
    exe = relax.build(mod, "llvm")
    got = relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x.numpy()))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = g.numpy(), w.numpy()
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)
