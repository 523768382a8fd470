"""FoldChannelScaleToConv2D (a squeeze-excite's ``x * s`` moved onto the next convolution's
weights) and FuseOps' per-argument edge patterns (that scale is not fused into the 1x1
convolution over the pooled map). Results against PyTorch (a model exported by torch, the
user's path) and numpy (graphs built by hand, NCHW and NHWC)."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import relax
from workbench.relax import op as R
from workbench.relax.transform import FoldChannelScaleToConv2D
from workbench.runtime.relax_vm import VirtualMachine

TARGET = "llvm -num-cores=2"


def _plain_build(mod, target=TARGET):
    """Built in the graph's own layout (the blocked one has its own test, from torch)."""
    return relax.build(mod, target=target,
                       relax_pipeline=relax.get_default_pipeline(target, convert_layout=False))


def _run(mod, *args, target=TARGET):
    vm = VirtualMachine(_plain_build(mod, target), wb.cpu())
    out = vm["main"](*(wb.nd.array(a) for a in args))
    out = out[0] if isinstance(out, (list, tuple)) else out
    return out.numpy()


def _conv_nchw(x, w, groups=1):
    """numpy conv2d, stride 1, no padding (a 1x1 or valid convolution)."""
    n, c, h, wd = x.shape
    o, ci, kh, kw = w.shape
    out = np.zeros((n, o, h - kh + 1, wd - kw + 1))
    per = o // groups
    for g in range(groups):
        xs = x[:, g * ci:(g + 1) * ci].astype(np.float64)
        for dy in range(kh):
            for dx in range(kw):
                patch = xs[:, :, dy:dy + h - kh + 1, dx:dx + wd - kw + 1]
                out[:, g * per:(g + 1) * per] += np.einsum(
                    "nchw,oc->nohw", patch, w[g * per:(g + 1) * per, :, dy, dx])
    return out


def _scaled_conv(x_shape, s_shape, w, *, layout="NCHW", kernel_layout="OIHW", groups=1,
                 use_twice=False):
    x = relax.Var("x", relax.TensorStructInfo(x_shape, "float32"))
    s = relax.Var("s", relax.TensorStructInfo(s_shape, "float32"))
    bb = relax.BlockBuilder()
    with bb.function("main", [x, s]):
        with bb.dataflow():
            y = bb.emit(R.multiply(x, s))
            c = bb.emit(R.nn.conv2d(y, relax.const(w), groups=groups, data_layout=layout,
                                    kernel_layout=kernel_layout))
            if use_twice:
                c = bb.emit(R.add(c, y))
            o = bb.emit_output(c)
        bb.emit_func_output(o)
    return bb.get()


def _folded(mod):
    p = FoldChannelScaleToConv2D()
    p(mod)
    return p.folded


def test_folds_an_nchw_scale_into_the_weights_and_matches_numpy():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 12, 20, 18)).astype("float32")
    s = rng.uniform(0.1, 1.0, (1, 12, 1, 1)).astype("float32")
    w = rng.standard_normal((5, 12, 3, 3)).astype("float32")
    mod = _scaled_conv(x.shape, s.shape, w)
    assert len(_folded(mod)) == 1
    got = _run(mod, x, s)
    np.testing.assert_allclose(got, _conv_nchw(x * s, w), rtol=1e-4, atol=1e-4)
    # the product is the weights' (its output has the weight's 5 x 12 x 3 x 3 values); no
    # kernel multiplies the map any more
    lowered = _plain_build(mod).lowered_mod
    products = [f for gv, f in lowered.functions.items() if "multiply" in str(
        getattr(gv, "name_hint", gv))]
    assert len(products) == 1
    out = products[0].buffer_map[products[0].params[-1]]
    assert int(np.prod([d.value for d in out.shape])) < x.size


def test_folds_an_nhwc_scale_and_matches_numpy():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 8, 8, 6)).astype("float32")
    s = rng.uniform(0.1, 1.0, (1, 1, 1, 6)).astype("float32")
    w = rng.standard_normal((1, 1, 6, 4)).astype("float32")        # HWIO
    mod = _scaled_conv(x.shape, s.shape, w, layout="NHWC", kernel_layout="HWIO")
    assert len(_folded(mod)) == 1
    want = _conv_nchw((x * s).transpose(0, 3, 1, 2), w.transpose(3, 2, 0, 1))
    np.testing.assert_allclose(_run(mod, x, s), want.transpose(0, 2, 3, 1), rtol=1e-4,
                               atol=1e-4)


@pytest.mark.parametrize("case", ["used_twice", "grouped", "per_sample", "per_pixel",
                                  "weight_larger_than_map"])
def test_leaves_what_it_cannot_fold_and_still_computes_it(case):
    rng = np.random.default_rng(2)
    x_shape, s_shape, w_shape, groups = (1, 8, 6, 6), (1, 8, 1, 1), (8, 8, 1, 1), 1
    if case == "grouped":
        w_shape, groups = (8, 4, 1, 1), 2
    elif case == "per_sample":          # one scale per sample: no shared weight
        x_shape, s_shape = (2, 8, 6, 6), (2, 8, 1, 1)
    elif case == "per_pixel":
        s_shape = (1, 8, 6, 6)
    elif case == "weight_larger_than_map":   # 64 x 8 weights over an 8 x 2 x 2 map
        x_shape, w_shape = (1, 8, 2, 2), (64, 8, 1, 1)
    x = rng.standard_normal(x_shape).astype("float32")
    s = rng.uniform(0.1, 1.0, s_shape).astype("float32")
    w = rng.standard_normal(w_shape).astype("float32")
    mod = _scaled_conv(x_shape, s_shape, w, groups=groups, use_twice=case == "used_twice")
    assert _folded(mod) == []
    want = _conv_nchw(x * s, w, groups)
    if case == "used_twice":
        want = want + x * s
    np.testing.assert_allclose(_run(mod, x, s), want, rtol=1e-4, atol=1e-4)


def _fused_names(mod):
    from workbench.relax.transform import AnnotateTIROpPattern, FuseOps, LegalizeOps
    fused = FuseOps()(AnnotateTIROpPattern()(LegalizeOps()(mod)))
    return sorted(str(gv.name_hint if hasattr(gv, "name_hint") else gv)
                  for gv in fused.functions)


def test_a_broadcast_scale_is_not_fused_into_the_convolution_it_scales_by():
    # squeeze-excite's excitation: a 1x1 convolution over the pooled (1 x 1) map, its sigmoid,
    # and the map times it -- the map is not the convolution's epilogue
    x = relax.Var("x", relax.TensorStructInfo((1, 8, 6, 6), "float32"))
    p = relax.Var("p", relax.TensorStructInfo((1, 4, 1, 1), "float32"))
    bb = relax.BlockBuilder()
    w = relax.const(np.ones((8, 4, 1, 1), "float32"))
    with bb.function("main", [x, p]):
        with bb.dataflow():
            c = bb.emit(R.nn.conv2d(p, w))
            g = bb.emit(R.sigmoid(c))
            y = bb.emit(R.multiply(x, g))
            o = bb.emit_output(y)
        bb.emit_func_output(o)
    names = _fused_names(bb.get())
    assert "fused_conv2d_sigmoid" in names, names
    assert not any("conv2d" in n and "multiply" in n for n in names), names


def test_elementwise_epilogues_still_fuse_into_the_convolution():
    # SiLU's x * sigmoid(x) and a residual add read the convolution's output elementwise
    x = relax.Var("x", relax.TensorStructInfo((1, 8, 6, 6), "float32"))
    r = relax.Var("r", relax.TensorStructInfo((1, 8, 6, 6), "float32"))
    bb = relax.BlockBuilder()
    w = relax.const(np.ones((8, 8, 1, 1), "float32"))
    b = relax.const(np.ones((1, 8, 1, 1), "float32"))
    with bb.function("main", [x, r]):
        with bb.dataflow():
            c = bb.emit(R.add(R.nn.conv2d(x, w), b))
            y = bb.emit(R.add(R.multiply(c, R.sigmoid(c)), r))
            o = bb.emit_output(y)
        bb.emit_func_output(o)
    names = _fused_names(bb.get())
    assert any("conv2d" in n and "sigmoid" in n and "multiply" in n for n in names), names


torch = pytest.importorskip("torch")


class SqueezeExcite(torch.nn.Module):
    """EfficientNet's block tail: depthwise conv, SiLU, squeeze-excite (sigmoid and
    hardsigmoid gates), 1x1 projection; odd channel counts (the blocked layout pads them)."""

    def __init__(self, gate: str) -> None:
        super().__init__()
        self.dw = torch.nn.Conv2d(40, 40, 3, padding=1, groups=40)
        self.fc1 = torch.nn.Conv2d(40, 10, 1)
        self.fc2 = torch.nn.Conv2d(10, 40, 1)
        self.proj = torch.nn.Conv2d(40, 24, 1)
        self.gate = torch.nn.Sigmoid() if gate == "sigmoid" else torch.nn.Hardsigmoid()

    def forward(self, x):
        y = torch.nn.functional.silu(self.dw(x))
        s = self.gate(self.fc2(torch.nn.functional.silu(self.fc1(y.mean((2, 3),
                                                                          keepdim=True)))))
        return self.proj(y * s)


@pytest.mark.parametrize("target", [TARGET, TARGET + " -mcpu=haswell"])
@pytest.mark.parametrize("gate", ["sigmoid", "hardsigmoid"])
def test_a_squeeze_excite_block_from_torch_folds_and_matches_pytorch(gate, target):
    from workbench.relax.frontend.torch import from_exported_program
    torch.manual_seed(0)
    net = SqueezeExcite(gate).eval()
    x = torch.randn(1, 40, 20, 20)
    with torch.no_grad():
        want = net(x).numpy()
        mod = from_exported_program(torch.export.export(net, (x,)))
    pipe = relax.get_default_pipeline(wb.Target(target))
    fold = next(p for p in pipe.passes if isinstance(p, FoldChannelScaleToConv2D))
    exe = relax.build(mod, target=target, relax_pipeline=pipe)
    # in the blocked layout (NCHW16c / NCHW8c); Haswell code runs on both host kinds
    assert len(fold.folded) == 1, fold.folded
    got = VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x.numpy()))
    got = (got[0] if isinstance(got, (list, tuple)) else got).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
