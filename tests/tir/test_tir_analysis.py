"""The analysis floor (workbench.tir.analysis) and the schedule's public index.

The variable collector is checked against an independent visitor over random expressions and a
whole PrimFunc; the integer interval evaluator against values computed by the reference
evaluator at random points inside the variables' ranges.
"""
from __future__ import annotations

import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench import te, tir
from workbench.tir import analysis
from workbench.tir import expr as E
from workbench.tir.arith import evaluate
from workbench.tir.functor import IRVisitor

X, Y, Z = tir.Var("x"), tir.Var("y"), tir.Var("z")
VARS = (X, Y, Z)
BUF = tir.decl_buffer((tir.Var("n"), 8), "int32", "B")  # shape var n is never an index

small = st.integers(-10, 10)
positive = st.integers(1, 9)


def _leaf() -> st.SearchStrategy:
    return st.one_of(st.sampled_from(VARS), small.map(lambda c: tir.const(c, "int32")))


def _extend(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        st.builds(lambda a, b: a + b, children, children),
        st.builds(lambda a, b: a - b, children, children),
        st.builds(lambda a, c: a * c, children, small),
        st.builds(lambda a, c: E.FloorDiv(a, tir.const(c), "int32"), children, positive),
        st.builds(lambda a, c: E.FloorMod(a, tir.const(c), "int32"), children, positive),
        st.builds(tir.min, children, children),
        st.builds(tir.max, children, children),
        st.builds(lambda a, b, c: tir.select(E.LT(a, b, "bool"), b, c), children, children,
                  children),
    )


def _extend_with_loads(children: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(
        _extend(children),
        st.builds(lambda a, b: E.BufferLoad(BUF, (a, b), "int32"), children, children),
        st.builds(lambda a: tir.Cast("int64", a), children),
    )


int_exprs = st.recursive(_leaf(), _extend, max_leaves=10)
any_exprs = st.recursive(_leaf(), _extend_with_loads, max_leaves=10)
ranges = st.tuples(st.integers(-20, 20), st.integers(1, 30))
SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _visitor_vars(node) -> set:
    """The reference: an IRVisitor that records every Var it meets (buffers not entered)."""
    found = set()

    class _V(IRVisitor):
        def visit_Var(self, v: tir.Var) -> None:
            found.add(v)

    _V().visit(node)
    return found


@SETTINGS
@given(any_exprs)
def test_collect_vars_matches_a_visitor(e):
    assert analysis.collect_vars(e) == _visitor_vars(e)
    w = tir.Var("w")
    out = {w}
    assert analysis.collect_vars(e, out) is out  # adds to the caller's set
    assert out == _visitor_vars(e) | {w}


def test_collect_vars_over_a_prim_func_skips_buffer_shapes():
    n = tir.Var("n")
    A = te.placeholder((n, 16), name="A")
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="C")
    func = te.create_prim_func([A, C])
    assert analysis.collect_vars(func.body) == _visitor_vars(func.body)
    assert analysis.collect_vars([func.body, X]) == _visitor_vars(func.body) | {X}


def test_vars_in_order_first_appearance_or_every_occurrence():
    e = X + X * Y + Z * Y
    assert analysis.vars_in_order(e) == [X, Y, Z]
    assert analysis.vars_in_order(e, unique=False) == [X, X, Y, Z, Y]


def test_const_int_and_const_extent():
    assert analysis.const_int(tir.const(7, "int64")) == 7
    assert analysis.const_int(X) is None
    loop = tir.For(X, tir.const(0), tir.const(12), "serial", tir.Evaluate(tir.const(0)))
    assert analysis.const_extent(loop) == 12
    assert analysis.const_extent(loop.replace(extent=Y)) is None


@SETTINGS
@given(int_exprs, ranges, ranges, ranges, st.randoms(use_true_random=False))
def test_const_interval_contains_every_value(e, rx, ry, rz, rnd: random.Random):
    env = {v: (lo, lo + ext - 1) for v, (lo, ext) in zip(VARS, (rx, ry, rz))}
    got = analysis.const_interval(e, env)
    if got is None:
        return
    lo, hi = got
    for _ in range(16):
        point = {v: rnd.randint(a, b) for v, (a, b) in env.items()}
        assert lo <= evaluate(e, point) <= hi, (e, got, point)


def test_const_interval_is_none_for_a_variable_without_a_range():
    assert analysis.const_interval(X + 1, {}) is None


def test_index_bounds_is_what_te_regions_exported():
    from workbench.te import regions
    assert regions.block_regions is analysis.block_regions
    assert regions.bound is analysis.index_bounds
    lo, hi = analysis.index_bounds(X * 2 + 1, {X: (tir.const(0), tir.const(3))})
    assert (evaluate(lo, {}), evaluate(hi, {})) == (1, 7)


def _matmul() -> tir.PrimFunc:
    A = te.placeholder((16, 16), name="A")
    B = te.placeholder((16, 16), name="B")
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((16, 16), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return te.create_prim_func([A, B, C])


def test_func_index_is_the_current_functions_index():
    sch = tir.Schedule(_matmul())
    index = sch.func_index()
    assert sch.func_index() is index  # cached while the IR is unchanged
    assert sch._index() is index      # the primitives' name for it
    assert index.func is sch.mod[sch.func_working_on]
    assert set(index.blocks) == {"root", "C"} and index.block_order == ["root", "C"]
    i, _, _ = sch.get_loops(sch.get_sblock("C"))
    sch.split(i, factors=[4, 4])
    after = sch.func_index()
    assert after is not index and after.func is sch.mod[sch.func_working_on]
    assert len(after.blocks["C"].loops) == 4


def test_has_block_and_snapshot():
    import pickle
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1, name="B")
    C = te.compute((8,), lambda i: B[i] * 2, name="C")
    sch = tir.Schedule(te.create_prim_func([A, C]), seed=3)
    b, c = sch.get_sblock("B"), sch.get_sblock("C")
    assert sch.has_block(b) and not sch.has_block("B")
    sch.compute_inline(b)
    assert not sch.has_block(b) and sch.has_block(c)
    back = tir.Schedule.from_snapshot(pickle.loads(pickle.dumps(sch.snapshot())))
    assert str(back.trace) == str(sch.trace)
    # the trace's handles travel with their table: the rebuilt schedule resolves them
    got_b, got_c = (i.outputs[0] for i in back.trace.insts if i.kind.name == "GetSBlock")
    assert not back.has_block(got_b) and back.get(got_c).name_hint == "C"
    assert back.mod["main"].script() == sch.mod["main"].script()
