"""Integer index arithmetic is rendered once per basic block (codegen/index_cse.py), and only
where reusing it is right: never under a rebound variable, never across branches."""
import re

import numpy as np
import pytest

import workbench as wb
from workbench import tir
from workbench.tir import stmt as S


def _index(i):
    # A fresh tree each call: structurally equal, never the same object.
    return tir.floordiv(i, 3) * 4 + tir.floormod(i, 3)


def _count(ll: str, op: str) -> int:
    return len(re.findall(rf"= {op} ", ll))


def test_a_repeated_index_is_computed_once():
    n = 30
    A = tir.decl_buffer((40,), "float32", "A")
    B = tir.decl_buffer((40,), "float32", "B")
    i = tir.Var("i")
    body = S.For(i, tir.const(0), tir.const(n), "serial", S.SeqStmt((
        S.BufferStore(B, A[_index(i)] + 1.0, (_index(i),)),
        S.BufferStore(A, B[_index(i)] * 2.0, (_index(i),)),
    )))
    rt = wb.build(tir.prim_func([A, B], body))
    ll = rt.get_source("ll")
    # Four accesses with the same index: one division, where there were four.
    assert _count(ll, "sdiv") == 1, ll
    a = np.random.default_rng(0).random(40, dtype="float32")
    na, nb = wb.nd.array(a), wb.nd.array(np.zeros(40, "float32"))
    rt["main"](na, nb)
    idx = np.arange(n) // 3 * 4 + np.arange(n) % 3
    want_b = np.zeros(40, "float32")
    want_b[idx] = a[idx] + 1
    want_a = a.copy()
    want_a[idx] = want_b[idx] * 2
    np.testing.assert_allclose(nb.numpy(), want_b, rtol=1e-6)
    np.testing.assert_allclose(na.numpy(), want_a, rtol=1e-6)


@pytest.mark.not_roundtrip("one let variable bound twice (a hand-built unrolled body)")
def test_a_variable_rebound_in_the_same_block_is_not_confused():
    # An unrolled body binds the same let variable twice in one block: x * 7 % 64 under the
    # second binding must not reuse the value computed under the first.
    n = 32
    B = tir.decl_buffer((64,), "int32", "B")
    i, x = tir.Var("i"), tir.Var("x")
    body = S.For(i, tir.const(0), tir.const(n), "serial", S.SeqStmt((
        S.LetStmt(x, i * 2, S.BufferStore(B, x, (tir.floormod(x * 7, 64),))),
        S.LetStmt(x, i * 2 + 1, S.BufferStore(B, x, (tir.floormod(x * 7, 64),))),
    )))
    rt = wb.build(tir.prim_func([B], body))
    b = wb.nd.array(np.full(64, -1, "int32"))
    rt["main"](b)
    want = np.full(64, -1, "int32")
    xs = np.arange(64)
    want[xs * 7 % 64] = xs
    np.testing.assert_array_equal(b.numpy(), want)


def test_branches_do_not_share_values():
    # The same index in the then-branch, the else-branch and after the if: each block
    # computes its own (a value from one branch does not dominate the other or the join;
    # LLVM's verifier would reject the module).
    n = 30
    A = tir.decl_buffer((40,), "float32", "A")
    B = tir.decl_buffer((40,), "float32", "B")
    C = tir.decl_buffer((40,), "float32", "C")
    i = tir.Var("i")
    body = S.For(i, tir.const(0), tir.const(n), "serial", S.SeqStmt((
        S.IfThenElse(A[i] > 0.5,
                     S.BufferStore(B, tir.const(1.0, "float32"), (_index(i),)),
                     S.BufferStore(B, tir.const(2.0, "float32"), (_index(i),))),
        S.BufferStore(C, B[_index(i)] + 10.0, (_index(i),)),
    )))
    rt = wb.build(tir.prim_func([A, B, C], body))
    assert _count(rt.get_source("ll"), "sdiv") == 3
    a = np.random.default_rng(0).random(40, dtype="float32")
    arrays = [wb.nd.array(v) for v in (a, np.zeros(40, "float32"), np.zeros(40, "float32"))]
    rt["main"](*arrays)
    idx = np.arange(n) // 3 * 4 + np.arange(n) % 3
    want_b = np.zeros(40, "float32")
    want_b[idx] = np.where(a[:n] > 0.5, 1.0, 2.0)
    want_c = np.zeros(40, "float32")
    want_c[idx] = want_b[idx] + 10
    np.testing.assert_array_equal(arrays[1].numpy(), want_b)
    np.testing.assert_array_equal(arrays[2].numpy(), want_c)
