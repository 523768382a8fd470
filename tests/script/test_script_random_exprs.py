"""Random TIR expressions (hypothesis) read back as the same tree: precedence, dtypes of
literals (int32 bare, others as T.int64(3)), casts and calls survive print -> parse."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from workbench import tir
from workbench.ir.structural import first_mismatch
from workbench.script import from_source
from workbench.tir import Var

A, B = Var("a", "int32"), Var("b", "int32")
L = Var("l", "int64")
X = Var("x", "float32")


def _bin(classes, left, right, dtype):
    return st.builds(lambda cls, p, q: cls(p, q, dtype), st.sampled_from(classes), left, right)


_ARITH = [tir.Add, tir.Sub, tir.Mul, tir.Min, tir.Max]
_CMP = [tir.EQ, tir.NE, tir.LT, tir.LE, tir.GT, tir.GE]


def _ints(var, dtype):
    leaves = st.one_of(st.just(var), st.integers(-20, 20).map(lambda v: tir.IntImm(dtype, v)))
    divisors = st.integers(1, 7).map(lambda v: tir.IntImm(dtype, v))
    return st.recursive(leaves, lambda inner: st.one_of(
        _bin(_ARITH, inner, inner, dtype),
        _bin([tir.FloorDiv, tir.FloorMod, tir.Div, tir.Mod], inner, divisors, dtype)),
        max_leaves=8)


i32 = st.deferred(lambda: st.one_of(
    _ints(A, "int32"), _bin(_ARITH, _ints(B, "int32"), _ints(A, "int32"), "int32"),
    st.builds(lambda c, p, q: tir.Select(c, p, q, "int32"), bools, _ints(A, "int32"),
              _ints(B, "int32")),
    st.builds(lambda e: tir.Cast("int32", e), _ints(L, "int64"))))
bools = st.deferred(lambda: st.one_of(
    st.sampled_from([True, False]).map(lambda v: tir.IntImm("bool", int(v))),
    _bin(_CMP, _ints(A, "int32"), _ints(B, "int32"), "bool"),
    _bin([tir.And, tir.Or], bools, bools, "bool"),
    st.builds(tir.Not, bools)))
floats = st.recursive(
    st.one_of(st.just(X), st.floats(-4, 4, width=32).map(lambda v: tir.FloatImm("float32", v)),
              st.builds(lambda e: tir.Cast("float32", e), i32)),
    lambda inner: st.one_of(
        _bin(_ARITH + [tir.Div], inner, inner, "float32"),
        st.builds(lambda e: tir.Call("float32", "exp", (e,)), inner),
        st.builds(lambda c, p, q: tir.Call("float32", "if_then_else", (c, p, q)), bools, inner,
                  inner)),
    max_leaves=8)


def _func(value, dtype):
    out = tir.decl_buffer((1,), dtype, "out")
    store = tir.BufferStore(out, value, (tir.IntImm("int32", 0),))
    return tir.prim_func([A, B, L, X, out], store)


@settings(max_examples=150, deadline=None)
@given(st.one_of(i32.map(lambda e: (e, "int32")), bools.map(lambda e: (e, "bool")),
                 floats.map(lambda e: (e, "float32"))))
def test_random_expression_reads_back_as_the_same_tree(case):
    value, dtype = case
    func = _func(value, dtype)
    text = func.script()
    back = from_source(text)
    bad = first_mismatch(func, back)
    assert bad is None, f"{bad.path}: {bad.reason}\n{text}"
