"""Random expressions (hypothesis): printing is deterministic and parenthesised correctly,
JSON round-trips, and structural_hash agrees with structural_equal."""
from __future__ import annotations

import operator

from hypothesis import given, settings, strategies as st

from ir_builders import renamed
from workbench import tir
from workbench.ir import load_json, save_json, structural_equal, structural_hash
from workbench.ir.printer import script
from workbench.tir import Var

VARS = (Var("a"), Var("b"), Var("c"))
I32 = "int32"

ints = st.integers(-20, 20).map(lambda v: tir.IntImm(I32, v))
leaves = st.one_of(st.sampled_from(VARS), ints)
divisors = st.integers(1, 7).map(lambda v: tir.IntImm(I32, v))
_ARITH = [tir.Add, tir.Sub, tir.Mul, tir.Min, tir.Max]
_CMP = [tir.EQ, tir.NE, tir.LT, tir.LE, tir.GT, tir.GE]



def _binary(classes, left, right, dtype):
    return st.builds(lambda cls, x, y: cls(x, y, dtype), st.sampled_from(classes), left, right)


# Mutually recursive int / bool grammars; leaves are listed first so shrinking goes to them.
int_exprs = st.deferred(lambda: st.one_of(
    leaves,
    _binary(_ARITH, int_exprs, int_exprs, I32),
    _binary([tir.FloorDiv, tir.FloorMod], int_exprs, divisors, I32),
    st.builds(lambda c, x, y: tir.Select(c, x, y, I32), bool_exprs, int_exprs, int_exprs)))
bool_exprs = st.deferred(lambda: st.one_of(
    _binary(_CMP, int_exprs, int_exprs, "bool"),
    _binary([tir.And, tir.Or], bool_exprs, bool_exprs, "bool"),
    st.builds(tir.Not, bool_exprs)))
exprs = st.one_of(int_exprs, bool_exprs)

_PY = {tir.Add: operator.add, tir.Sub: operator.sub, tir.Mul: operator.mul, tir.Min: min,
       tir.Max: max, tir.FloorDiv: operator.floordiv, tir.FloorMod: operator.mod,
       tir.EQ: operator.eq, tir.NE: operator.ne, tir.LT: operator.lt, tir.LE: operator.le,
       tir.GT: operator.gt, tir.GE: operator.ge}


def evaluate(e, env):
    """The value of ``e`` by walking the tree (the reference for the printed text)."""
    t = type(e)
    if t is Var:
        return env[e.name]
    if t is tir.IntImm:
        return e.value
    if t in _PY:
        return _PY[t](evaluate(e.a, env), evaluate(e.b, env))
    if t is tir.And:
        return evaluate(e.a, env) and evaluate(e.b, env)
    if t is tir.Or:
        return evaluate(e.a, env) or evaluate(e.b, env)
    if t is tir.Not:
        return not evaluate(e.a, env)
    if t is tir.Select:
        return evaluate(e.true_value if evaluate(e.condition, env) else e.false_value, env)
    raise TypeError(t)


class _T:
    """Just enough of ``T`` to evaluate printed expressions as Python."""
    min = staticmethod(min)
    max = staticmethod(max)
    int32 = staticmethod(int)   # `T.int32(0) + 0`: a literal kept from folding when read back
    bool = staticmethod(bool)

    @staticmethod
    def Select(c, x, y):  # noqa: N802
        return x if c else y


@settings(max_examples=100, deadline=None)
@given(exprs, st.tuples(*[st.integers(-9, 9)] * 3))
def test_printed_text_evaluates_like_the_tree(e, values):
    env = dict(zip("abc", values))
    text = script(e)
    assert eval(text, {"T": _T}, dict(env)) == evaluate(e, env), text  # noqa: S307


@settings(max_examples=100, deadline=None)
@given(exprs)
def test_print_is_deterministic_and_json_round_trips(e):
    text = script(e)
    assert script(e) == text == repr(e)
    back = load_json(save_json(e))
    assert script(back) == text
    assert structural_equal(e, back, map_free_vars=True)
    assert structural_hash(e, map_free_vars=True) == structural_hash(back, map_free_vars=True)
    # With free vars unmapped, the loaded vars are new objects: equal only if there are none.
    fresh = renamed(e, "")
    assert structural_equal(e, fresh, map_free_vars=True)
    assert structural_hash(e, map_free_vars=True) == structural_hash(fresh, map_free_vars=True)
    assert script(fresh) == text


@settings(max_examples=120, deadline=None)
@given(exprs, exprs)
def test_hash_is_consistent_with_equal(x, y):
    for mapped in (False, True):
        if structural_equal(x, y, map_free_vars=mapped):
            assert structural_hash(x, map_free_vars=mapped) == \
                structural_hash(y, map_free_vars=mapped)
        # Equality is symmetric.
        assert structural_equal(x, y, mapped) == structural_equal(y, x, mapped)
    # Printing distinguishes what equality distinguishes (same vars, so text == text iff equal).
    assert (script(x) == script(y)) == structural_equal(x, y)
