"""The statement-level Simplify pass: context from loops, blocks, lets and ifs."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import tir
from workbench.ir.module import IRModule
from workbench.tir import stmt as S
from workbench.tir.interpreter import run
from workbench.tir.printer import expr_text
from workbench.tir.transform.simplify import Simplify, simplify_func, simplify_stmt

from arith_tiled_matmul import build, index_exprs  # noqa: E402  (test helper next to this file)


def _loop(var, extent, body):
    return S.For(var, tir.const(0), extent if not isinstance(extent, int) else tir.const(extent),
                 "serial", body)


def _matmul_check(f, g, m, n, k):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((m, k)).astype("float32")
    b = rng.standard_normal((k, n)).astype("float32")
    flat = f.buffers[0].ndim == 1
    outs = []
    for func in (f, g):
        c = np.zeros((m * n,) if flat else (m, n), "float32")
        run(func, a.reshape(-1) if flat else a, b.reshape(-1) if flat else b, c)
        outs.append(c.reshape(m, n))
    np.testing.assert_allclose(outs[1], a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(outs[0], outs[1])


@pytest.mark.parametrize("flat", [False, True])
def test_tiled_matmul_indices_become_clean(flat):
    f = build(flat=flat)
    g = simplify_func(f)
    texts = [expr_text(e) for e in index_exprs(g)]
    if flat:
        assert texts[0] == ("f0 // 8 * 32768 + g // 2 * 4096 + i2 * 512 + f0 % 8 * 64"
                            " + g % 2 * 32 + g2 * 8 + j2")
    else:
        assert texts[-3:] == ["f0 // 8 * 64 + g // 2 * 8 + i2",
                              "f0 % 8 * 64 + g % 2 * 32 + g2 * 8 + j2", "k0 * 8 + k1"]
    assert simplify_func(g) is g  # a second run finds nothing to do


@pytest.mark.parametrize("flat", [False, True])
def test_tiled_matmul_results_unchanged(flat):
    m = n = k = 16
    f = build(m, n, k, ti=(2, 4, 2), tj=(2, 4, 2), tk=(4, 4), flat=flat)
    g = simplify_func(f)
    assert g is not f
    _matmul_check(f, g, m, n, k)


def test_provable_if_is_removed_and_unit_loop_kept():
    A = tir.decl_buffer((16,), "float32", "A")
    i, u = tir.Var("i"), tir.Var("u")
    store = S.BufferStore(A, tir.const(1.0, "float32"), (i + u,))
    body = _loop(i, 16, _loop(u, 1, S.IfThenElse(i + u < 16, store,
                                                 S.BufferStore(A, tir.const(2.0), (i,)))))
    out = simplify_stmt(body)
    inner = out.body
    assert isinstance(inner, S.For) and inner.extent.value == 1  # kept for another pass
    assert isinstance(inner.body, S.BufferStore)
    assert expr_text(inner.body.indices[0]) == "i"  # u has a single value, 0


def test_false_if_without_else_becomes_noop():
    A = tir.decl_buffer((16,), "float32", "A")
    i = tir.Var("i")
    body = _loop(i, 16, S.IfThenElse(i >= 16, S.BufferStore(A, tir.const(1.0), (i,))))
    out = simplify_stmt(body)
    assert isinstance(out.body, S.Evaluate)


def test_if_condition_known_inside_branches():
    A = tir.decl_buffer((64,), "int32", "A")
    i = tir.Var("i")
    then = S.BufferStore(A, tir.select(i < 40, i, 0), (tir.min(i, 31),))
    other = S.BufferStore(A, tir.const(1), (tir.max(i, 32) - 32,))
    out = simplify_stmt(_loop(i, 64, S.IfThenElse(i < 32, then, other)))
    s_then, s_else = out.body.then_case, out.body.else_case
    assert expr_text(s_then.indices[0]) == "i" and expr_text(s_then.value) == "i"
    assert expr_text(s_else.indices[0]) == "i - 32"


def test_symbolic_extent_facts():
    n = tir.Var("n")
    A = tir.decl_buffer((n,), "float32", "A")
    i = tir.Var("i")
    body = _loop(i, n, S.IfThenElse(i < n, S.BufferStore(A, tir.const(0.0), (tir.min(i, n - 1),))))
    out = simplify_stmt(body)
    assert isinstance(out.body, S.BufferStore)
    assert out.body.indices[0] is i


def test_conditions_reading_buffers_are_not_assumed():
    # A store in the branch may change what the condition read, so nothing is assumed.
    A = tir.decl_buffer((4,), "int32", "A")
    cond = A[0] < 5
    body = S.IfThenElse(cond, S.SeqStmt((
        S.BufferStore(A, tir.const(10), (tir.const(0),)),
        S.BufferStore(A, tir.select(A[0] < 5, 1, 2), (tir.const(1),)))))
    out = simplify_stmt(body)
    assert out is body


def test_let_with_simple_value_is_inlined():
    A = tir.decl_buffer((16,), "int32", "A")
    i, t, w = tir.Var("i"), tir.Var("t"), tir.Var("w")
    inner = S.LetStmt(w, i * 2 + 1, S.BufferStore(A, w, (t % 16,)))
    body = _loop(i, 8, S.LetStmt(t, i, inner))
    out = simplify_stmt(body)
    let = out.body
    assert isinstance(let, S.LetStmt) and let.var is w  # t was inlined and dropped
    assert let.body.indices[0] is i


def test_nothing_to_do_returns_same_objects():
    f = build(flat=True)
    g = simplify_func(simplify_func(f))
    assert simplify_func(g) is g
    mod = IRModule({"main": g})
    assert Simplify()(mod) is mod
    mod2 = Simplify()(IRModule({"main": f}))
    assert mod2["main"] is not f


def test_block_predicate_is_assumed():
    A = tir.decl_buffer((10,), "float32", "A")
    i, vi = tir.Var("i"), tir.Var("vi")
    block = S.Block((S.IterVar(tir.Range.from_min_extent(0, 16), vi, S.IterType.DATA_PAR),),
                    (), (), "B", S.BufferStore(A, tir.const(1.0), (tir.min(vi, 15),)))
    realize = S.BlockRealize((i,), i < 10, block)
    out = simplify_stmt(_loop(i, 16, realize))
    assert out.body.block.body.indices[0] is vi
