"""Analyzer.simplify on the index expressions schedules produce, and on the rule sets."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workbench import tir
from workbench.tir import expr as E
from workbench.tir.arith import Analyzer, evaluate
from workbench.tir.buffer import Range


def _text(e: E.PrimExpr) -> str:
    from workbench.tir.printer import expr_text
    return expr_text(e)


def _analyzer(**extents: int | tuple[int, int]) -> tuple[Analyzer, dict[str, tir.Var]]:
    an = Analyzer()
    vs = {}
    for name, r in extents.items():
        lo, ext = (0, r) if isinstance(r, int) else r
        v = tir.Var(name)
        an.bind(v, Range.from_min_extent(lo, ext))
        vs[name] = v
    return an, vs


def test_split_index_pieces():
    an, v = _analyzer(i0=32, i1=4)
    i0, i1 = v["i0"], v["i1"]
    assert an.simplify((i0 * 4 + i1) // 4) is i0
    assert an.simplify((i0 * 4 + i1) % 4) is i1


def test_fuse_roundtrip():
    an, v = _analyzer(f=512)
    f = v["f"]
    assert an.simplify(f // 16 * 16 + f % 16) is f
    an, v = _analyzer(i=16, j=8)
    i, j = v["i"], v["j"]
    assert _text(an.simplify((i * 8 + j) // 8 * 8 + (i * 8 + j) % 8)) == "i * 8 + j"


def test_fuse_roundtrip_needs_no_bounds():
    # x // c * c + x % c == x for every integer x (floor semantics)
    x = tir.Var("x")
    assert Analyzer().simplify(x // 16 * 16 + x % 16) is x
    assert _text(Analyzer().simplify(x - x // 8 * 8)) == "x % 8"
    assert _text(Analyzer().simplify(x // 4 % 4 * 4 + x % 4)) == "x % 16"


def test_three_level_split_then_fuse():
    # i = ((f // 8) * 4 + i1) * 2 + i2 with f fusing (i0, j0); i1 in [0, 4), i2 in [0, 2)
    an, v = _analyzer(f=64, i1=4, i2=2)
    f, i1, i2 = v["f"], v["i1"], v["i2"]
    i = (f // 8 * 4 + i1) * 2 + i2
    assert _text(an.simplify(i // 8)) == "f // 8"
    assert _text(an.simplify(i % 8)) == "i1 * 2 + i2"
    assert _text(an.simplify(i // 2 % 4)) == "i1"


def test_linear_folding():
    x = tir.Var("x")
    an = Analyzer()
    assert _text(an.simplify(x * 2 + x * 3)) == "x * 5"
    assert _text(an.simplify((x + 3) - x)) == "3"
    assert an.simplify(x - x).value == 0
    assert _text(an.simplify((x + 1) * 4 - 4)) == "x * 4"


def test_min_max():
    x = tir.Var("x")
    an, v = _analyzer(i=10)
    assert an.simplify(tir.min(x, x + 1)) is x
    assert _text(an.simplify(tir.max(x, x + 1))) == "x + 1"
    assert an.simplify(tir.max(v["i"], 0)) is v["i"]
    assert an.simplify(tir.min(v["i"], 10)) is v["i"]
    assert _text(an.simplify(tir.min(tir.min(x, 8), 4))) == "T.min(x, 4)"
    assert _text(an.simplify(tir.min(tir.max(x, 8), 4))) == "4"
    # a bound clamped twice by the same symbolic value (symbolic tiles)
    n = tir.Var("n")
    assert _text(an.simplify(tir.min(tir.min(x * 4 + 3, n - 1), n - 1))) == "T.min(x * 4 + 3, n - 1)"
    assert _text(an.simplify(tir.max(n, tir.max(x, n)))) == "T.max(x, n)"


def test_nested_division():
    x = tir.Var("x")
    an = Analyzer()
    assert _text(an.simplify((x // 4) // 8)) == "x // 32"
    assert _text(an.simplify(x % 16 % 4)) == "x % 4"
    assert _text(an.simplify(x // 4 % 8)) == "x // 4 % 8"
    assert _text(an.simplify(x % 32 // 4)) == "x // 4 % 8"
    assert _text(an.simplify((x * 6 + 4) // 2)) == "x * 3 + 2"
    assert _text(an.simplify((x * 6) % 4)) == "x % 2 * 2"  # (g*a) % (g*b) == g * (a % b)


def test_digit_splits():
    an, v = _analyzer(i=8, j=8, k=4)
    i, j, k = v["i"], v["j"], v["k"]
    e = i * 32 + j * 4 + k
    assert _text(an.simplify(e // 32)) == "i"
    assert _text(an.simplify(e % 32)) == "j * 4 + k"
    assert _text(an.simplify(e // 4 % 8)) == "j"
    assert _text(an.simplify(e // 8)) == "i * 4 + j // 2"


def test_comparisons_from_bounds():
    an, v = _analyzer(i=128)
    i = v["i"]
    assert an.simplify(i < 128).value == 1
    assert an.simplify(i >= 0).value == 1
    assert an.simplify(i > 200).value == 0
    assert _text(an.simplify(i < 64)) == "i < 64"
    assert an.can_prove(i * 2 + 1 < 256)
    assert not an.can_prove(i < 127)


def test_select_and_logic():
    an, v = _analyzer(i=16)
    i = v["i"]
    x = tir.Var("x")
    assert an.simplify(tir.select(i < 16, x, x + 1)) is x
    assert _text(an.simplify(tir.if_then_else(i >= 16, 0, x))) == "x"
    c = i < 8
    assert an.simplify(tir.logical_and(c, tir.const(True))) is an.simplify(c)
    assert an.simplify(tir.logical_or(c, tir.logical_not(c))).value == 1
    assert an.simplify(tir.logical_and(i < 4, i >= 4)).value == 0
    assert _text(an.simplify(tir.logical_and(i < 4, i < 6))) == "i < 4"
    assert _text(an.simplify(tir.logical_not(x < 3))) == "x >= 3"
    # branches are simplified knowing their condition
    got = an.simplify(tir.select(x < 4, tir.min(x, 4), tir.max(x, 4)))
    assert _text(got) == "T.Select(x < 4, x, x)" or got is x


def test_float_only_folds_constants():
    a = tir.Var("a", "float32")
    an = Analyzer()
    e = (a + tir.const(1.0, "float32")) - tir.const(1.0, "float32")
    assert _text(an.simplify(e)) == _text(e)  # never reassociated
    third = an.simplify(E.Div(tir.const(1.0, "float32"), tir.const(3.0, "float32"), "float32"))
    assert isinstance(third, E.FloatImm)
    import numpy as np
    assert third.value == float(np.float32(1.0) / np.float32(3.0))


def test_casts():
    an = Analyzer()
    x = tir.Var("x")
    assert an.simplify(tir.Cast("int32", tir.Cast("int64", x))) is x
    assert an.simplify(E.Cast("int8", tir.const(300))).value == 44
    assert an.simplify(E.Cast("int32", tir.const(-2.7, "float32"))).value == -2
    f64 = an.simplify(E.Cast("float64", tir.const(0.1, "float32")))
    import numpy as np
    assert f64.value == float(np.float32(0.1))


def test_int64_int32_mix_keeps_dtypes():
    an = Analyzer()
    i = tir.Var("i", "int64")
    j = tir.Var("j")
    an.bind(i, Range(tir.const(0, "int64"), tir.const(1 << 40, "int64")))
    an.bind(j, Range.from_min_extent(0, 8))
    e = i * 8 + tir.Cast("int64", j)
    s = an.simplify(e // 8)
    assert s.dtype == "int64"
    assert s is i
    t = an.simplify(tir.Cast("int32", e % 8))
    assert t.dtype == "int32"
    assert _text(t) == "T.Cast(\"int32\", T.Cast(\"int64\", j))" or t is j


def test_truncdiv_becomes_floordiv_when_nonnegative():
    an, v = _analyzer(i=32, j=4)
    i, j = v["i"], v["j"]
    assert an.simplify(tir.truncdiv(i * 4 + j, 4)) is i
    assert an.simplify(tir.truncmod(i * 4 + j, 4)) is j
    x = tir.Var("x")
    e = an.simplify(tir.truncdiv(x, 4))
    assert isinstance(e, E.Div)  # sign unknown: stays a truncating division


def test_constraint_scope():
    an = Analyzer()
    i, n = tir.Var("i"), tir.Var("n")
    an.bind(i, Range(tir.const(0), n))  # symbolic extent
    assert an.can_prove(i < n)
    assert an.can_prove(i + 1 <= n)
    assert an.simplify(tir.min(i, n - 1)) is i
    x = tir.Var("x")
    with an.constraint_scope(x < 10):
        assert an.can_prove(x < 11)
        assert an.const_int_bound(x).max_value == 9
        assert an.simplify(tir.min(x, 9)) is x
    assert not an.can_prove(x < 11)
    with an.constraint_scope(tir.logical_and(x >= 2, x < 4)):
        assert an.simplify(x // 4) .value == 0
    assert not isinstance(an.simplify(x // 4), E.IntImm)


def test_bind_expression_substitutes():
    an = Analyzer()
    x, y = tir.Var("x"), tir.Var("y")
    an.bind(x, y + 1)
    assert _text(an.simplify(x - y)) == "1"
    with pytest.raises(ValueError, match="already bound"):
        an.bind(x, y + 2)
    an.bind(x, y + 2, allow_override=True)
    assert _text(an.simplify(x - y)) == "2"


def test_rebinding_a_range_drops_old_results():
    an = Analyzer()
    i = tir.Var("i")
    an.bind(i, Range.from_min_extent(0, 1))
    assert an.simplify(i * 4).value == 0  # one-value range folds
    an.bind(i, Range.from_min_extent(0, 8), allow_override=True)
    assert _text(an.simplify(i * 4)) == "i * 4"


def test_let_expression():
    an = Analyzer()
    x, t = tir.Var("x"), tir.Var("t")
    e = E.Let(t, x * 2, t - x * 2 + t, "int32")
    s = an.simplify(e)
    for xv in range(-3, 4):
        assert evaluate(s, {x: xv}) == evaluate(e, {x: xv})


def test_same_object_when_already_simple():
    an, v = _analyzer(i=16, j=8)
    e = v["i"] * 8 + v["j"]
    assert an.simplify(e) is e
    buf = tir.decl_buffer((128,), "float32", "A")
    load = buf[e]
    assert an.simplify(load) is load


def test_vector_ramps():
    an = Analyzer()
    x = tir.Var("x")
    r = E.Ramp(x * 4, tir.const(1), 4, "int32x4")
    b = E.Broadcast(tir.const(8), 4, "int32x4")
    s = an.simplify(E.Add(r, b, "int32x4"))
    assert isinstance(s, E.Ramp) and _text(s.base) == "x * 4 + 8"
    s = an.simplify(E.Mul(r, E.Broadcast(tir.const(2), 4, "int32x4"), "int32x4"))
    assert isinstance(s, E.Ramp) and _text(s.stride) == "2"


def test_rule_sets_compose_and_are_named():
    from workbench.tir.arith import rewrite_rules as R
    combined = R.CONST_FOLD + R.MINMAX
    assert combined.name == "const_fold+minmax"
    assert "minmax_by_bounds" in combined.names()
    assert all(r.doc for r in R.DEFAULT_RULES.rules)
    # An analyzer without the min/max rules leaves min(x, x + 1) alone.
    an = Analyzer(rules=R.CONST_FOLD)
    x = tir.Var("x")
    assert isinstance(an.simplify(tir.min(x, x + 1)), E.Min)


_ABSORB_FORMS = [
    lambda a, b: tir.min(tir.max(a, b), a), lambda a, b: tir.min(tir.max(b, a), a),
    lambda a, b: tir.min(a, tir.max(a, b)), lambda a, b: tir.min(a, tir.max(b, a)),
    lambda a, b: tir.max(tir.min(a, b), a), lambda a, b: tir.max(tir.min(b, a), a),
    lambda a, b: tir.max(a, tir.min(a, b)), lambda a, b: tir.max(a, tir.min(b, a)),
]


@given(form=st.sampled_from(_ABSORB_FORMS), ca=st.integers(-5, 5), cb=st.integers(-5, 5),
       xv=st.integers(-1000, 1000), yv=st.integers(-1000, 1000))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_minmax_absorption_keeps_every_value(form, ca, cb, xv, yv):
    """``min(max(a, b), a) == a`` (and its mirror and operand orders) on unrelated symbolic
    operands, which no bound proves: the result is ``a`` and equals the original everywhere."""
    x, y = tir.Var("x"), tir.Var("y")
    a, b = x * 3 + ca, y - cb
    e = form(a, b)
    s = Analyzer().simplify(e)
    assert _text(s) == _text(Analyzer().simplify(a))
    env = {x: xv, y: yv}
    assert evaluate(s, env) == evaluate(e, env)


def test_symbolic_row_tile_bound_reduces_to_the_length():
    """The epilogue predicate of a symbolic row tile: ``row < min(max(s - 1, 0), s - 1) + 1``
    is ``row < s``, so it merges with the row check."""
    s, row = tir.SizeVar("s", "int64"), tir.Var("row", "int64")
    bound = tir.min(tir.max(s - 1, tir.const(0, "int64")), s - 1) + 1
    an = Analyzer()
    assert an.simplify(bound) is s
    assert _text(an.simplify(row < bound)) == "row < s"
    # without the rule, only a bound can decide it: max(a, b) with b not comparable stays
    assert isinstance(an.simplify(tir.min(tir.max(s - 1, row), s - 2)), E.Min)


def test_casts_sink_to_the_leaves_of_index_arithmetic():
    """An inlined reshape chain casts int32 index arithmetic to int64 and back at every stage
    (int32 loop variables, int64 shapes). With the bounds showing nothing wraps, the casts sink
    to the variables and the flattened index folds to the plain affine one -- the kernel of
    BERT's packed q/k/v split went from a 16-lane gather (585 us) to contiguous vectors (22 us).
    Where a wrap is possible the cast stays."""
    an, v = _analyzer(i0=3, i1=128, i3=768)
    i0, i1, i3 = v["i0"], v["i1"], v["i3"]

    def i64(x):
        return tir.Cast("int64", x)

    def i32(x):
        return tir.Cast("int32", x)

    c768, c128, c3 = (tir.const(c, "int64") for c in (768, 128, 3))
    flat = i64((i0 * 128 + i1) * 768 + i3)                  # (3, 128, 768) -> flat
    row, part, col = i32(flat // c768 % c128), i32(flat // c768 // c128), i32(flat % c768)
    src = i64((row * 3 + part) * 768 + col)                 # its place in (128, 3 * 768)
    got = an.simplify(src)
    want = an.simplify(i64(i1) * 2304 + i64(i0) * 768 + i64(i3))
    assert _text(got) == _text(want), _text(got)
    assert got.dtype == "int64"
    # int32(int64(y)) for an int64 y that fits int32 is y
    k = tir.Var("k", "int64")
    an.bind(k, Range(tir.const(0, "int64"), tir.const(1000, "int64")))
    assert an.simplify(i64(i32(k))) is k
    # a product that may wrap in int32 keeps its cast
    big, w = _analyzer(a=1 << 20, b=1 << 20)
    wrap = i64(w["a"] * w["b"])
    assert isinstance(big.simplify(wrap), E.Cast)
    assert isinstance(big.simplify(wrap).value, E.Mul)
    assert isinstance(big.simplify(i64(i32(tir.Var("u", "int64")))), E.Cast)  # unbounded


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2), st.integers(0, 127), st.integers(0, 767), st.integers(1, 5000),
       st.integers(1, 5000))
def test_sunk_casts_keep_values(i0, i1, i3, m, n):
    """The sunk casts evaluate as the original at points of the bound ranges, including
    products near int32's end (where the rule must not fire)."""
    an, v = _analyzer(x=3, y=128, z=768, p=(1, 5000), q=(1, 5000))
    x, y, z, p, q = v["x"], v["y"], v["z"], v["p"], v["q"]
    e = tir.Cast("int64", (x * 128 + y) * 768 + z) // tir.const(768, "int64") % tir.const(
        128, "int64") + tir.Cast("int64", p * q * 85) - tir.Cast("int64", tir.Cast("int32", (
            tir.Cast("int64", z) * tir.const(3, "int64")) // tir.const(2, "int64")))
    env = {x: i0, y: i1, z: i3, p: m, q: n}
    assert evaluate(an.simplify(e), env) == evaluate(e, env)
