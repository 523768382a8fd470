"""Buffer indices are computed in 64-bit arithmetic (workbench/codegen/wide_index.py).

The regression: the schedule fuzzer's case random:1986 (conv2d NHWC stride 2; fuse, a
non-dividing split, compute_inline of the padding, reorder) built to wrong numbers at LLVM
-O1 and above while the interpreter and -O0 were right: LLVM 22's loop vectorizer turned the
weight load ``W[... + ff % 4]`` into one consecutive 8-wide load of int32 indices that LLVM had
widened itself. With int64 indices the same schedule is right at every opt level."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import te, tir
from workbench.codegen.wide_index import widen
from workbench.tir import expr as E
from workbench.tir.arith.evaluate import evaluate
from workbench.tir.schedule import Schedule


def _conv2d_nhwc_s2() -> tir.PrimFunc:
    X = te.placeholder((1, 7, 6, 3), "float32", name="X")
    W = te.placeholder((3, 3, 3, 4), "float32", name="W")
    return te.create_prim_func([X, W, wb.topi.nn.conv2d_nhwc(X, W, 2, 1, 1)])


def _conv2d_nhwc_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    xp = np.pad(x, ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((1, 4, 3, 4), "float64")
    for yy in range(4):
        for xx in range(3):
            patch = xp[0, 2 * yy:2 * yy + 3, 2 * xx:2 * xx + 3, :]
            out[0, yy, xx] = np.einsum("hwc,hwcf->f", patch, w)
    return out


def _fuzz_case_1986() -> Schedule:
    sch = Schedule(_conv2d_nhwc_s2())
    conv = sch.get_sblock("conv2d_nhwc")
    _, yy, xx, ff, ry, rx, rc = sch.get_loops(conv)
    sch.fuse(yy, xx, ff)
    _, _, ry, _, _ = sch.get_loops(conv)
    sch.split(ry, [None, 2, 1])
    sch.compute_inline(sch.get_sblock("pad_temp"))
    nn, fused, ry_0, ry_1, ry_2, rx, rc = sch.get_loops(conv)
    sch.reorder(ry_0, rx, ry_2, ry_1, fused, nn, rc)
    return sch


@pytest.mark.parametrize("opt_level", [0, 1, 3])
def test_fuzz_case_1986_is_right_at_every_opt_level(opt_level):
    sch = _fuzz_case_1986()
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 7, 6, 3)).astype("float32")
    w = rng.standard_normal((3, 3, 3, 4)).astype("float32")
    lib = wb.build(sch.mod, f"llvm -opt-level={opt_level}")
    out = wb.nd.empty((1, 4, 3, 4), "float32")
    lib["main"](wb.nd.array(x), wb.nd.array(w), out)
    np.testing.assert_allclose(out.numpy(), _conv2d_nhwc_ref(x, w), rtol=1e-5, atol=1e-5)


def test_the_rendered_addresses_are_int64_arithmetic():
    sch = _fuzz_case_1986()
    ll = wb.build(sch.mod, "llvm").get_source("ll")
    geps = [line for line in ll.splitlines() if "getelementptr inbounds float" in line]
    assert geps and all(", i64 %" in g for g in geps), geps
    # the floor-modulo of the weight index is computed in 64 bits, not widened by LLVM (the
    # padding condition, not an address, keeps its int32 arithmetic)
    assert "srem i64" in ll


def test_widen_keeps_values_and_shares_subtrees():
    i, j = E.Var("i", "int32"), E.Var("j", "int32")
    common = tir.floormod(i, 4)
    idx = common * 12 + tir.floordiv(common + j, 3) - tir.min(j, 2)
    wide = widen(idx)
    assert wide.dtype == "int64"
    # every leaf variable is cast once; the shared subtree stays one node
    casts: list[E.Cast] = []
    mods: list[E.FloorMod] = []

    def walk(e):
        if isinstance(e, E.Cast):
            casts.append(e)
            return
        if isinstance(e, E.FloorMod):
            mods.append(e)
        for child in (getattr(e, "a", None), getattr(e, "b", None)):
            if child is not None:
                walk(child)
    walk(wide)
    assert {c.value.name for c in casts} == {"i", "j"}
    assert len({id(m) for m in mods}) == 1
    for iv, jv in [(0, 0), (5, 1), (7, 9), (13, 2), (-6, -7)]:
        want = (iv % 4) * 12 + ((iv % 4) + jv) // 3 - min(jv, 2)
        assert evaluate(idx, {i: iv, j: jv}) == want
        assert evaluate(wide, {i: iv, j: jv}) == want
    # vectors: a ramp keeps its lanes; int64 and float expressions are left alone
    ramp = E.Ramp(i, E.IntImm("int32", 1), 8, "int32x8")
    assert widen(ramp).dtype == "int64x8" and widen(ramp).lanes == 8
    k = E.Var("k", "int64")
    assert widen(k) is k
