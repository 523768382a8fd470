"""workbench.ir.dispatch: rules found along the MRO, cached per concrete type, and dropped
from the cache when a rule is registered."""
from __future__ import annotations

import pytest

from workbench.ir.dispatch import MethodTable, TypeTable


class Base:
    pass


class Mid(Base):
    pass


class Leaf(Mid):
    pass


class Other:
    pass


def test_type_table_follows_the_mro_and_caches():
    table = TypeTable({Base: "base"})
    assert table.lookup(Leaf) == "base"
    assert table.lookup(Other) is None
    table.register(Mid, "mid")      # a new rule is seen by types already looked up
    assert table.lookup(Leaf) == "mid" and table.lookup(Base) == "base"
    assert Mid in table and Leaf not in table and len(table) == 2
    assert table.rule(Leaf) is None and table.rule(Mid) == "mid"


def test_type_table_default_and_forms_of_registering():
    table: TypeTable = TypeTable(default="generic")
    assert table.lookup(Leaf) == "generic"

    @table.register(Leaf)
    def leaf(x):
        return x

    assert table.lookup(Leaf) is leaf
    table[Other] = "other"
    table.update({Base: "base"})
    assert [table.lookup(c) for c in (Other, Base, Mid, object)] == \
        ["other", "base", "base", "generic"]
    assert sorted(c.__name__ for c in table) == ["Base", "Leaf", "Other"]
    assert table.setdefault(Base, "again") == "base" and table.setdefault(Mid, "mid") == "mid"
    assert table.lookup(Leaf) is leaf and table.lookup(Mid) == "mid"


def test_type_table_lookup_survives_registering():
    # Hot paths keep ``lookup`` in a local or a global: registering must not stale it.
    table = TypeTable({Base: 1})
    lookup = table.lookup
    assert lookup(Leaf) == 1
    table.register(Leaf, 2)
    assert lookup(Leaf) == 2


def test_bool_resolves_to_int():
    table = TypeTable({int: "int", str: "str"})
    assert table.lookup(bool) == "int"


def test_method_table_uses_class_names_along_the_mro():
    class Visitor:
        def visit_Base_(self, x):
            return "base"

        def visit_Leaf_(self, x):
            return "leaf"

    class Sub(Visitor):
        def visit_Mid_(self, x):
            return "mid"

    methods = MethodTable(Sub, "visit_", "_")
    assert methods.lookup(Leaf)(None, None) == "leaf"   # the visitor's base has visit_Leaf_
    assert methods.lookup(Mid)(None, None) == "mid"
    assert methods.lookup(Base)(None, None) == "base"
    assert methods.lookup(Other) is None
    assert MethodTable(Visitor, "visit_", "_").lookup(Mid)(None, None) == "base"


@pytest.mark.parametrize("functor", ["tir", "relax"])
def test_functors_dispatch_per_visitor_class(functor):
    """Two visitors of the same node type keep their own handlers (the cache is per class)."""
    if functor == "tir":
        from workbench.tir.expr import SizeVar, Var
        from workbench.tir.functor import IRVisitor as Visitor
        node, visit = SizeVar("n", "int32"), "visit"
        method = "visit_Var"
        assert isinstance(node, Var)
    else:
        from workbench.relax.expr import DataflowVar
        from workbench.relax.expr_functor import ExprVisitor as Visitor
        from workbench.relax.struct_info import TensorStructInfo
        node, visit = DataflowVar("x", TensorStructInfo((4,), "float32")), "visit_expr"
        method = "visit_Var_"
    seen: list[str] = []
    one = type("One", (Visitor,), {method: lambda self, v: seen.append("one")})
    two = type("Two", (Visitor,), {method: lambda self, v: seen.append("two")})
    getattr(one(), visit)(node)
    getattr(two(), visit)(node)
    getattr(Visitor(), visit)(node)
    assert seen == ["one", "two"]
