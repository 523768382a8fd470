"""Hand-written TIR statements and dtypes through codegen, checked against numpy."""
import numpy as np
import pytest

import workbench as wb
from workbench import tir
from workbench.tir import stmt as S


def _run(f, *arrays):
    rt = wb.build(f)
    nds = [wb.nd.array(a) for a in arrays]
    rt["main"](*nds)
    return [x.numpy() for x in nds]


@pytest.mark.not_roundtrip("one loop variable defined by two loops (a hand-built body)")
def test_allocate_on_stack_and_heap():
    for n in (64, 100_000):  # 256 B on the stack; 400 KB on the heap
        A = tir.decl_buffer((n,), "float32", "A")
        B = tir.decl_buffer((n,), "float32", "B")
        T = tir.decl_buffer((n,), "float32", "T", scope="local")
        i = tir.Var("i")
        body = S.Allocate(T.data, "float32", (tir.const(n),), tir.const(True), S.DeclBuffer(T, S.SeqStmt((
            S.For(i, tir.const(0), tir.const(n), "serial", S.BufferStore(T, A[i] + 1.0, (i,))),
            S.For(i, tir.const(0), tir.const(n), "serial", S.BufferStore(B, T[i] * T[i], (i,))),
        ))))
        a = np.random.rand(n).astype("float32")
        _, b = _run(tir.prim_func([A, B], body), a, np.zeros(n, "float32"))
        np.testing.assert_allclose(b, (a + 1) ** 2, rtol=1e-6)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_floordiv_floormod_negative(dtype):
    n = 64
    A = tir.decl_buffer((n,), dtype, "A")
    Q = tir.decl_buffer((n,), dtype, "Q")
    R = tir.decl_buffer((n,), dtype, "R")
    i = tir.Var("i")
    d = tir.const(-3 if dtype != "int8" else 5, dtype)
    body = S.For(i, tir.const(0), tir.const(n), "serial", S.SeqStmt((
        S.BufferStore(Q, tir.floordiv(A[i], d), (i,)),
        S.BufferStore(R, tir.floormod(A[i], d), (i,)),
    )))
    a = np.arange(-32, 32).astype(dtype)
    _, q, r = _run(tir.prim_func([A, Q, R], body), a, np.zeros(n, dtype), np.zeros(n, dtype))
    np.testing.assert_array_equal(q, a // d.value)
    np.testing.assert_array_equal(r, a % d.value)


def test_if_while_let_select():
    n = 16
    A = tir.decl_buffer((n,), "int32", "A")
    B = tir.decl_buffer((n,), "int32", "B")
    i, x = tir.Var("i"), tir.Var("x")
    # B[i] = number of halvings to reach 0, with a let and a select
    C = tir.decl_buffer((1,), "int32", "C", scope="local")
    loop_body = S.Allocate(C.data, "int32", (tir.const(1),), tir.const(True), S.DeclBuffer(C, S.SeqStmt((
        S.BufferStore(C, A[i], (tir.const(0),)),
        S.BufferStore(B, tir.const(0), (i,)),
        S.While(C[tir.const(0)] > 0, S.SeqStmt((
            S.BufferStore(C, C[tir.const(0)] // 2, (tir.const(0),)),
            S.BufferStore(B, B[i] + 1, (i,)),
        ))),
        S.IfThenElse(A[i] < 0, S.BufferStore(B, tir.select(A[i] < -5, -2, -1), (i,))),
        S.LetStmt(x, B[i] * 10, S.BufferStore(B, x + 1, (i,))),
    ))))
    f = tir.prim_func([A, B], S.For(i, tir.const(0), tir.const(n), "serial", loop_body))
    a = np.arange(-8, 8).astype("int32")
    _, b = _run(f, a, np.zeros(n, "int32"))
    expect = np.array([int(v).bit_length() if v > 0 else (-2 if v < -5 else -1 if v < 0 else 0)
                       for v in a]) * 10 + 1
    np.testing.assert_array_equal(b, expect)


def test_assert_failure_raises_and_process_survives():
    A = tir.decl_buffer((4,), "float32", "A")
    body = S.AssertStmt(A[tir.const(0)] > 0.0, tir.StringImm("A[tir.const(0)] must be positive"),
                        S.BufferStore(A, A[tir.const(0)] * 2.0, (tir.const(0),)))
    rt = wb.build(tir.prim_func([A], body))
    good = wb.nd.array(np.ones(4, "float32"))
    rt["main"](good)
    assert good.numpy()[0] == 2
    with pytest.raises(RuntimeError, match="main"):
        rt["main"](wb.nd.array(-np.ones(4, "float32")))


def test_symbolic_shape():
    n = tir.SizeVar("n")
    A = tir.decl_buffer((n, 3), "float32", "A")
    B = tir.decl_buffer((n, 3), "float32", "B")
    i, j = tir.Var("i"), tir.Var("j")
    body = S.For(i, tir.const(0), n, "parallel", S.For(j, tir.const(0), tir.const(3), "serial",
                 S.BufferStore(B, A[i, j] * 3.0, (i, j))))
    rt = wb.build(tir.prim_func([A, B], body))
    for rows in (1, 7, 1000):
        a = np.random.rand(rows, 3).astype("float32")
        b = wb.nd.empty((rows, 3), "float32")
        rt["main"](wb.nd.array(a), b)
        np.testing.assert_allclose(b.numpy(), a * 3, rtol=1e-6)


def test_casts_across_dtypes():
    n = 8
    A = tir.decl_buffer((n,), "float32", "A")
    I8 = tir.decl_buffer((n,), "int8", "I8")
    U8 = tir.decl_buffer((n,), "uint8", "U8")
    F64 = tir.decl_buffer((n,), "float64", "F64")
    Bo = tir.decl_buffer((n,), "bool", "Bo")
    H = tir.decl_buffer((n,), "float16", "H")
    i = tir.Var("i")
    body = S.For(i, tir.const(0), tir.const(n), "serial", S.SeqStmt((
        S.BufferStore(I8, tir.cast("int8", A[i]), (i,)),
        S.BufferStore(U8, tir.cast("uint8", tir.cast("int32", A[i]) + 200), (i,)),
        S.BufferStore(F64, tir.cast("float64", A[i]) / 3.0, (i,)),
        S.BufferStore(Bo, A[i] > 1.5, (i,)),
        S.BufferStore(H, tir.cast("float16", A[i]) * tir.const(0.5, "float16"), (i,)),
    )))
    a = np.array([-3.7, -1, 0, 0.5, 1.5, 2.25, 7, 100], "float32")
    out = _run(tir.prim_func([A, I8, U8, F64, Bo, H], body), a, np.zeros(n, "int8"),
               np.zeros(n, "uint8"), np.zeros(n), np.zeros(n, bool), np.zeros(n, "float16"))
    np.testing.assert_array_equal(out[1], a.astype("int8"))
    np.testing.assert_array_equal(out[2], (a.astype("int32") + 200).astype("uint8"))
    np.testing.assert_allclose(out[3], a.astype("float64") / 3.0)
    np.testing.assert_array_equal(out[4], a > 1.5)
    np.testing.assert_allclose(out[5], a.astype("float16") * np.float16(0.5))
