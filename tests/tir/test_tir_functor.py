"""The generic TIR walk (IRVisitor / IRMutator): a walk that handles statements only leaves
expressions alone (``_skip_exprs``), and that changes no result -- lowering, scheduling and
feature extraction give the same IR and numbers as walking every expression."""
from __future__ import annotations

import numpy as np
import pytest

from workbench import te
from workbench.ir.structural import structural_equal
from workbench.tir import functor
from workbench.tir.functor import IRMutator, IRVisitor
from workbench.tir.schedule import Schedule


def _walks() -> list[type]:
    import workbench.meta_schedule  # noqa: F401 - every pass and analysis defined
    import workbench.tir.transform  # noqa: F401
    out, todo = [], [functor._Dispatching]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            out.append(sub)
            todo.append(sub)
    return out


def test_only_walks_that_handle_statements_alone_skip_expressions():
    class Loops(IRVisitor):
        def visit_For(self, s):
            self.generic_visit(s)

    class Vars(Loops):
        def visit_Var(self, v):
            pass

    class Counting(IRVisitor):
        def visit(self, node):
            super().visit(node)

    class Buffers(IRMutator):
        def rewrite_buffer(self, buf):
            return buf

    class Blocks(IRMutator):
        def visit_Block(self, b):
            return self.generic_visit(b)

    class Loads(Blocks):
        def visit_BufferLoad(self, e):
            return e

    assert Loops._skip_exprs and Blocks._skip_exprs
    # an expression handler, an own walk or an own buffer rewrite: every expression is seen
    assert not any(c._skip_exprs for c in (Vars, Counting, Buffers, Loads))
    assert not IRVisitor._skip_exprs and not IRMutator._skip_exprs
    # the package's own: many lowering passes skip; substitution never does
    names = {c.__name__: c._skip_exprs for c in _walks()}
    assert names["Substitute"] is False and names["_LowerInit"] is True


def _scheduled(n: int = 64):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), "k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((n, n), lambda i, j: te.max(C[i, j] + 1.0, 0.0), name="D")
    sch = Schedule(te.create_prim_func([A, B, D]))
    c = sch.get_block("C")
    i, j, kk = sch.get_loops(c)
    io, ii = sch.split(i, [None, 8])
    jo, ji = sch.split(j, [None, 16])
    sch.reorder(io, jo, kk, ii, ji)
    sch.parallel(io)
    sch.vectorize(ji)
    sch.reverse_compute_at(sch.get_block("D"), jo)
    sch.decompose_reduction(c, kk)
    return sch


def _results() -> tuple:
    from workbench.meta_schedule.feature_extractor.per_store import extractor, preprocess
    from workbench.tir.transform.pipeline import lower
    extractor._FEATURES = preprocess._LRU(64)   # computed afresh, not from a cache
    preprocess._LOWERED = preprocess._LRU(64)
    sch = _scheduled()
    return sch.mod, lower(sch.mod), extractor.extract_features(sch.mod)


def test_skipping_expressions_changes_no_result(monkeypatch):
    from workbench.meta_schedule.feature_extractor.per_store import extractor, preprocess
    monkeypatch.setattr(extractor, "_FEATURES", extractor._FEATURES)
    monkeypatch.setattr(preprocess, "_LOWERED", preprocess._LOWERED)
    skipping = [c for c in _walks() if c._skip_exprs]
    assert len(skipping) >= 10
    fast = _results()
    for cls in skipping:
        monkeypatch.setattr(cls, "_skip_exprs", False)
    full = _results()
    assert structural_equal(fast[0], full[0])      # the schedule's primitives
    assert structural_equal(fast[1], full[1])      # the lowering pipeline
    np.testing.assert_array_equal(fast[2], full[2])  # the cost model's features


@pytest.mark.parametrize("kind", [IRVisitor, IRMutator])
def test_a_statement_walk_still_reaches_nested_statements(kind):
    """Expressions hold no statements: skipping them loses no loop or block."""
    seen = []

    class Stores(kind):
        def visit_BufferStore(self, s):
            seen.append(s.buffer.name)
            return s

    Stores().visit(_scheduled().mod["main"].body)
    assert Stores._skip_exprs and sorted(set(seen)) == ["C", "D"]


def test_walk_nodes_is_the_visitors_walk_in_order_and_any_node_stops_early():
    """``walk_nodes`` (an explicit stack, for hot paths) reaches the nodes an IRVisitor
    reaches, parents first, in field order, buffers as leaves; ``any_node`` stops at the
    first match."""
    from workbench.tir import expr as E
    from workbench.tir import stmt as S
    from workbench.tir.buffer import Buffer

    A = te.placeholder((8, 4), name="A")
    B = te.compute((8, 4), lambda i, j: A[i, j] * 2.0 + A[i, 0], name="B")
    func = te.create_prim_func([A, B])
    body = Schedule(func).mod["main"].body

    seen: list = []

    class Everything(IRVisitor):    # buffers are leaves here too (visit_Buffer passes)
        def visit(self, node):
            seen.append(node)
            super().visit(node)
    Everything().visit(body)
    walked = list(functor.walk_nodes(body))
    assert [id(n) for n in walked] == [id(n) for n in seen]
    assert walked[0] is body
    loads = [n for n in walked if isinstance(n, E.BufferLoad)]
    assert len(loads) == 2 and sum(isinstance(n, Buffer) for n in walked) >= 2
    assert functor.any_node(body, lambda n: isinstance(n, E.FloatImm) and n.value == 2.0)
    assert not functor.any_node(body, lambda n: isinstance(n, S.While))
    calls: list = []
    assert functor.any_node(body, lambda n: calls.append(n) or True) and len(calls) == 1
