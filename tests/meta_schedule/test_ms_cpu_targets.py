"""The tuner's CPU paths for every host kind this project runs on, tested on any host.

For explicit targets -- Sapphire Rapids (AVX-512, VNNI, BF16, AMX), Ice Lake server (AVX-512,
VNNI), Zen 4 (AVX-512, VNNI, BF16), Haswell and Zen 3 (AVX2) -- and uint8 x int8, bf16 and
float32 products (numpy's matmul layout ``B[k, j]`` and the dense layout ``B[j, k]``, sizes the
micro-kernels divide and sizes they do not):

- design-space generation keeps the untensorized space and the tensorized ones the target's
  features allow;
- a sample of every design space passes every postprocessor;
- the candidates compile for the target, and the assembly holds the instructions the kernel
  was meant to use (``vpdpbusd``, ``tdpbusd``, ``vdpbf16ps``, ``tdpbf16ps``, zmm / ymm FMAs);
- the numbers: a candidate runs against numpy where the host has the target's features;
  elsewhere its packing and tiling run in the TIR interpreter, every postprocessor applied
  but the tensorization (whose intrinsics are tested on their own where the CPU has them).

Nothing here depends on the host's CPU, so an AVX2 machine catches AVX-512 / VNNI / AMX
regressions and an AVX-512 one catches AVX2 regressions.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import workbench as wb
from workbench import te
from workbench.meta_schedule.postproc import RewriteTensorize
from workbench.meta_schedule.search_strategy.base import TraceApplier
from workbench.meta_schedule.tune_context import TuneContext
from workbench.runtime import cpu_state
from workbench.target import Target
from workbench.tir import interpreter

ZMM_FMA = r"vfmadd\w+ps\s+[^\n]*zmm"
YMM_FMA = r"vfmadd\w+ps\s+[^\n]*ymm"

#: mcpu -> what its design spaces must offer for (int8, bf16, float32) products that the
#: kernels divide: a prefix of the tensorized intrinsic per family, and the instructions the
#: compiled candidates of that family must contain.
KINDS = {
    "sapphirerapids": {"int8": {"amx_int8_mk_": r"\btdpbusd\b", "avx512_vnni_mk_": r"vpdpbusd",
                                "dot_16x4_vnni": r"vpdpbusd"},
                       "bf16": {"amx_bf16_mk_": r"\btdpbf16ps\b",
                                "avx512_bf16_mk_": r"vdpbf16ps", "dot_16x2_bf16": r"vdpbf16ps"},
                       "fp32": {"avx512_fp32_mk_": ZMM_FMA}},
    "icelake-server": {"int8": {"avx512_vnni_mk_": r"vpdpbusd", "dot_16x4_vnni": r"vpdpbusd"},
                       "bf16": {"dot_16x2_bf16_generic": None},
                       "fp32": {"avx512_fp32_mk_": ZMM_FMA}},
    "znver4": {"int8": {"avx512_vnni_mk_": r"vpdpbusd", "dot_16x4_vnni": r"vpdpbusd"},
               "bf16": {"avx512_bf16_mk_": r"vdpbf16ps", "dot_16x2_bf16": r"vdpbf16ps"},
               "fp32": {"avx512_fp32_mk_": ZMM_FMA}},
    "haswell": {"int8": {}, "bf16": {}, "fp32": {}},
    "znver3": {"int8": {}, "bf16": {}, "fp32": {}},
}
AVX512 = ("sapphirerapids", "icelake-server", "znver4")


def _target(mcpu: str) -> Target:
    return Target(f"llvm -num-cores=2 -mcpu={mcpu}")


def product(dtype: str, layout: str, m: int, n: int, k: int):
    """``C = A @ B`` with B ``[k, n]`` ("matmul") or ``[n, k]`` ("dense"), accumulating in
    int32 (uint8 x int8) or float32 (bf16, float32); no weight is marked layout-free, as a
    user's ``te`` function is not."""
    a_t, b_t, acc = {"int8": ("uint8", "int8", "int32"), "bf16": ("bfloat16",) * 2 + ("float32",),
                     "fp32": ("float32",) * 3}[dtype]
    A = te.placeholder((m, k), a_t, name="A")
    B = te.placeholder((k, n) if layout == "matmul" else (n, k), b_t, name="B")
    r = te.reduce_axis((0, k), name="r")
    pick = (lambda i, j: B[r, j]) if layout == "matmul" else (lambda i, j: B[j, r])
    C = te.compute((m, n), lambda i, j: te.sum(
        A[i, r].astype(acc) * pick(i, j).astype(acc), axis=r), name="C")
    return te.create_prim_func([A, B, C])


def _annotated_family(space) -> str:
    """The kernel family a design space was tiled for: ``amx_int8_mk``, ``dot_16x4_vnni``..."""
    for i in space.trace.insts:
        if i.kind.name == "Annotate" and i.attrs[0] == "meta_schedule.auto_tensorize":
            return re.sub(r"_\d+x\d+(x\d+)?$", "", str(i.inputs[-1]))
    return ""


def _family(sch) -> str:
    names = [i.attrs[0] for i in sch.trace.insts if i.kind.name == "Tensorize"]
    return names[0] if names else ""


def _space_candidates(func, target: Target, tries: int = 6):
    """(design spaces, one candidate per space or None, the postprocessors)."""
    ctx = TuneContext(func, target=target, space_generator="post-order-apply",
                      search_strategy="replay-trace", rand_state=5)
    spaces = ctx.generate_design_space()
    procs = ctx.space_generator.postprocs
    applier = TraceApplier(ctx.mod, procs)
    out = []
    for k, space in enumerate(spaces):
        trace = space.trace.simplified(remove_postproc=True)
        found = None
        for j in range(tries):
            found = applier.apply(trace, seed=11 * k + j, keep_decisions=False)
            if found is not None:
                break
        out.append(found)
    return spaces, out, procs, applier


#: Whether this process really may run AMX code: asked of the OS here, before any test fakes
#: the grant below (on an AMX host this is the request that makes running the kernels legal).
AMX_GRANTED = cpu_state.available("amx")


@pytest.fixture(autouse=True)
def _amx_state_granted(monkeypatch):
    # Design spaces for an AMX target must not depend on whether this host's OS grants the
    # tile state (an AMD or AVX2 host has none): where it does not, the grant is faked for
    # the space and compile steps, and _host_runs (AMX_GRANTED) keeps the code from running.
    if not AMX_GRANTED:
        monkeypatch.setitem(cpu_state._granted, "amx", None)


def _host_runs(target: Target) -> bool:
    return target.runs_on() and (not target.has_feature("amx-tile") or AMX_GRANTED)


def _inputs(dtype: str, layout: str, m: int, n: int, k: int):
    rng = np.random.default_rng(m * 7 + n)
    if dtype == "int8":
        a = rng.integers(0, 256, (m, k)).astype("uint8")
        b = rng.integers(-128, 128, (k, n) if layout == "matmul" else (n, k)).astype("int8")
        want = a.astype(np.int64) @ (b if layout == "matmul" else b.T).astype(np.int64)
        return a, b, np.zeros((m, n), "int32"), want.astype(np.int32)
    import ml_dtypes
    dt = ml_dtypes.bfloat16 if dtype == "bf16" else np.float32
    # small integers: exact in float32 whatever the order of the sums
    a = rng.integers(-4, 5, (m, k)).astype(dt)
    b = rng.integers(-4, 5, (k, n) if layout == "matmul" else (n, k)).astype(dt)
    want = a.astype(np.float32) @ (b if layout == "matmul" else b.T).astype(np.float32)
    return a, b, np.zeros((m, n), "float32"), want


@pytest.mark.parametrize("mcpu", sorted(KINDS))
@pytest.mark.parametrize("dtype", ["int8", "bf16", "fp32"])
@pytest.mark.parametrize("layout", ["matmul", "dense"])
def test_every_space_passes_the_postprocessors_and_compiles_to_the_expected_code(
        mcpu, dtype, layout):
    target = _target(mcpu)
    m, n, k = 32, 64, 64
    func = product(dtype, layout, m, n, k)
    spaces, cands, _, applier = _space_candidates(func, target)
    assert all(c is not None for c in cands), (
        f"{mcpu} {dtype} {layout}: a design space whose samples all fail:\n"
        f"{applier.summary()}\nfirst: {applier.failures.first}")
    by_family: dict[str, object] = {}
    for c in cands:
        by_family.setdefault(_family(c), c)
    assert "" in by_family, "the untensorized space is always kept"
    expected = dict(KINDS[mcpu][dtype])
    if dtype == "fp32" and layout == "dense":
        # the float32 micro-kernels read B[k, n]; RewriteLayout re-lays out only a layout-free
        # weight, and a user's te function marks none: the space would fail every sample
        expected.pop("avx512_fp32_mk_", None)
        assert not any(f.startswith("avx512_fp32_mk_") for f in by_family)
    for prefix in expected:
        assert any(f.startswith(prefix) for f in by_family), \
            f"{mcpu} {dtype} {layout}: no {prefix}* space; got {sorted(by_family)}"
    if mcpu not in AVX512:
        assert set(by_family) <= {"", "dot_16x4_u8i8i32_generic", "dot_16x2_bf16_generic"}
    runs = _host_runs(target)
    a, b, c_out, want = _inputs(dtype, layout, m, n, k)
    for fam, sch in by_family.items():
        lib = wb.build(sch.mod, target=target)
        asm = lib.get_source("asm")
        pattern = next((p for pre, p in expected.items() if fam.startswith(pre)), None)
        if pattern is not None:
            assert re.search(pattern, asm), f"{mcpu} {fam or 'plain'}: no {pattern} in the code"
        if mcpu not in AVX512:
            assert "zmm" not in asm, f"{mcpu}: AVX-512 registers in {fam or 'plain'} code"
        if runs:
            out = wb.nd.array(c_out.copy())
            lib["main"](wb.nd.array(a), wb.nd.array(b), out)
            np.testing.assert_array_equal(out.numpy(), want)


@pytest.mark.parametrize("mcpu", sorted(KINDS))
@pytest.mark.parametrize("layout", ["matmul", "dense"])
def test_default_schedules_use_the_target_vector_registers(mcpu, layout):
    """What an untuned model runs (workbench.dlight): float32 products on FMAs of the
    target's vector width, int8 ones on no AVX-512 register where the target has none."""
    from workbench.dlight import default_schedule
    target = _target(mcpu)
    runs = _host_runs(target)
    for dtype in ("fp32", "int8"):
        func = product(dtype, layout, 32, 64, 64)
        lib = wb.build(default_schedule(func, target), target=target)
        asm = lib.get_source("asm")
        if dtype == "fp32":
            assert re.search(ZMM_FMA if mcpu in AVX512 else YMM_FMA, asm), mcpu
        if mcpu not in AVX512:
            assert "zmm" not in asm, f"{mcpu}: AVX-512 registers in the {dtype} default schedule"
        if runs:
            a, b, c_out, want = _inputs(dtype, layout, 32, 64, 64)
            out = wb.nd.array(c_out)
            lib["main"](wb.nd.array(a), wb.nd.array(b), out)
            np.testing.assert_allclose(out.numpy(), want, rtol=1e-6)


@pytest.mark.parametrize("mcpu", ["sapphirerapids", "znver4", "haswell"])
@pytest.mark.parametrize("layout", ["matmul", "dense"])
@pytest.mark.parametrize("size", [100, 128, 200, 512, 1000])
def test_int8_spaces_at_sizes_the_kernels_do_not_divide(mcpu, layout, size):
    """The issue's sizes: every space yields valid candidates; the tensorized ones exist where
    16 divides the output columns and 4 the reduction (128, 512), and never elsewhere."""
    func = product("int8", layout, size, size, size)
    spaces, cands, _, applier = _space_candidates(func, _target(mcpu), tries=4)
    assert spaces and all(c is not None for c in cands), applier.failures.first
    families = {_family(c) for c in cands}
    assert "" in families
    if mcpu == "haswell" or size % 16:
        assert families == {""}
    else:
        assert any(f.startswith(("avx512_vnni_mk_", "amx_int8_mk_", "dot_16x4_vnni"))
                   for f in families), families


@pytest.mark.parametrize("mcpu,dtype", [("sapphirerapids", "int8"), ("sapphirerapids", "bf16")])
@pytest.mark.parametrize("layout", ["matmul", "dense"])
def test_tensorized_candidates_pack_and_tile_correctly_in_the_interpreter(mcpu, dtype, layout):
    """The numbers without the CPU feature: each tensorized space's candidate with every
    postprocessor but the tensorization, run by the TIR interpreter (packing copy, tiling,
    blockized tile as plain loops) against numpy."""
    target = _target(mcpu)
    m, n, k = 16, 32, 16
    func = product(dtype, layout, m, n, k)
    ctx = TuneContext(func, target=target, space_generator="post-order-apply",
                      search_strategy="replay-trace", rand_state=5)
    spaces = ctx.generate_design_space()
    procs = [p for p in ctx.space_generator.postprocs if not isinstance(p, RewriteTensorize)]
    applier = TraceApplier(ctx.mod, procs)
    tensorized = {}     # one space per kernel family (a Sapphire Rapids target has them all)
    for space in spaces:
        fam = _annotated_family(space)
        if fam:
            tensorized.setdefault(fam, space)
    assert len(tensorized) >= 2, sorted(tensorized)   # the 16 x P dot product, a micro-kernel
    tensorized = list(tensorized.values())
    a, b, c_out, want = _inputs(dtype, layout, m, n, k)
    for space in tensorized:
        sch = applier.apply(space.trace.simplified(remove_postproc=True), seed=3,
                            keep_decisions=False)
        assert sch is not None, applier.failures.first
        out = c_out.copy()
        interpreter.run(sch.mod["main"], a, b, out)
        np.testing.assert_array_equal(out, want)
