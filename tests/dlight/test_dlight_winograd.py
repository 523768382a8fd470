"""A Winograd convolution whose transformed weight fits L2 runs tile group by tile group (the
``Winograd`` rule): one parallel loop over groups of tiles holds the input transform, the
products and the output transform; a larger weight goes stage by stage (``Chain``). Both
compute what a direct convolution does in numpy."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import dlight, te
from workbench.dlight.base import CPUInfo
from workbench.dlight.cpu import Chain, winograd
from workbench.dlight.cpu.variants import swapped_then_nearest_key, tile_variants
from workbench.ir.structural import structural_hash
from workbench.relax.op.registry import NUMPY_RULES
from workbench.target import Target
from workbench.tir.functor import post_order_visit
from workbench.tir.schedule import Schedule
from workbench.tir.stmt import For
from workbench.topi.nn.conv2d_winograd import conv2d_winograd_nchwc, winograd_weight_transform

STAGES = ("data_pack_rows", "data_pack", "bgemm_init", "bgemm_update", "inverse_rows", "inverse")


def _func(c: int, o: int, hw: int, block: int, alpha: int):
    x = te.placeholder((1, c // block, hw, hw, block), name="x")
    u = te.placeholder((alpha, alpha, o // block, c // block, block, block), name="u")
    y = conv2d_winograd_nchwc(x, u, 1, f"NCHW{block}c", f"NCHW{block}c")
    y = te.compute(y.shape, lambda *i: te.max(y(*i), 0.0), name="relu")
    return te.create_prim_func([x, u, y])


def _parallel_loops(func) -> list[For]:  # noqa: ANN001
    found: list[For] = []
    post_order_visit(func.body, lambda s: found.append(s)
                     if isinstance(s, For) and s.kind == "parallel" else None)
    return found[::-1]


def _blocks_under(loop: For) -> set[str]:
    names: set[str] = set()
    post_order_visit(loop.body, lambda s: names.add(s.name_hint)
                     if hasattr(s, "name_hint") and hasattr(s, "iter_vars") else None)
    return names


def _unrolled_extents(loop: For) -> list[int]:
    out: list[int] = []
    post_order_visit(loop.body, lambda s: out.append(s.extent.value)
                     if isinstance(s, For) and s.kind == "unroll" else None)
    return out


def _check_values(func, target: Target, c: int, o: int, hw: int, block: int,  # noqa: ANN001
                  tile: int) -> None:
    rng = np.random.default_rng(c + o + hw)
    w = rng.standard_normal((o, c, 3, 3)).astype("float32") * 0.1
    x = rng.standard_normal((1, c // block, hw, hw, block)).astype("float32")
    u = winograd_weight_transform(w, block, tile)
    if not target.runs_on():
        pytest.skip(f"this host cannot run {target} code (the schedule was checked)")
    out = wb.nd.empty((1, o // block, hw, hw, block), "float32")
    wb.build(func, target)["main"](wb.nd.array(x), wb.nd.array(u), out)
    wb_ = w.reshape(o // block, block, c // block, block, 3, 3).transpose(0, 2, 4, 5, 3, 1)
    want = NUMPY_RULES["relax.nn.conv2d"](x, np.ascontiguousarray(wb_), (1, 1), (1, 1, 1, 1),
                                          (1, 1), 1, f"NCHW{block}c", f"OIHW{block}i{block}o",
                                          "float32", f"NCHW{block}c")
    np.testing.assert_allclose(out.numpy(), np.maximum(want, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mcpu,block,c,o,hw,tile", [
    ("sapphirerapids", 16, 64, 64, 56, 4),     # ResNet's 56x56 stage: a 590 KB weight
    ("sapphirerapids", 16, 32, 48, 13, 4),     # partial tiles
    ("sapphirerapids", 16, 64, 64, 7, 2),      # F(2x2)
    ("haswell", 8, 64, 64, 28, 4),             # 8-channel blocks: a 4 x 2 register tile
])
def test_a_small_weight_runs_tile_group_by_tile_group(mcpu, block, c, o, hw, tile):
    target = Target(f"llvm -num-cores=2 -mcpu={mcpu}")
    func = dlight.default_schedule(_func(c, o, hw, block, tile + 2), target)["main"]
    groups = [lp for lp in _parallel_loops(func) if set(STAGES) <= _blocks_under(lp)]
    assert len(groups) == 1, [lp.loop_var.name for lp in _parallel_loops(func)]
    # the product's register tile: W output-channel blocks x U tiles, unrolled
    unrolled = []
    post_order_visit(groups[0].body, lambda s: unrolled.append(s.extent.value)
                     if isinstance(s, For) and s.kind == "unroll" else None)
    assert unrolled
    _check_values(func, target, c, o, hw, block, tile)


def test_a_weight_beyond_l2_goes_stage_by_stage():
    """ResNet's 28x28 stage: 128 channels, a 2.4 MB weight: every stage its own parallel
    loop, each slice of the weight read once."""
    target = Target("llvm -num-cores=2 -mcpu=sapphirerapids")
    prim = _func(128, 128, 28, 16, 6)
    assert winograd.Winograd().apply(prim, target, False) is None
    func = dlight.default_schedule(prim, target)["main"]
    assert not any(set(STAGES) <= _blocks_under(lp) for lp in _parallel_loops(func))
    _check_values(func, target, 128, 128, 28, 16, 4)


@pytest.mark.parametrize("mcpu,block,hw", [("sapphirerapids", 16, 56), ("haswell", 8, 28)])
def test_the_tuner_starts_from_the_rule_the_staged_kernel_and_neighbouring_tiles(mcpu, block,
                                                                                   hw):
    """``default_schedule_variants`` (the tuner's first trials) of a kernel the rule takes:
    the rule's own schedule first, then the same kernel stage by stage (Chain's schedule:
    which is faster depends on the host), then other register tiles of the products, each
    still one group loop over every stage; each computes the convolution and replays from its
    trace. A kernel the rule does not take has none from it."""
    target = Target(f"llvm -num-cores=2 -mcpu={mcpu}")
    prim = _func(64, 64, hw, block, 6)
    scheds = dlight.default_schedule_variants(prim, target, limit=5)
    assert len(scheds) == 5
    assert scheds[0].mod.script() == winograd.Winograd().apply(prim, target, False).mod.script()
    staged = scheds[1].mod["main"]
    assert scheds[1].mod.script() == Chain().apply(prim, target, False).mod.script()
    assert not any(set(STAGES) <= _blocks_under(lp) for lp in _parallel_loops(staged))
    assert len(_parallel_loops(staged)) >= 5        # a parallel loop per stage
    tiles = []
    for sch in scheds[:1] + scheds[2:]:
        func = sch.mod["main"]
        (group,) = [lp for lp in _parallel_loops(func) if set(STAGES) <= _blocks_under(lp)]
        tiles.append((group.extent.value, tuple(_unrolled_extents(group))))
    assert len(set(tiles)) == 4, tiles          # four different register tiles
    for sch in (scheds[1], scheds[4]):
        # replayed from its trace, as the tuner's record of it is
        again = Schedule(prim)
        sch.trace.apply_to_schedule(again, remove_postproc=False)
        assert again.mod.script() == sch.mod.script()
        _check_values(again.mod["main"], target, 64, 64, hw, block, 4)
    assert [s.mod.script() for s in dlight.default_schedule_variants(prim, target, 2)] == \
        [s.mod.script() for s in scheds[:2]]
    assert winograd.Winograd().variants(_func(128, 128, 28, 16, 6), target, 4) == []


@pytest.mark.parametrize("mcpu,block", [("sapphirerapids", 16), ("haswell", 8)])
def test_a_staged_kernel_has_variants_of_its_products_tile(mcpu, block):
    """A weight beyond L2 goes stage by stage (Chain); its variants resize the register tile
    of the alpha^2 products (the stage with the most work) and leave the transforms as the
    rule has them: each a different kernel, replayed from its trace, computing the
    convolution."""
    target = Target(f"llvm -num-cores=2 -mcpu={mcpu}")
    prim = _func(256, 256, 14, block, 4)           # ResNet-18's 14x14 stage: 4.2 MB
    scheds = dlight.default_schedule_variants(prim, target, limit=4)
    assert len(scheds) == 4
    want = dlight.default_schedule(prim, target)["main"]
    assert structural_hash(scheds[0].mod["main"].body) == structural_hash(want.body)
    scripts = [s.mod.script() for s in scheds]
    assert len(set(scripts)) == 4
    for sch in scheds[1:]:
        # one parallel loop per stage, as the rule's: only the products' tile differs
        assert len(_parallel_loops(sch.mod["main"])) == len(_parallel_loops(scheds[0].mod["main"]))
        again = Schedule(prim)
        sch.trace.apply_to_schedule(again, remove_postproc=False)
        assert again.mod.script() == sch.mod.script()
    _check_values(scheds[3].mod["main"], target, 256, 256, 14, block, 2)


def test_the_products_tile_with_u_and_w_swapped_is_measured_first():
    """The rule's model scores a 4 x 2 tile and a 2 x 4 one the same (accumulators, FMAs per
    loaded value) and keeps the first it finds; the swapped tile is the first variant, so the
    tuner always measures it (ResNet-18's 14x14 products on a Zen 3: 2 x 4 ran 0.87x the
    rule's time, and was tenth in nearest order)."""
    target = Target("llvm -num-cores=2 -mcpu=haswell")
    cpu = CPUInfo.of(target)
    _, plans = Chain._schedule(_func(256, 256, 14, 8, 6), cpu, None)
    plan, facts = max(plans.values(), key=lambda pf: pf[1].work())
    tiles = [(p.U, p.W, p.V) for p in tile_variants(plan, facts, cpu, 8)]
    assert plan.U != plan.W and tiles[1] == (plan.W, plan.U, plan.V), tiles
    base = (4, 2, 8)
    others = [(5, 2, 8), (4, 1, 8), (2, 4, 8), (3, 2, 8), (2, 4, 16)]
    assert min(others, key=lambda t: swapped_then_nearest_key(t, base)) == (2, 4, 8)
