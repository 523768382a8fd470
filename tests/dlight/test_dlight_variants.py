"""The default schedule's neighbouring register tiles (``dlight.default_schedule_variants``),
which ``tune_relax`` measures first: the rule's own schedule comes first, every neighbour is a
different kernel within the target's register budget, and each computes what the plain loop
nest computes -- for an AVX-512 and an AVX2 target on any host (run where the host can)."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import dlight
from workbench.dlight.base import CPUInfo
from workbench.dlight.cpu import Matmul, SpatialReduction
from workbench.dlight.cpu.anchor import match_anchor
from workbench.dlight.cpu.common import inline_cheap_stages
from workbench.dlight.cpu.variants import tile_variants
from workbench.ir.structural import structural_hash
from workbench.meta_schedule.relax_integration import extract_tasks
from workbench.meta_schedule.utils import estimate_tir_flops
from workbench.target import Target
from workbench.tir.schedule import Schedule

from dlight_cases import CASES, DTYPES, make_module

TARGETS = {"avx512": "llvm -mcpu=skylake-avx512 -num-cores=2",
           "avx2": "llvm -mcpu=haswell -num-cores=2"}
HOST = Target("llvm")
CAN_RUN = {"avx512": HOST.has_feature("avx512f"), "avx2": HOST.has_feature("avx2")}
# Outer products (register tile U x W x V) and spatial reductions (V x U), blocked and plain.
NAMES = ["matmul_nn", "matmul_odd", "batch_matmul", "dense_bias_gelu", "conv_nchw_s1",
         "conv_nchw_s2", "conv_nhwc", "depthwise_nchw", "max_pool", "sum_axis0"]


def _kernel(name: str, target: Target):
    """The case's heaviest fused kernel, as the tuner sees it (its task module)."""
    params, body, _, _ = CASES[name]
    mod = make_module(params, body, DTYPES.get(name))
    task = max(extract_tasks(mod, target), key=lambda t: estimate_tir_flops(t.dispatched[0]))
    return task.dispatched[0]


@pytest.mark.parametrize("kind", sorted(TARGETS))
@pytest.mark.parametrize("name", NAMES)
def test_variants_start_at_the_default_and_compute_the_same(name, kind):
    target = Target(TARGETS[kind])
    mod = _kernel(name, target)
    func = mod["main"]
    scheds = dlight.default_schedule_variants(func, target, 6)
    # the rule's own schedule first: what a build without records uses
    want = dlight.default_schedule(mod, target)["main"]
    assert structural_hash(scheds[0].mod["main"].body) == structural_hash(want.body)
    assert 1 < len(scheds) <= 6, f"{name}: no neighbouring tile"
    hashes = {structural_hash(s.mod["main"].body) for s in scheds}
    assert len(hashes) == len(scheds), f"{name}: two variants are the same kernel"
    # every variant's trace replays on the task module (what the database stores)
    for s in scheds:
        again = Schedule(mod)
        s.trace.apply_to_schedule(again, remove_postproc=False)
        assert structural_hash(again.mod["main"].body) == structural_hash(s.mod["main"].body)
    if not CAN_RUN[kind]:
        pytest.skip(f"host lacks {kind} (built and replayed only)")
    rng = np.random.default_rng(0)
    args = []
    for p in func.params:
        buf = func.buffer_map[p]
        shape = [int(d.value) for d in buf.shape]
        args.append(rng.standard_normal(shape).astype(buf.dtype))
    ref = wb.build(mod, target)   # the plain loop nest (no default schedule)
    ref_args = [wb.nd.array(a) for a in args]
    ref["main"](*ref_args)
    out_index = len(args) - 1
    for k, s in enumerate(scheds):
        rt = wb.build(s.mod, target)
        got = [wb.nd.array(a) for a in args]
        rt["main"](*got)
        np.testing.assert_allclose(got[out_index].numpy(), ref_args[out_index].numpy(),
                                   rtol=1e-4, atol=1e-4, err_msg=f"{name} variant {k}")


@pytest.mark.parametrize("kind", sorted(TARGETS))
def test_tiles_stay_within_the_register_budget(kind):
    target = Target(TARGETS[kind])
    cpu = CPUInfo.of(target)
    for name, rule, least in (("conv_nchw_s1", Matmul(), 5), ("matmul_nn", Matmul(), 5),
                              ("depthwise_nchw", SpatialReduction(), 2)):
        func = _kernel(name, target)["main"]
        sch = Schedule(func)
        inline_cheap_stages(sch)
        shape = match_anchor(sch)
        plan = rule.plan(sch, shape.anchor, cpu)
        plans = tile_variants(plan, shape.anchor, cpu, 64)
        assert plans[0] is plan and len(plans) >= least, (name, plans)
        lanes = cpu.lanes("float32")
        budget = (24 if cpu.vector_bits >= 512 else 8) if plan.w is not None else \
            cpu.accumulators
        for p in plans:
            assert -(-p.V // lanes) * p.W * p.U <= budget, (name, p)
            assert (p.v, p.u, p.w, p.pack) == (plan.v, plan.u, plan.w, plan.pack)
        sizes = [(p.V, p.U, p.W) for p in plans]
        assert len(set(sizes)) == len(sizes)
        # nearest first: the second plan differs from the rule's in one size by one step
        assert sum(a != b for a, b in zip(sizes[1], sizes[0])) == 1


def test_kernels_without_a_register_tile_have_one_variant_and_bad_limits_are_refused():
    target = Target(TARGETS["avx512"])
    func = _kernel("softmax", target)["main"]
    assert len(dlight.default_schedule_variants(func, target, 8)) == 1
    with pytest.raises(ValueError, match="limit must be an int >= 1"):
        dlight.default_schedule_variants(func, target, 0)
    with pytest.raises(TypeError, match="expects a PrimFunc"):
        dlight.default_schedule_variants("main", target, 2)
