"""Division by a symbolic length (issue 22's dynamic sequence): ``(q * s + r) // s`` is ``q``
and ``(q * s + r) % s`` is ``r`` when ``0 <= r < s`` is known -- the index a reshape over a
dynamic length splits back into its parts. Checked by evaluating both sides."""
from __future__ import annotations

import itertools

from workbench.tir import op
from workbench.tir.arith import Analyzer
from workbench.tir.arith.evaluate import evaluate
from workbench.tir.buffer import Range
from workbench.tir.expr import FloorDiv, FloorMod, IntImm, SizeVar, Var
from workbench.tir.functor import post_order_visit


def _i64(v: int) -> IntImm:
    return IntImm("int64", v)


def _divides_by(e, s) -> bool:  # noqa: ANN001
    found = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, (FloorDiv, FloorMod))
                     and n.b is s else None)
    return bool(found)


def test_split_index_over_a_symbolic_length_simplifies_and_keeps_its_value():
    s, i, q = SizeVar("s", "int64"), Var("i", "int64"), Var("q", "int64")
    ana = Analyzer()
    ana.bind(i, Range.from_min_extent(_i64(0), s))
    ana.bind(q, Range.from_min_extent(_i64(0), _i64(8)))
    x = op.add(op.mul(q, s), i)
    cases = {op.floordiv(x, s): q, op.floormod(x, s): i, op.floordiv(i, s): _i64(0),
             op.floormod(i, s): i, op.floormod(op.mul(s, q), s): _i64(0)}
    for e, want in cases.items():
        got = ana.simplify(e)
        assert not _divides_by(got, s), (e, got)
        for sv, iv, qv in itertools.product((1, 5, 9), range(9), range(8)):
            if iv >= sv:
                continue
            env = {s: sv, i: iv, q: qv}
            assert evaluate(got, env) == evaluate(e, env) == evaluate(want, env)


def test_a_remainder_that_may_reach_the_divisor_is_kept():
    s, j, q = SizeVar("s", "int64"), Var("j", "int64"), Var("q", "int64")
    ana = Analyzer()
    ana.bind(j, Range.from_min_extent(_i64(0), op.add(s, _i64(1))))   # j may equal s
    ana.bind(q, Range.from_min_extent(_i64(0), _i64(8)))
    assert _divides_by(ana.simplify(op.floordiv(op.add(op.mul(q, s), j), s)), s)
    assert _divides_by(ana.simplify(op.floormod(j, s)), s)
