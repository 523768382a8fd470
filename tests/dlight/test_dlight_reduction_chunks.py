"""A blocked 1x1 convolution over many input channels runs its reduction in chunks whose
weights fit L1, each chunk over the whole plane (``tiling._reduction_chunks``); a small one
keeps each tile's whole reduction. Both compute what numpy does."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import dlight, te
from workbench.dlight.cpu import tiling
from workbench.relax.op.registry import NUMPY_RULES
from workbench.target import Target
from workbench.tir.functor import post_order_visit
from workbench.tir.stmt import For
from workbench.topi.nn.conv2d_nchwc import conv2d_nchwc


def _conv1x1(cin: int, cout: int, hw: int, block: int, relu: bool):
    x = te.placeholder((1, cin // block, hw, hw, block), name="x")
    w = te.placeholder((cout // block, cin // block, 1, 1, block, block), name="w")
    y = conv2d_nchwc(x, w, 1, 0, 1, 1, f"NCHW{block}c", f"OIHW{block}i{block}o",
                     f"NCHW{block}c")
    if relu:
        y = te.compute(y.shape, lambda *i: te.max(y(*i), 0.0), name="relu")
    return te.create_prim_func([x, w, y])


def _reference(x: np.ndarray, w: np.ndarray, stride: int = 1, pad: int = 0) -> np.ndarray:
    """The project's numpy convolution (relax.nn.conv2d's), on the blocked layouts."""
    b = x.shape[-1]
    return NUMPY_RULES["relax.nn.conv2d"](x, w, (stride, stride), (pad,) * 4, (1, 1), 1,
                                          f"NCHW{b}c", f"OIHW{b}i{b}o", "float32", f"NCHW{b}c")


def _loops(mod) -> list[For]:  # noqa: ANN001
    found: list[For] = []
    post_order_visit(mod["main"].body, lambda s: found.append(s) if isinstance(s, For) else None)
    return found[::-1]                       # outermost first


@pytest.mark.parametrize("mcpu,block,cin,hw,relu", [
    ("sapphirerapids", 16, 1024, 14, True),   # 64 blocks: 8 a chunk (128 channels)
    ("sapphirerapids", 16, 512, 7, False),
    ("haswell", 8, 1024, 7, True),            # 128 blocks of 8: 32 a chunk
])
def test_a_long_reduction_runs_in_chunks_over_the_plane(mcpu, block, cin, hw, relu):
    target = Target(f"llvm -num-cores=2 -mcpu={mcpu}")
    func = dlight.default_schedule(_conv1x1(cin, 256, hw, block, relu), target)
    loops = _loops(func)
    assert loops[0].kind == "parallel"
    # the chunks' loop runs right under the parallel loop over output-channel blocks, the
    # plane's rows under it; each chunk's weights fit CHUNK_WEIGHT_BYTES
    body = [lp for lp in loops if lp.kind == "serial" and "rc" in lp.loop_var.name]
    assert body and body[0].loop_var.name.startswith("rc_0"), [lp.loop_var for lp in loops]
    blocks = cin // block
    chunk = blocks // body[0].extent.value
    assert 1 < chunk < blocks and chunk * block * block * 4 <= tiling.CHUNK_WEIGHT_BYTES
    rng = np.random.default_rng(cin + hw)
    x = rng.standard_normal((1, cin // block, hw, hw, block)).astype("float32")
    w = rng.standard_normal((256 // block, cin // block, 1, 1, block, block)).astype("float32")
    if not target.runs_on():
        pytest.skip(f"this host cannot run -mcpu={mcpu} code (the schedule was checked)")
    out = wb.nd.empty((1, 256 // block, hw, hw, block), "float32")
    wb.build(func, target)["main"](wb.nd.array(x), wb.nd.array(w), out)
    want = _reference(x, w)
    np.testing.assert_allclose(out.numpy(), np.maximum(want, 0) if relu else want,
                               rtol=1e-4, atol=1e-3)


def test_a_panel_that_fits_keeps_the_whole_reduction_in_each_tile():
    target = Target("llvm -num-cores=2 -mcpu=sapphirerapids")
    func = dlight.default_schedule(_conv1x1(64, 256, 14, 16, False), target)
    names = [lp.loop_var.name for lp in _loops(func)]
    assert not any(n.startswith("rc_0") for n in names), names


def test_no_chunks_when_they_would_leave_a_thread_idle():
    """Only the output-channel blocks' loop runs in parallel under chunks: with 4 of them
    and 8 threads there are none."""
    target = Target("llvm -num-cores=8 -mcpu=sapphirerapids")
    func = dlight.default_schedule(_conv1x1(1024, 256, 14, 16, False), target)
    names = [lp.loop_var.name for lp in _loops(func)]
    assert not any(n.startswith("rc_0") for n in names), names


def _conv3x3(cin: int, cout: int, hw: int, block: int, stride: int = 1):
    x = te.placeholder((1, cin // block, hw, hw, block), name="x")
    w = te.placeholder((cout // block, cin // block, 3, 3, block, block), name="w")
    y = conv2d_nchwc(x, w, stride, 1, 1, 1, f"NCHW{block}c", f"OIHW{block}i{block}o",
                     f"NCHW{block}c")
    return te.create_prim_func([x, w, y])


def test_a_3x3_convolution_runs_one_block_of_input_channels_a_chunk():
    """A step of a 3x3 kernel's 16 input channels for 64 output channels is 36 KB, above
    CHUNK_WEIGHT_BYTES: chunks of one block (ResNet-50's 512-channel stride-2 convolution:
    a 1.2 MB panel otherwise)."""
    target = Target("llvm -num-cores=2 -mcpu=sapphirerapids")
    func = dlight.default_schedule(_conv3x3(128, 128, 14, 16, stride=2), target)
    chunk_loops = [lp for lp in _loops(func) if lp.loop_var.name.startswith("rc_0")]
    assert [lp.extent.value for lp in chunk_loops] == [8]
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 8, 14, 14, 16)).astype("float32")
    w = rng.standard_normal((8, 8, 3, 3, 16, 16)).astype("float32")
    if not target.runs_on():
        pytest.skip("this host cannot run -mcpu=sapphirerapids code (the schedule was checked)")
    out = wb.nd.empty((1, 8, 7, 7, 16), "float32")
    wb.build(func, target)["main"](wb.nd.array(x), wb.nd.array(w), out)
    np.testing.assert_allclose(out.numpy(), _reference(x, w, stride=2, pad=1), rtol=1e-4, atol=1e-3)


def _serial_order(func) -> list[str]:  # noqa: ANN001
    """The serial loops of the convolution's update (not its init's, the padding's or the
    epilogue's), outermost first."""
    return [lp.loop_var.name for lp in _loops(func) if lp.kind == "serial" and
            not lp.loop_var.name.endswith("_init") and lp.loop_var.name[0] in "rnyx"]


@pytest.mark.parametrize("hw,rows_out", [(7, True), (14, False)])
def test_a_3x3_kernel_on_a_small_plane_runs_one_kernel_row_a_chunk(hw, rows_out):
    """A step of one input-channel block is 36 KB of weights for 4 output-channel blocks
    (above CHUNK_WEIGHT_BYTES): on a 7x7 plane, whose accumulator is small, a chunk is one
    row of the kernel (12 KB), so the kernel rows' loop runs outside the plane's tiles too;
    a 14x14 plane's accumulator lives in L2 anyway and keeps chunks of one block."""
    target = Target("llvm -num-cores=2 -mcpu=sapphirerapids")
    # (64 input channels: 295 KB of weights, above ROWS_FIRST_MAX_WEIGHT_BYTES)
    func = dlight.default_schedule(_conv3x3(64, 128, hw, 16), target)
    order = _serial_order(func)
    chunk = next(i for i, n in enumerate(order) if n.startswith("rc_0"))
    # the chunks' loop, then (7x7) the kernel rows', then the plane's rows
    if rows_out:
        assert order[chunk + 1].startswith("ry"), order
        assert order.index(next(n for n in order if n.startswith("rx"))) > \
            order.index(next(n for n in order if n.startswith("yy"))), order
    else:
        assert order.index(next(n for n in order if n.startswith("ry"))) > \
            order.index(next(n for n in order if n.startswith("yy"))), order
    rng = np.random.default_rng(hw)
    x = rng.standard_normal((1, 4, hw, hw, 16)).astype("float32")
    w = rng.standard_normal((8, 4, 3, 3, 16, 16)).astype("float32")
    if not target.runs_on():
        pytest.skip("this host cannot run -mcpu=sapphirerapids code (the schedule was checked)")
    out = wb.nd.empty((1, 8, hw, hw, 16), "float32")
    wb.build(func, target)["main"](wb.nd.array(x), wb.nd.array(w), out)
    np.testing.assert_allclose(out.numpy(), _reference(x, w, pad=1), rtol=1e-4, atol=1e-3)


def test_avx2_blocks_keep_whole_blocks_a_chunk():
    """8-channel blocks: a step of one input-channel block for the tile's 2 output-channel
    blocks is 4.6 KB, six of them fit CHUNK_WEIGHT_BYTES, the kernel's rows stay in the
    tile."""
    target = Target("llvm -num-cores=2 -mcpu=haswell")
    func = dlight.default_schedule(_conv3x3(96, 128, 7, 8), target)
    order = _serial_order(func)
    chunk_loops = [lp for lp in _loops(func) if lp.loop_var.name.startswith("rc_0")]
    assert [lp.extent.value for lp in chunk_loops] == [2], order
    assert order.index(next(n for n in order if n.startswith("ry"))) > \
        order.index(next(n for n in order if n.startswith("yy"))), order
