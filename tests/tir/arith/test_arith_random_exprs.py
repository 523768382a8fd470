"""Random integer expressions: simplification keeps every value, bounds contain every value.

For each generated expression over a few int32 variables with random ranges we evaluate the
original and the simplified expression at random points inside the ranges (with the reference
evaluator, independent of the simplifier) and require equal values and dtypes; the constant
bound and the interval set must contain every value seen.
"""
from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench import tir
from workbench.tir import expr as E
from workbench.tir.arith import NEG_INF, POS_INF, Analyzer, evaluate
from workbench.tir.buffer import Range

X, Y, Z = tir.Var("x"), tir.Var("y"), tir.Var("z")
P = tir.Var("p")  # a positive variable, usable as a divisor
VARS = (X, Y, Z, P)

nonzero = st.integers(-9, 9).filter(lambda c: c != 0)
small = st.integers(-10, 10)


def _leaf() -> st.SearchStrategy:
    return st.one_of(st.sampled_from(VARS), small.map(lambda c: tir.const(c, "int32")))


def _affine(children):
    # the shapes split and fuse produce: outer * factor + inner, divided or taken modulo
    return st.builds(lambda a, c, b: a * c + b, children, st.integers(1, 16), children)


def _extend(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.builds(lambda a, b: a + b, children, children),
        st.builds(lambda a, b: a - b, children, children),
        st.builds(lambda a, c: a * c, children, small),
        st.builds(lambda a, b: E.Mul(a, b, "int32"), children, children),
        st.builds(lambda a, c: E.FloorDiv(a, tir.const(c), "int32"), children, nonzero),
        st.builds(lambda a, c: E.FloorMod(a, tir.const(c), "int32"), children, nonzero),
        st.builds(lambda a, c: E.Div(a, tir.const(c), "int32"), children, nonzero),
        st.builds(lambda a, c: E.Mod(a, tir.const(c), "int32"), children, nonzero),
        st.builds(lambda a: E.FloorDiv(a, P, "int32"), children),
        st.builds(lambda a: E.FloorMod(a, P, "int32"), children),
        st.builds(tir.min, children, children),
        st.builds(tir.max, children, children),
        st.builds(lambda c, a, b: tir.select(c, a, b), _cond(children), children, children),
        st.builds(lambda c, a, b: tir.if_then_else(c, a, b), _cond(children), children,
                  children),
        st.builds(lambda a, b: tir.Cast("int32", tir.Cast("int64", a) * 3 + tir.Cast("int64", b)),
                  children, children),
        _affine(children),
    )


def _cond(children: st.SearchStrategy) -> st.SearchStrategy:
    cmp = st.sampled_from([E.LT, E.LE, E.GT, E.GE, E.EQ, E.NE])
    base = st.builds(lambda k, a, b: k(a, b, "bool"), cmp, children, children)
    return st.one_of(
        base,
        st.builds(tir.logical_and, base, base),
        st.builds(tir.logical_or, base, base),
        st.builds(tir.logical_not, base),
    )


int_exprs = st.recursive(_leaf(), _extend, max_leaves=10)
bool_exprs = _cond(int_exprs)
ranges = st.tuples(st.integers(-20, 20), st.integers(1, 30))


def _setup(rx, ry, rz, rp):
    an = Analyzer()
    bounds = {X: rx, Y: ry, Z: rz, P: (1, rp)}
    for v, (lo, ext) in bounds.items():
        an.bind(v, Range.from_min_extent(lo, ext))
    return an, bounds


def _points(bounds, rnd: random.Random, n: int = 12):
    corners = [{v: lo for v, (lo, ext) in bounds.items()},
               {v: lo + ext - 1 for v, (lo, ext) in bounds.items()}]
    return corners + [{v: rnd.randint(lo, lo + ext - 1) for v, (lo, ext) in bounds.items()}
                      for _ in range(n)]


SETTINGS = settings(max_examples=250, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SETTINGS
@given(int_exprs, ranges, ranges, ranges, st.integers(1, 9), st.randoms(use_true_random=False))
def test_simplify_keeps_values_and_bounds_contain_them(e, rx, ry, rz, rp, rnd):
    an, bounds = _setup(rx, ry, rz, rp)
    s = an.simplify(e)
    assert s.dtype == e.dtype
    b = an.const_int_bound(e)
    relaxed = an.int_set(e, {X: Range.from_min_extent(*rx), Y: Range.from_min_extent(*ry)})
    for env in _points(bounds, rnd):
        want = evaluate(e, env)
        assert evaluate(s, env) == want, (e, s, env)
        assert b.min_value <= want <= b.max_value, (e, b, env)
        if relaxed.min_value is not NEG_INF:
            assert evaluate(relaxed.min_value, env) <= want, (e, relaxed, env)
        if relaxed.max_value is not POS_INF:
            assert want <= evaluate(relaxed.max_value, env), (e, relaxed, env)


@SETTINGS
@given(bool_exprs, ranges, ranges, ranges, st.integers(1, 9), st.randoms(use_true_random=False))
def test_simplify_keeps_conditions(c, rx, ry, rz, rp, rnd):
    an, bounds = _setup(rx, ry, rz, rp)
    s = an.simplify(c)
    assert s.dtype == "bool"
    for env in _points(bounds, rnd):
        assert bool(evaluate(s, env)) == bool(evaluate(c, env)), (c, s, env)


@settings(max_examples=120, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(bool_exprs, int_exprs, ranges, ranges, ranges, st.integers(1, 9),
       st.randoms(use_true_random=False))
def test_simplify_under_constraint_holds_where_constraint_holds(c, e, rx, ry, rz, rp, rnd):
    an, bounds = _setup(rx, ry, rz, rp)
    with an.constraint_scope(c):
        s = an.simplify(e)
        sc = an.simplify(c)
    for env in _points(bounds, rnd, 30):
        if evaluate(c, env):
            assert evaluate(s, env) == evaluate(e, env), (c, e, s, env)
            assert evaluate(sc, env), (c, sc, env)
