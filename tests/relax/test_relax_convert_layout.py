"""ConvertLayoutNCHWc: convolutional graphs in the channel-blocked layout (NCHW16c with
AVX-512, NCHW8c with AVX2), weights reordered at compile time, one reorder per tensor at the
region's boundaries, each its own kernel named "layout" in profiles. Results against numpy
(graphs built by hand, NCHW and NHWC) and PyTorch (a model exported by torch); the random
graphs are tests/fuzz/cnn_fuzz.py."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import options, relax
from workbench.relax import op as R
from workbench.relax.expr import Call, Constant
from workbench.relax.op.layout import to_layout_numpy
from workbench.relax.transform import ConvertLayoutNCHWc
from workbench.relax.transform.convert_layout_nchwc import block_for_target
from workbench.runtime.relax_vm import VirtualMachine

RNG = np.random.default_rng(0)


def _w(*shape: int) -> Constant:
    return relax.const(RNG.standard_normal(shape).astype("float32") * 0.3)


def _build(body, inputs: dict[str, tuple]) -> relax.IRModule:  # noqa: ANN001
    bb = relax.BlockBuilder()
    params = [relax.Var(n, relax.TensorStructInfo(s, "float32")) for n, s in inputs.items()]
    with bb.function("main", params):
        with bb.dataflow():
            out = bb.emit_output(body(bb, *params))
        bb.emit_func_output(out)
    return bb.get()


def resnet_like(bb, x):  # noqa: ANN001, ANN201
    """A 3-channel stem, a residual block with a bias, a pool, a 1x1 conv to 40 channels (not a
    multiple of any block), a squeeze-excite product and a global mean that keeps dims."""
    y = bb.emit(R.nn.relu(R.nn.conv2d(x, _w(24, 3, 3, 3), strides=2, padding=1)))
    z = bb.emit(R.add(R.nn.conv2d(y, _w(24, 24, 3, 3), padding=1), _w(1, 24, 1, 1)))
    z = bb.emit(R.nn.relu(R.add(z, y)))
    z = bb.emit(R.nn.max_pool2d(z, 3, 2, 1))
    z = bb.emit(R.clip(R.nn.conv2d(z, _w(40, 24, 1, 1)), 0.0, 6.0))
    s = bb.emit(R.sigmoid(R.nn.conv2d(R.mean(z, axis=[2, 3], keepdims=True), _w(40, 40, 1, 1))))
    z = bb.emit(R.multiply(z, s))
    return R.divide(z, relax.const(np.float32(1.5)))


def _layout_calls(mod: relax.IRModule) -> list[Call]:
    return [b.value for blk in mod["main"].body.blocks for b in blk.bindings
            if isinstance(b.value, Call) and getattr(b.value.op, "name", "") ==
            "relax.layout_transform"]


def _run(mod: relax.IRModule, *args: np.ndarray, **build: object) -> np.ndarray:
    exe = relax.build(mod, "llvm", **build)
    out = VirtualMachine(exe, wb.cpu())["main"](*[wb.nd.array(a) for a in args])
    return out.numpy()


def test_block_follows_the_target():
    assert block_for_target("llvm -mcpu=sapphirerapids") == 16
    assert block_for_target("llvm -mcpu=znver4") == 16
    assert block_for_target("llvm -mcpu=haswell") == 8
    assert block_for_target("llvm -mcpu=znver3") == 8


@pytest.mark.parametrize("target,block", [("llvm -mcpu=sapphirerapids", 16),
                                          ("llvm -mcpu=haswell", 8)])
def test_resnet_like_graph_is_blocked_between_its_boundaries(target, block):
    mod = _build(resnet_like, {"x": (1, 3, 17, 15)})
    p = ConvertLayoutNCHWc(target)
    out = p(mod)
    assert p.converted == 4
    convs = [b.value for b in out["main"].body.blocks[0].bindings
             if isinstance(b.value, Call) and b.value.op.name == "relax.nn.conv2d"]
    lay = f"NCHW{block}c"
    # the stem reads the plain input; every convolution writes the blocked layout
    assert [c.attrs["data_layout"] for c in convs] == ["NCHW", lay, lay, lay]
    assert {c.attrs["out_layout"] for c in convs} == {lay}
    assert convs[0].attrs["kernel_layout"] == f"OIHW{block}o"
    assert convs[1].attrs["kernel_layout"] == f"OIHW{block}i{block}o"
    # weights reordered at compile time: constants in the blocked shape, channels padded
    w1 = convs[1].args[1]
    assert isinstance(w1, Constant)
    assert w1.data.numpy().shape == (-(-24 // block), -(-24 // block), 3, 3, block, block)
    # one reorder: the output's; none between the blocked ops
    (reorder,) = _layout_calls(out)
    assert (reorder.attrs["src_layout"], reorder.attrs["dst_layout"],
            reorder.attrs["channels"]) == (lay, "NCHW", 40)
    x = RNG.standard_normal((1, 3, 17, 15)).astype("float32")
    want = relax.testing.evaluate_numpy(mod, "main", x)
    np.testing.assert_allclose(relax.testing.evaluate_numpy(out, "main", x), want,
                               rtol=1e-5, atol=1e-5)
    if target.endswith("haswell"):    # runs on both host kinds
        from workbench.relax.pipeline import get_default_pipeline
        got = _run(mod, x, relax_pipeline=get_default_pipeline(target))
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_default_build_matches_numpy_and_can_be_turned_off():
    mod = _build(resnet_like, {"x": (2, 3, 17, 15)})
    x = RNG.standard_normal((2, 3, 17, 15)).astype("float32")
    want = relax.testing.evaluate_numpy(mod, "main", x)
    np.testing.assert_allclose(_run(mod, x), want, rtol=1e-4, atol=1e-4)
    exe = relax.build(mod, "llvm")
    assert any(k.startswith("layout_transform") for k in exe.kernel_names)
    with options.override(convert_layout=False):
        exe = relax.build(mod, "llvm")
        assert not any(k.startswith("layout_transform") for k in exe.kernel_names)


@pytest.mark.parametrize("target,block", [("llvm -mcpu=sapphirerapids", 16),
                                          ("llvm -mcpu=haswell", 8)])
def test_a_strided_1x1_convolution_reads_a_subsampled_input(target, block):
    """A downsampling 1x1 convolution (strides 2 and 3, odd and even sizes) runs with stride
    1 on a blocked strided_slice of its input; padded or 3x3 strided ones do not."""
    def body(bb, x):  # noqa: ANN001, ANN202
        y = bb.emit(R.nn.relu(R.nn.conv2d(x, _w(24, 20, 3, 3), padding=1)))
        a = bb.emit(R.nn.conv2d(y, _w(40, 24, 1, 1), strides=2))             # subsampled
        b = bb.emit(R.nn.conv2d(y, _w(40, 24, 1, 1), strides=2, padding=1))  # stays strided
        c = bb.emit(R.nn.conv2d(y, _w(40, 24, 3, 3), strides=2, padding=1))  # stays strided
        d = bb.emit(R.nn.conv2d(y, _w(40, 24, 1, 1), strides=3))             # subsampled
        return relax.Tuple([R.add(a, c), b, R.nn.relu(d)])
    for h, w in ((15, 13), (16, 14)):
        mod = _build(body, {"x": (1, 20, h, w)})
        out = ConvertLayoutNCHWc(target)(mod)
        binds = [bd.value for bd in out["main"].body.blocks[0].bindings
                 if isinstance(bd.value, Call)]
        convs = [v for v in binds if v.op.name == "relax.nn.conv2d"]
        slices = [v for v in binds if v.op.name == "relax.strided_slice"
                  and v.attrs["axes"] == (2, 3)]
        assert [tuple(c.attrs["strides"]) for c in convs] == [(1, 1), (1, 1), (2, 2),
                                                               (2, 2), (1, 1)]
        assert [(s.attrs["strides"], s.attrs["end"]) for s in slices] == \
            [((2, 2), (h, w)), ((3, 3), (h, w))]
        assert all(s.args[0].struct_info.shape[-1].value == block for s in slices)
        x = RNG.standard_normal((1, 20, h, w)).astype("float32")
        want = relax.testing.evaluate_numpy(mod, "main", x)
        got = relax.testing.evaluate_numpy(out, "main", x)
        for g, e in zip(got, want, strict=True):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)
        if target.endswith("haswell"):    # runs on both host kinds
            from workbench.relax.pipeline import get_default_pipeline
            exe = relax.build(mod, "llvm", relax_pipeline=get_default_pipeline(target))
            got = VirtualMachine(exe, wb.cpu())["main"](wb.nd.array(x))
            for g, e in zip(got, want, strict=True):
                np.testing.assert_allclose(g.numpy(), e, rtol=1e-4, atol=1e-4)


def test_nhwc_graph_with_hwio_weights():
    def body(bb, x):  # noqa: ANN001, ANN202
        y = bb.emit(R.nn.relu(R.add(
            R.nn.conv2d(x, _w(3, 3, 16, 32), padding=1, data_layout="NHWC"), _w(32))))
        y = bb.emit(R.nn.conv2d(y, _w(3, 3, 1, 32), padding=1, groups=32, data_layout="NHWC"))
        y = bb.emit(R.multiply(y, _w(1, 1, 1, 32)))
        return R.nn.avg_pool2d(y, 2, 2, layout="NHWC")
    mod = _build(body, {"x": (1, 9, 11, 16)})
    p = ConvertLayoutNCHWc("llvm -mcpu=haswell")
    out = p(mod)
    assert p.converted == 2
    reorders = _layout_calls(out)
    assert [(c.attrs["src_layout"], c.attrs["dst_layout"]) for c in reorders] == \
        [("NHWC", "NCHW8c"), ("NCHW8c", "NHWC")]
    x = RNG.standard_normal((1, 9, 11, 16)).astype("float32")
    want = relax.testing.evaluate_numpy(mod, "main", x)
    np.testing.assert_allclose(_run(mod, x), want, rtol=1e-4, atol=1e-4)


def test_what_it_cannot_improve_runs_as_before():
    """A run-time weight, a grouped convolution whose groups are not block-aligned and a depthwise
    one with a channel multiplier stay NCHW; a module without them is returned unchanged."""
    def body(bb, x, w):  # noqa: ANN001, ANN202
        y = bb.emit(R.nn.conv2d(x, w, padding=1))
        y = bb.emit(R.nn.conv2d(y, _w(12, 4, 3, 3), padding=1, groups=2))
        return R.nn.conv2d(y, _w(24, 1, 3, 3), padding=1, groups=12)
    mod = _build(body, {"x": (1, 8, 7, 7), "w": (8, 8, 3, 3)})
    p = ConvertLayoutNCHWc("llvm -mcpu=sapphirerapids")
    assert p(mod)["main"] is mod["main"] and p.converted == 0
    x = RNG.standard_normal((1, 8, 7, 7)).astype("float32")
    w = RNG.standard_normal((8, 8, 3, 3)).astype("float32")
    np.testing.assert_allclose(_run(mod, x, w), relax.testing.evaluate_numpy(mod, "main", x, w),
                               rtol=1e-4, atol=1e-4)


def test_padding_channels_never_reach_a_result():
    """5 output channels padded to a block: a sigmoid makes the padding 0.5, a divisor constant
    is padded with ones, and a following convolution has zero weights for the padding."""
    def body(bb, x):  # noqa: ANN001, ANN202
        y = bb.emit(R.sigmoid(R.nn.conv2d(x, _w(5, 3, 3, 3), padding=1)))
        y = bb.emit(R.divide(y, relax.const(RNG.uniform(1, 2, (1, 5, 1, 1)).astype("float32"))))
        z = bb.emit(R.nn.conv2d(y, _w(7, 5, 1, 1)))
        return R.concat([z, z], axis=1)
    mod = _build(body, {"x": (1, 3, 6, 6)})
    x = RNG.standard_normal((1, 3, 6, 6)).astype("float32")
    want = relax.testing.evaluate_numpy(mod, "main", x)
    np.testing.assert_allclose(_run(mod, x), want, rtol=1e-4, atol=1e-4)
    out = ConvertLayoutNCHWc("llvm -mcpu=haswell")(mod)
    # the unaligned concat (7 + 7 channels) reads the plain layout
    assert [c.attrs["dst_layout"] for c in _layout_calls(out)] == ["NCHW"]


def test_layout_op_numpy_roundtrip_and_errors():
    x = RNG.standard_normal((2, 5, 3, 4)).astype("float32")
    b = to_layout_numpy(x, "NCHW", "NCHW8c")
    assert b.shape == (2, 1, 3, 4, 8) and np.all(b[..., 5:] == 0)
    np.testing.assert_array_equal(to_layout_numpy(b, "NCHW8c", "NCHW", 5), x)
    np.testing.assert_array_equal(to_layout_numpy(b, "NCHW8c", "NHWC", 5), x.transpose(0, 2, 3, 1))
    with pytest.raises(ValueError, match="do not name the same axes"):
        R.layout_transform(relax.Var("x", relax.TensorStructInfo((1, 2), "float32")), "NC", "NHW")
    with pytest.raises(ValueError, match="takes no factor"):
        R.layout_transform(relax.Var("x", relax.TensorStructInfo((1, 2), "float32")), "NC",
                           "NC4C")
    with pytest.raises(ValueError, match="malformed layout"):
        R.layout_transform(relax.Var("x", relax.TensorStructInfo((1, 2), "float32")), "NC",
                           "N4c")


torch = pytest.importorskip("torch")


class _Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        nn = torch.nn
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU())
        self.block = nn.Sequential(nn.Conv2d(16, 16, 3, 1, 1, groups=16), nn.BatchNorm2d(16),
                                   nn.Hardswish(), nn.Conv2d(16, 16, 1))
        self.fc = nn.Linear(16, 10)

    def forward(self, x):  # noqa: ANN001, ANN201
        y = self.stem(x)
        y = torch.relu(self.block(y) + y)
        return self.fc(y.mean((2, 3)))


def test_torch_model_profile_shows_the_reorders_as_layout_kernels():
    from workbench.relax.frontend.torch import from_exported_program
    model = _Tiny().eval()
    x = torch.randn(1, 3, 32, 32)
    mod = from_exported_program(torch.export.export(model, (x,)), keep_params_as_input=False)
    exe = relax.build(mod, "llvm")
    vm = VirtualMachine(exe, wb.cpu(), profile=True)
    with torch.no_grad():
        want = model(x).numpy()
    (got,) = vm["main"](wb.nd.array(x.numpy()))
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-4)
    report = vm.profile("main", wb.nd.array(x.numpy()))
    rows = [c for c in report.calls if str(c["Name"]).startswith("layout_transform")]
    # one reorder: out of the blocked layout before the mean (the stem reads the plain input)
    assert len(rows) == 1 and rows[0]["Layer"] == "layout"
    df = report.to_dataframe()
    assert (df["Name"].str.startswith("layout_transform")).sum() == 1
    convs = [k for k in exe.kernel_names if "conv2d" in k]
    assert convs and not any("layout" in k for k in convs)   # never fused into a kernel


# ---- Winograd ------------------------------------------------------------------------------

@pytest.mark.parametrize("c, o, h, w, pad", [(100, 72, 13, 11, 1), (64, 64, 14, 14, 1),
                                             (128, 96, 18, 15, 0), (64, 64, 56, 56, 1),
                                             (100, 72, 7, 5, 1), (64, 80, 4, 4, 0)])
def test_winograd_convolution_matches_pytorch(c, o, h, w, pad, monkeypatch):
    """3x3 stride-1 convolutions on mid-sized images become Winograd F(4x4, 3x3) convolutions,
    on small ones (fewer than 9 4x4 output tiles: 7x7, 2x2) F(2x2, 3x3) ones (weights
    transformed at compile time, 6x6 or 4x4 per channel pair), odd channel counts and image
    sizes included (partial tiles, padded channels); the op's numpy reference and the compiled
    kernel against PyTorch. (With 16-channel blocks the rule keeps images of under 5 tiles
    direct and takes F(4x4) from 17; here it takes every one, as the tuner's Winograd
    alternative does, with the 8-channel blocks' tile sizes.)"""
    from workbench.relax.transform import convert_layout_nchwc
    monkeypatch.setattr(convert_layout_nchwc, "WINOGRAD_WIDE_MIN_TILES", 1)
    monkeypatch.setattr(convert_layout_nchwc, "WINOGRAD_WIDE_F4_MIN_TILES", 9)
    wt = RNG.standard_normal((o, c, 3, 3)).astype("float32") * 0.1

    def body(bb, x):  # noqa: ANN001, ANN202
        return R.nn.relu(R.nn.conv2d(x, relax.const(wt), padding=pad))
    mod = _build(body, {"x": (1, c, h, w)})
    p = ConvertLayoutNCHWc("llvm -mcpu=sapphirerapids")
    out = p(mod)
    assert (p.converted, p.winograd_convs) == (1, 1)
    call = next(b.value for b in out["main"].body.blocks[0].bindings
                if isinstance(b.value, Call) and b.value.op.name == "relax.nn.conv2d_winograd")
    oh, ow = h + 2 * pad - 2, w + 2 * pad - 2
    alpha = 6 if -(-oh // 4) * -(-ow // 4) >= 9 else 4
    assert call.args[1].data.numpy().shape == (alpha, alpha, -(-o // 16), -(-c // 16), 16, 16)
    x = RNG.standard_normal((1, c, h, w)).astype("float32")
    want = torch.relu(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(wt),
                                                 padding=pad)).numpy()
    scale = np.abs(want).max()
    np.testing.assert_allclose(relax.testing.evaluate_numpy(out, "main", x), want,
                               rtol=0, atol=1e-5 * scale)
    got = _run(mod, x)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * scale)
    exe = relax.build(mod, "llvm")
    assert any("winograd" in k for k in exe.kernel_names)


def test_winograd_on_avx2_blocks_of_eight():
    """An AVX2 target's Winograd convolution (8-channel blocks, odd channel and image sizes)
    compiles for that target and runs right on either host kind."""
    c, o, h, w = 72, 100, 15, 13
    wt = RNG.standard_normal((o, c, 3, 3)).astype("float32") * 0.1
    mod = _build(lambda bb, x: R.nn.relu(R.nn.conv2d(x, relax.const(wt), padding=1)),
                 {"x": (1, c, h, w)})
    target = "llvm -mcpu=haswell -num-cores=2"
    p = ConvertLayoutNCHWc(target)
    out = p(mod)
    assert p.winograd_convs == 1
    call = next(b.value for b in out["main"].body.blocks[0].bindings
                if isinstance(b.value, Call) and b.value.op.name == "relax.nn.conv2d_winograd")
    assert call.args[1].data.numpy().shape == (6, 6, -(-o // 8), -(-c // 8), 8, 8)
    from workbench.relax.pipeline import get_default_pipeline
    x = RNG.standard_normal((1, c, h, w)).astype("float32")
    want = torch.relu(torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(wt),
                                                 padding=1)).numpy()
    got = _run(mod, x, relax_pipeline=get_default_pipeline(target))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * np.abs(want).max())


def test_winograd_only_where_it_pays_and_can_be_turned_off():
    """Not for 1x1 or strided convolutions, few channels or large images (900 tiles); on small
    ones (4 tiles, ResNet's 7 x 7 stage) F(2x2, 3x3) with 8-channel blocks, direct with 16
    (WINOGRAD_WIDE_MIN_TILES); off with the option. ResNet's 56 x 56 stage (196 tiles) is
    Winograd F(4x4, 3x3)."""
    def body(bb, x, y, z):  # noqa: ANN001, ANN202
        a = bb.emit(R.nn.conv2d(x, _w(64, 64, 3, 3), padding=1))          # 900 tiles
        b = bb.emit(R.nn.conv2d(y, _w(512, 512, 3, 3), padding=1))        # 4 tiles
        c = bb.emit(R.nn.conv2d(z, _w(32, 32, 3, 3), padding=1))          # 32 channels
        d = bb.emit(R.nn.conv2d(y, _w(512, 512, 3, 3), strides=2, padding=1))
        e = bb.emit(R.nn.conv2d(z, _w(64, 32, 1, 1)))
        return relax.Tuple([a, b, c, d, e])
    mod = _build(body, {"x": (1, 64, 120, 120), "y": (1, 512, 7, 7), "z": (1, 32, 28, 28)})
    p = ConvertLayoutNCHWc("llvm -mcpu=sapphirerapids")
    p(mod)
    assert (p.converted, p.winograd_convs) == (5, 0)
    assert p.candidate_tiles == {"main": [900, 4]} and p.decisions == {"main": [False, False]}
    p = ConvertLayoutNCHWc("llvm -mcpu=haswell")
    out = p(mod)
    assert (p.converted, p.winograd_convs) == (5, 1)
    (u,) = [b.value.args[1].data.numpy() for b in out["main"].body.blocks[0].bindings
            if isinstance(b.value, Call) and b.value.op.name == "relax.nn.conv2d_winograd"]
    assert u.shape == (4, 4, 64, 64, 8, 8)                              # the 7x7 one: F(2x2)
    for c, hw, mcpu, alpha in ((128, 28, "sapphirerapids", 6), (64, 56, "sapphirerapids", 6),
                               (256, 14, "sapphirerapids", 4), (256, 14, "haswell", 6)):
        # 14x14 (16 tiles): F(2x2) with 16-channel blocks (WINOGRAD_WIDE_F4_MIN_TILES)
        mod = _build(lambda bb, x, c=c: R.nn.conv2d(x, _w(c, c, 3, 3), padding=1),
                     {"x": (1, c, hw, hw)})
        p = ConvertLayoutNCHWc(f"llvm -mcpu={mcpu}")
        out = p(mod)
        assert p.winograd_convs == 1, (c, hw)
        (u,) = [b.value.args[1].data.numpy() for b in out["main"].body.blocks[0].bindings
                if isinstance(b.value, Call) and b.value.op.name == "relax.nn.conv2d_winograd"]
        assert u.shape[:2] == (alpha, alpha), (c, hw, mcpu)
    with options.override(winograd=False):
        p(mod)
        assert (p.converted, p.winograd_convs) == (1, 0)
    p = ConvertLayoutNCHWc("llvm -mcpu=sapphirerapids", winograd=False)
    p(mod)
    assert p.winograd_convs == 0
