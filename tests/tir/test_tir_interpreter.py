"""The reference TIR interpreter on hand-built functions: semantics and refusals."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import tir
from workbench.tir import op
from workbench.tir.interpreter import InterpreterError, run
from workbench.tir.stmt import IterType


def _func(params, body):
    return tir.prim_func(params, body)


def _loop(v, n, body):
    return tir.For(v, op.const(0), op.const(n), tir.ForKind.SERIAL, body)


def _ints(dtype, *values):
    return np.array(values, dtype)


def _unary_int_func(dtype_in, dtype_out, n, f):
    """B[i] = f(A[i]) over n elements."""
    A = tir.decl_buffer((n,), dtype_in, "A")
    B = tir.decl_buffer((n,), dtype_out, "B")
    i = tir.Var("i")
    return _func([A, B], _loop(i, n, tir.BufferStore(B, f(A[i]), (i,))))


def test_integer_division_flavours():
    a = _ints("int32", -7, -7, 7, 7, -1)
    d = _ints("int32", 2, -2, 2, -2, 3)
    A = tir.decl_buffer((5,), "int32", "A")
    D = tir.decl_buffer((5,), "int32", "D")
    outs = {name: tir.decl_buffer((5,), "int32", name) for name in ("td", "tm", "fd", "fm")}
    i = tir.Var("i")
    x, y = A[i], D[i]
    body = tir.SeqStmt(tuple(
        tir.BufferStore(outs[k], e, (i,)) for k, e in (
            ("td", op.truncdiv(x, y)), ("tm", op.truncmod(x, y)),
            ("fd", op.floordiv(x, y)), ("fm", op.floormod(x, y)))))
    f = _func([A, D, *outs.values()], _loop(i, 5, body))
    res = {k: np.zeros(5, "int32") for k in outs}
    run(f, a, d, *res.values())
    np.testing.assert_array_equal(res["td"], np.trunc(a / d).astype("int32"))
    np.testing.assert_array_equal(res["tm"], np.fmod(a, d))
    np.testing.assert_array_equal(res["fd"], a // d)
    np.testing.assert_array_equal(res["fm"], a % d)


def test_division_by_zero_is_reported():
    f = _unary_int_func("int32", "int32", 1, lambda x: op.floordiv(x, x - x + 0 * x))
    with pytest.raises(InterpreterError, match="division by zero"):
        run(f, _ints("int32", 3), np.zeros(1, "int32"))


def test_casts_wrap_and_truncate():
    f = _unary_int_func("int32", "int8", 4, lambda x: op.cast("int8", x))
    out = np.zeros(4, "int8")
    run(f, _ints("int32", 127, 128, 300, -129), out)
    np.testing.assert_array_equal(out, _ints("int32", 127, 128, 300, -129).astype("int8"))
    g = _unary_int_func("float32", "int32", 4, lambda x: op.cast("int32", x))
    out = np.zeros(4, "int32")
    run(g, np.array([1.7, -1.7, 2.5, -0.2], "float32"), out)
    np.testing.assert_array_equal(out, [1, -1, 2, 0])
    h = _unary_int_func("int32", "int32", 2, lambda x: x * 65536 * 65536 + x)  # wraps in int32
    out = np.zeros(2, "int32")
    run(h, _ints("int32", 3, -5), out)
    np.testing.assert_array_equal(out, [3, -5])


def test_if_then_else_is_lazy_and_select_is_not():
    A = tir.decl_buffer((4,), "float32", "A")
    B = tir.decl_buffer((6,), "float32", "B")
    i = tir.Var("i")
    cond = op.all(i >= 1, i < 5)
    lazy = op.if_then_else(cond, A[i - 1], 0.0)
    f = _func([A, B], _loop(i, 6, tir.BufferStore(B, lazy, (i,))))
    a, b = np.arange(1, 5, dtype="float32"), np.zeros(6, "float32")
    run(f, a, b)
    np.testing.assert_array_equal(b, [0, 1, 2, 3, 4, 0])
    eager = op.select(cond, A[i - 1], 0.0)
    g = _func([A, B], _loop(i, 6, tir.BufferStore(B, eager, (i,))))
    with pytest.raises(InterpreterError, match="out of bounds"):
        run(g, a, b)


def test_block_init_predicate_and_alloc_buffers():
    """A hand-written reduction: row sums of the first 3 rows via a predicate, through a
    block-local temporary."""
    A = tir.decl_buffer((4, 5), "float32", "A")
    B = tir.decl_buffer((4,), "float32", "B")
    i, k, vi, vk = tir.Var("i"), tir.Var("k"), tir.Var("vi"), tir.Var("vk")
    ivs = (tir.IterVar(tir.Range(op.const(0), op.const(4)), vi, IterType.DATA_PAR),
           tir.IterVar(tir.Range(op.const(0), op.const(5)), vk, IterType.COMM_REDUCE))
    blk = tir.Block(ivs, (), (), "B", tir.BufferStore(B, B[vi] + A[vi, vk], (vi,)),
                    init=tir.BufferStore(B, op.const(0.0), (vi,)))
    realize = tir.BlockRealize((i, k), i < 3, blk)
    root = tir.BlockRealize((), op.const(True), tir.Block((), (), (), "root",
                                                         _loop(i, 4, _loop(k, 5, realize))))
    a, b = np.ones((4, 5), "float32"), np.full(4, -1.0, "float32")
    run(_func([A, B], root), a, b)
    np.testing.assert_array_equal(b, [5, 5, 5, -1])


def test_binding_outside_the_block_domain_is_an_error():
    B = tir.decl_buffer((4,), "float32", "B")
    i, vi = tir.Var("i"), tir.Var("vi")
    iv = tir.IterVar(tir.Range(op.const(0), op.const(2)), vi, IterType.DATA_PAR)
    blk = tir.Block((iv,), (), (), "B", tir.BufferStore(B, op.const(1.0), (vi,)))
    f = _func([B], _loop(i, 4, tir.BlockRealize((i,), op.const(True), blk)))
    with pytest.raises(InterpreterError, match="outside its domain"):
        run(f, np.zeros(4, "float32"))


def test_uninitialised_allocations_are_nan():
    A = tir.decl_buffer((2,), "float32", "A")
    T = tir.decl_buffer((2,), "float32", "T")
    i = tir.Var("i")
    root = tir.Block((), (), (), "root", _loop(i, 2, tir.BufferStore(A, T[i], (i,))),
                     alloc_buffers=(T,))
    a = np.zeros(2, "float32")
    run(_func([A], tir.BlockRealize((), op.const(True), root)), a)
    assert np.isnan(a).all()


def test_allocate_declbuffer_let_if_assert_and_vectors():
    A = tir.decl_buffer((8,), "float32", "A")
    B = tir.decl_buffer((8,), "float32", "B")
    tmp_data = tir.Var("tmp", "handle")
    Tmp = tir.decl_buffer((8,), "float32", "tmp", data=tmp_data)
    x = tir.Var("x")
    ramp = tir.Ramp(op.const(0), op.const(1), 8, "int32x8")
    two = tir.Broadcast(op.const(2.0), 8, "float32x8")
    copy_in = tir.BufferStore(Tmp, A.vload((ramp,)) * two, (ramp,))
    i = tir.Var("i")
    body = tir.SeqStmt((
        copy_in,
        tir.LetStmt(x, op.const(3), _loop(i, 8, tir.IfThenElse(
            i < x, tir.BufferStore(B, Tmp[i], (i,)), tir.BufferStore(B, op.const(-1.0), (i,))))),
    ))
    body = tir.AssertStmt(op.const(True), tir.StringImm("never"), body)
    alloc = tir.Allocate(tmp_data, "float32", (op.const(8),), op.const(True),
                         tir.DeclBuffer(Tmp, body))
    a, b = np.arange(8, dtype="float32"), np.zeros(8, "float32")
    run(_func([A, B], alloc), a, b)
    np.testing.assert_array_equal(b, [0, 2, 4, -1, -1, -1, -1, -1])


def test_failed_assert_and_unbound_variable():
    B = tir.decl_buffer((1,), "float32", "B")
    f = _func([B], tir.AssertStmt(op.const(False), tir.StringImm("bad shape"),
                                  tir.Evaluate(op.const(0))))
    with pytest.raises(InterpreterError, match="bad shape"):
        run(f, np.zeros(1, "float32"))
    y = tir.Var("y")
    g = _func([B], tir.BufferStore(B, op.cast("float32", y), (op.const(0),)))
    with pytest.raises(InterpreterError, match="'y'"):
        run(g, np.zeros(1, "float32"))
    out = np.zeros(1, "float32")
    run(g, out, shape_vars={"y": 7})
    assert out[0] == 7


def test_flattened_buffer_shares_the_parameter_memory():
    A = tir.decl_buffer((2, 3), "float32", "A")
    flat = tir.Buffer(A.data, "float32", (op.const(6),), "A_flat")
    i = tir.Var("i")
    f = _func([A], _loop(i, 6, tir.BufferStore(flat, op.cast("float32", i), (i,))))
    a = np.zeros((2, 3), "float32")
    run(f, a)
    np.testing.assert_array_equal(a.reshape(-1), np.arange(6))


def test_argument_checks():
    A = tir.decl_buffer((2,), "float32", "A")
    f = _func([A], tir.Evaluate(op.const(0)))
    with pytest.raises(TypeError, match="1 argument"):
        run(f)
    with pytest.raises(TypeError, match="dtype float32"):
        run(f, np.zeros(2, "int32"))
    with pytest.raises(InterpreterError, match="shape"):
        run(f, np.zeros(3, "float32"))
    with pytest.raises(ValueError, match="contiguous"):
        run(f, np.zeros(4, "float32")[::2])


def test_intrinsics_match_numpy():
    x = np.array([-2.5, -0.5, 0.5, 1.5, 2.5], "float32")
    cases = {
        "exp": np.exp(x), "tanh": np.tanh(x), "floor": np.floor(x), "ceil": np.ceil(x),
        "round": np.array([-3, -1, 1, 2, 3], "float32"), "nearbyint": np.rint(x),
        "fabs": np.abs(x), "trunc": np.trunc(x), "sigmoid": 1 / (1 + np.exp(-x)),
    }
    for name, ref in cases.items():
        f = _unary_int_func("float32", "float32", 5, lambda v, n=name: op.call(n, v))
        out = np.zeros(5, "float32")
        run(f, x, out)
        np.testing.assert_allclose(out, ref, rtol=1e-6, err_msg=name)
    g = _unary_int_func("int32", "int32", 3, lambda v: op.shift_right(v, 1) + op.popcount(v))
    out = np.zeros(3, "int32")
    run(g, _ints("int32", -8, 7, 6), out)
    np.testing.assert_array_equal(out, [-4 + 29, 3 + 3, 3 + 2])


def test_match_buffer_views_the_source_region():
    A = tir.decl_buffer((3, 4), "float32", "A")
    sub = tir.decl_buffer((2,), "float32", "sub")
    i, vi, j = tir.Var("i"), tir.Var("vi"), tir.Var("j")
    region = tir.BufferRegion(A, (tir.Range(vi, op.const(1)), tir.Range(op.const(1), op.const(2))))
    iv = tir.IterVar(tir.Range(op.const(0), op.const(3)), vi, IterType.DATA_PAR)
    blk = tir.Block((iv,), (), (), "fill", _loop(j, 2, tir.BufferStore(
        sub, op.cast("float32", vi * 10 + j), (j,))),
        match_buffers=(tir.MatchBufferRegion(sub, region),))
    f = _func([A], _loop(i, 3, tir.BlockRealize((i,), op.const(True), blk)))
    a = np.zeros((3, 4), "float32")
    run(f, a)
    np.testing.assert_array_equal(a, [[0, 0, 1, 0], [0, 10, 11, 0], [0, 20, 21, 0]])
