"""const_int_bound and int_set."""
from __future__ import annotations

from workbench import tir
from workbench.tir import expr as E
from workbench.tir.arith import NEG_INF, POS_INF, Analyzer, ConstIntBound, IntervalSet
from workbench.tir.buffer import Range
from workbench.tir.printer import expr_text


def _an(**extents: int):
    an = Analyzer()
    vs = []
    for name, ext in extents.items():
        v = tir.Var(name)
        an.bind(v, Range.from_min_extent(0, ext))
        vs.append(v)
    return an, vs


def test_const_int_bound_basics():
    an, (i, j) = _an(i=16, j=8)
    assert an.const_int_bound(i * 8 + j) == ConstIntBound(0, 127)
    assert an.const_int_bound(i - j) == ConstIntBound(-7, 15)
    assert an.const_int_bound((i * 8 + j) // 8) == ConstIntBound(0, 15)
    assert an.const_int_bound(i % 4) == ConstIntBound(0, 3)
    assert an.const_int_bound(i + 4 - 4) == ConstIntBound(0, 15)
    assert an.const_int_bound(tir.min(i, 3)) == ConstIntBound(0, 3)
    assert an.const_int_bound(tir.select(i < 3, j, 100)) == ConstIntBound(0, 100)
    assert an.const_int_bound(tir.truncmod(i - 8, 5)) == ConstIntBound(-4, 4)


def test_const_int_bound_infinities():
    an = Analyzer()
    x64 = tir.Var("x", "int64")
    b = an.const_int_bound(x64)
    assert b.min_value == ConstIntBound.NEG_INF and b.max_value == ConstIntBound.POS_INF
    assert an.const_int_bound(x64 * 2 + 1).max_value == ConstIntBound.POS_INF
    b32 = an.const_int_bound(tir.Var("y"))
    assert (b32.min_value, b32.max_value) == (-(2**31), 2**31 - 1)
    assert an.const_int_bound(tir.SizeVar("n")).min_value == 0
    assert an.const_int_bound(x64 % 8) == ConstIntBound(0, 7)
    assert an.const_int_bound(tir.Cast("int8", tir.Var("z"))) == ConstIntBound(-128, 127)


def test_update_and_override():
    an = Analyzer()
    x = tir.Var("x")
    an.update(x, ConstIntBound(2, 5))
    assert an.const_int_bound(x * 2) == ConstIntBound(4, 10)
    an.update(x, ConstIntBound(0, 1), allow_override=True)
    assert an.const_int_bound(x * 2) == ConstIntBound(0, 2)


def test_int_set_symbolic_ends():
    an, (i, j) = _an(i=32, j=4)
    s = an.int_set(i * 4 + j, {j: Range.from_min_extent(0, 4)})
    assert (expr_text(s.min_value), expr_text(s.max_value)) == ("i * 4", "i * 4 + 3")
    s = an.int_set(i * 4 + j, {i: Range.from_min_extent(0, 32), j: Range.from_min_extent(0, 4)})
    assert (s.min_value.value, s.max_value.value) == (0, 127)
    s = an.int_set((i * 4 + j) % 4, {j: Range.from_min_extent(0, 4)})
    assert (s.min_value.value, s.max_value.value) == (0, 3)
    s = an.int_set((i * 4 + j) // 4, {j: Range.from_min_extent(0, 4)})
    assert s.is_single_point() or expr_text(s.min_value) == expr_text(s.max_value) == "i"


def test_int_set_defaults_to_bound_ranges_and_handles_negatives():
    an, (i,) = _an(i=10)
    s = an.int_set(5 - i * 2)
    assert (s.min_value.value, s.max_value.value) == (-13, 5)
    s = an.int_set(tir.max(i, 3) - 1)
    assert (s.min_value.value, s.max_value.value) == (2, 8)


def test_int_set_unbounded():
    x = tir.Var("x")
    an = Analyzer()
    s = an.int_set(x * 2, {x: IntervalSet(tir.const(0), POS_INF)})
    assert s.min_value.value == 0 and s.max_value is POS_INF
    s = an.int_set(0 - x, {x: IntervalSet(tir.const(0), POS_INF)})
    assert s.min_value is NEG_INF and s.max_value.value == 0
    s = an.int_set(E.Mul(x, x, "int32"), {x: IntervalSet(NEG_INF, POS_INF)})
    assert s.min_value is NEG_INF or isinstance(s.min_value, E.IntImm)
    assert IntervalSet.everything().is_everything()


def test_can_prove_equal():
    an, (i, j) = _an(i=8, j=8)
    assert an.can_prove_equal((i * 8 + j) // 8, i)
    assert not an.can_prove_equal(i, j)
    assert an.can_prove_greater_equal(i * 8 + j, 0)
    assert an.can_prove_less(i * 8 + j, 64)
