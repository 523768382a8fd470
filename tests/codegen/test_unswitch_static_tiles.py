"""UnswitchTilePredicates on static kernels: the last register tile of an extent its tile
does not divide (a 1x1 convolution's 5 pixels a tile over a 14-pixel row) checks its extra
pixels once, outside the reduction loop, and every tile size computes the right values."""
from __future__ import annotations

import numpy as np
import pytest

import workbench as wb
from workbench import dlight, te
from workbench.relax.op.registry import NUMPY_RULES
from workbench.script import tir as T
from workbench.target import Target
from workbench.tir.expr import LT
from workbench.tir.functor import post_order_visit
from workbench.tir.stmt import For, IfThenElse
from workbench.tir.transform.unswitch_predicates import unswitch_tile_predicates
from workbench.topi.nn.conv2d_nchwc import conv2d_nchwc


def _conv1x1(cin: int, cout: int, hw: int, block: int):
    x = te.placeholder((1, cin // block, hw, hw, block), name="x")
    w = te.placeholder((cout // block, cin // block, 1, 1, block, block), name="w")
    y = conv2d_nchwc(x, w, 1, 0, 1, 1, f"NCHW{block}c", f"OIHW{block}i{block}o",
                     f"NCHW{block}c")
    return te.create_prim_func([x, w, y])


def _ifs(stmt) -> list[IfThenElse]:  # noqa: ANN001
    found: list[IfThenElse] = []
    post_order_visit(stmt, lambda s: found.append(s) if isinstance(s, IfThenElse) else None)
    return found


def _loops(stmt, kind: str | None = None) -> list[For]:  # noqa: ANN001
    found: list[For] = []
    post_order_visit(stmt, lambda s: found.append(s) if isinstance(s, For) and
                     kind in (None, s.kind) else None)
    return found


@pytest.mark.parametrize("mcpu,block,hw", [("sapphirerapids", 16, 14), ("haswell", 8, 13)])
def test_the_reduction_loop_of_a_static_tile_has_no_check(mcpu, block, hw):
    target = Target(f"llvm -num-cores=2 -mcpu={mcpu}")
    func = dlight.default_schedule(_conv1x1(128, 64, hw, block), target)
    lowered = wb.lower(func)["main"]
    (par,) = _loops(lowered.body, "parallel")
    assert isinstance(par.body, IfThenElse), "the tile's check was not hoisted"
    assert isinstance(par.body.condition, LT)
    # neither the whole tile nor the partial one checks anything inside its loops
    for version in (par.body.then_case, par.body.else_case):
        for loop in _loops(version, "serial"):
            assert not _ifs(loop.body), loop
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 128 // block, hw, hw, block)).astype("float32")
    w = rng.standard_normal((64 // block, 128 // block, 1, 1, block, block)).astype("float32")
    if not target.runs_on():
        pytest.skip(f"this host cannot run -mcpu={mcpu} code (the IR was checked)")
    out = wb.nd.empty((1, 64 // block, hw, hw, block), "float32")
    wb.build(func, target)["main"](wb.nd.array(x), wb.nd.array(w), out)
    want = NUMPY_RULES["relax.nn.conv2d"](x, w, (1, 1), (0,) * 4, (1, 1), 1, f"NCHW{block}c",
                                          f"OIHW{block}i{block}o", "float32",
                                          f"NCHW{block}c")
    np.testing.assert_allclose(out.numpy(), want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("n", range(9, 17))
def test_every_tail_of_a_static_tile_is_right(n):
    """An 8-row tile over n rows: a whole tile, and a last tile of every size."""
    target = Target("llvm -num-cores=1")
    a = te.placeholder((n, 32), name="a")
    b = te.placeholder((32, 48), name="b")
    k = te.reduce_axis((0, 32), name="k")
    c = te.compute((n, 48), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="c")
    func = dlight.default_schedule(te.create_prim_func([a, b, c]), target)
    rng = np.random.default_rng(n)
    av = rng.standard_normal((n, 32)).astype("float32")
    bv = rng.standard_normal((32, 48)).astype("float32")
    out = wb.nd.empty((n, 48), "float32")
    wb.build(func, target)["main"](wb.nd.array(av), wb.nd.array(bv), out)
    np.testing.assert_allclose(out.numpy(), av @ bv, rtol=1e-4, atol=1e-4)


def test_only_a_check_against_a_constant_is_hoisted_from_a_static_loop():
    """``i < 5`` is hoisted (the loop over ``j`` runs without it); ``5 <= i`` and a check
    reading a buffer stay inside; the values are the same."""
    @T.prim_func
    def split_copy(a: T.Buffer((10, 8), "float32"), b: T.Buffer((10, 8), "float32")):
        for i in range(10):
            for j in range(8):
                if i < 5:
                    b[i, j] = a[i, j]
                if 5 <= i:
                    b[i, j] = a[i, j] * T.float32(2)
                if a[i, 0] < T.float32(0):
                    b[i, j] = T.float32(0)

    out = unswitch_tile_predicates(split_copy)
    top = out.body
    assert isinstance(top, For) and isinstance(top.body, IfThenElse)
    assert isinstance(top.body.condition, LT) and "5" in str(top.body.condition)
    for version in (top.body.then_case, top.body.else_case):
        assert len(_ifs(version)) == 2          # 5 <= i and the buffer's check
    rng = np.random.default_rng(1)
    a = rng.standard_normal((10, 8)).astype("float32")
    a[3, 0] = a[7, 0] = -1.0
    got = wb.nd.empty((10, 8), "float32")
    wb.build(out)["split_copy"](wb.nd.array(a), got)
    ref = np.where(np.arange(10)[:, None] < 5, a, 2 * a)
    np.testing.assert_array_equal(got.numpy(), np.where(a[:, :1] < 0, 0, ref))
