"""The tuning space of a Winograd convolution (issue 27: the search loop's own time): its four
transforms go to the custom rule ``winograd_transform``, so a kernel has its product's three
design spaces -- each transform tiled by MultiLevelTiling with three write-cache states made
3^5 = 243, and ~25 s of space generation a ResNet-18 task -- and every sample of them still
computes the convolution."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import te
from workbench.meta_schedule.search_strategy.base import TraceApplier
from workbench.meta_schedule.tune_context import TuneContext
from workbench.target import Target
from workbench.topi.nn.conv2d_winograd import (
    TRANSFORM_RULE, conv2d_winograd_nchwc, winograd_weight_transform,
)

TRANSFORMS = ["data_pack_rows", "data_pack", "inverse_rows", "inverse"]
HOST = Target("llvm -num-cores=2")


def _winograd(tile: int, lanes: int = 8, channels: int = 16, size: int = 10):
    """A 3x3 ``channels``-to-``channels`` convolution on ``size`` x ``size`` as a Winograd
    F(tile x tile) kernel in NCHW{lanes}c, and its arguments: data, transformed weight, and
    the direct convolution's result (numpy) to compare against."""
    rng = np.random.default_rng(tile)
    x = rng.standard_normal((1, channels, size, size)).astype("float32")
    w = (rng.standard_normal((channels, channels, 3, 3)) * 0.2).astype("float32")
    blocks = channels // lanes
    layout = f"NCHW{lanes}c"
    data = te.placeholder((1, blocks, size, size, lanes), name="data")
    u = winograd_weight_transform(w, lanes, tile)
    kernel = te.placeholder(u.shape, name="kernel")
    out = conv2d_winograd_nchwc(data, kernel, 1, layout, layout)
    func = te.create_prim_func([data, kernel, out])
    xb = x.reshape(1, blocks, lanes, size, size).transpose(0, 1, 3, 4, 2).copy()
    ref = np.zeros((1, channels, size, size), "float32")
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    for dy in range(3):
        for dx in range(3):
            ref += np.einsum("oc,nchw->nohw", w[:, :, dy, dx],
                             xp[:, :, dy:dy + size, dx:dx + size])
    ref_b = ref.reshape(1, blocks, lanes, size, size).transpose(0, 1, 3, 4, 2)
    return func, [xb, u], ref_b


def test_transform_blocks_carry_the_custom_rule():
    func, _, _ = _winograd(4)
    from workbench.tir.analysis import blocks_under
    anns = {b.name_hint: b.annotations.get("schedule_rule") for b in blocks_under(func.body)}
    assert {name: anns[name] for name in TRANSFORMS} == dict.fromkeys(TRANSFORMS, TRANSFORM_RULE)
    assert anns["bgemm"] is None


@pytest.mark.parametrize("tile", [4, 2])
def test_a_winograd_kernel_has_its_products_spaces_and_every_sample_computes_it(tile):
    func, args, ref = _winograd(tile)
    ctx = TuneContext(func, target=HOST, space_generator="post-order-apply",
                      search_strategy="replay-trace", rand_state=1)
    spaces = ctx.generate_design_space()
    assert len(spaces) == 3                 # bgemm's: no write cache, cache at level 1 or 2
    for sch in spaces:
        kinds = [i.kind.name for i in sch.trace.insts]
        # each transform: its tiles split by one sampled decision, k / a / r unrolled
        assert kinds.count("Unroll") == 3 * len(TRANSFORMS)
        assert kinds.count("SamplePerfectTile") == len(TRANSFORMS) + 7    # + bgemm's 7 loops
        assert kinds.count("CacheWrite") <= 1
    applier = TraceApplier(ctx.mod, ctx.space_generator.postprocs)
    for seed, space in enumerate(spaces):      # a random sample of each space
        trace = space.trace.simplified(remove_postproc=True)
        sch = applier.apply(trace, seed, keep_decisions=False)
        assert sch is not None, applier.failures
        rt = wb.build(sch.mod, target=HOST)
        out = wb.nd.array(np.zeros(ref.shape, "float32"))
        rt["main"](*[wb.nd.array(a) for a in args], out)
        np.testing.assert_allclose(out.numpy(), ref, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell -num-cores=2",
                                    "llvm -mcpu=sapphirerapids -num-cores=2"],
                         ids=["avx2", "avx512"])
def test_the_rule_applies_to_the_blocked_layout_of_each_vector_width(target):
    """8-lane blocks (AVX2) and 16-lane ones (AVX-512) alike: the spaces are built for the
    explicit target (running them is the test above, on the host)."""
    lanes = 16 if "sapphirerapids" in target else 8
    func, _, _ = _winograd(4, lanes=lanes, channels=32)
    ctx = TuneContext(func, target=Target(target), space_generator="post-order-apply",
                      search_strategy="replay-trace", rand_state=0)
    spaces = ctx.generate_design_space()
    assert len(spaces) == 3
    assert all([i.kind.name for i in s.trace.insts].count("Unroll") == 12 for s in spaces)
