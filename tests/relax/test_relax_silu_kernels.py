"""Convolutions fused with SiLU and squeeze-excite sigmoids (EfficientNet's blocks) match
PyTorch in the blocked layout, on the host (AVX-512, NCHW16c) and AVX2 (NCHW8c), and their
kernels evaluate exp inline: no libmvec call in the fused convolution."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax
from workbench.ir.module import IRModule
from workbench.tir.function import PrimFunc

torch = pytest.importorskip("torch")


class _MBConv(torch.nn.Module):
    """Expand 1x1 + SiLU, depthwise 3x3 + SiLU, squeeze-excite (mean, 1x1, SiLU, 1x1,
    sigmoid, multiply), project 1x1: EfficientNet-B0's block, with channel counts that are
    not multiples of a block (24, 6)."""

    def __init__(self, c: int = 8, e: int = 24, s: int = 6) -> None:
        super().__init__()
        nn = torch.nn
        self.expand = nn.Conv2d(c, e, 1)
        self.dw = nn.Conv2d(e, e, 3, padding=1, groups=e)
        self.se1, self.se2 = nn.Conv2d(e, s, 1), nn.Conv2d(s, e, 1)
        self.project = nn.Conv2d(e, c, 1)

    def forward(self, x):  # noqa: ANN001, ANN201
        F = torch.nn.functional
        y = F.silu(self.dw(F.silu(self.expand(x))))
        g = torch.sigmoid(self.se2(F.silu(self.se1(y.mean((2, 3), keepdim=True)))))
        return self.project(y * g) + x


@pytest.mark.parametrize("target", ["llvm", "llvm -mcpu=haswell"])
def test_mbconv_with_silu_matches_pytorch(target):
    from workbench.relax.frontend.torch import from_exported_program
    torch.manual_seed(0)
    model = _MBConv().eval()
    for p in model.parameters():      # weights large enough that sigmoid sees [-10, 10]
        p.data *= 3
    x = torch.randn(1, 8, 20, 20) * 2
    with torch.no_grad():
        want = model(x).numpy()
    mod = from_exported_program(torch.export.export(model, (x,)), keep_params_as_input=False)
    exe = relax.build(mod, target)
    got = relax.VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x.numpy()))
    got = (got[0] if isinstance(got, (tuple, list)) else got).numpy()
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())

    # the expand convolution and its SiLU are one kernel, with exp inline
    silu = [(n, f) for n, f in exe.lowered_mod.items() if isinstance(f, PrimFunc) and
            "conv2d" in str(n) and "sigmoid" in str(n) and "depthwise" not in str(n)]
    assert silu, [str(n) for n, _ in exe.lowered_mod.items()]
    name, func = silu[0]
    ll = wb.build(IRModule({str(name): func}), target=target).get_source("ll")
    assert "_ZGV" not in ll and "llvm.exp" not in ll
    lanes = 16 if wb.Target(target).has_feature("avx512f") else 8    # the host may be AVX2
    assert f"llvm.fmuladd.v{lanes}f32" in ll
