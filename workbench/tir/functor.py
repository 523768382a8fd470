"""Generic visitors and mutators over TIR, dispatched through per-class tables.

A subclass handles the node types it cares about by defining ``visit_<ClassName>`` methods
(``visit_For``, ``visit_BufferLoad``, ...); the table is built once per subclass, and every other
node is walked generically through its dataclass fields. A dispatch falls back along the class
hierarchy, so ``visit_BinaryOp`` catches Add, Sub, ... unless a more specific method exists.

:class:`IRMutator` returns the very same node when nothing below it changed, so unchanged
subtrees are shared. Buffers are rewritten at most once per mutator (memoised), keeping buffer
identity consistent across loads, stores and regions.
"""
from __future__ import annotations

from typing import Any, Callable

from workbench.ir.dispatch import MethodTable
from workbench.ir.node import FrozenDict, Node, field_names
from workbench.tir.buffer import Buffer
from workbench.tir.expr import PrimExpr, Var


class _Dispatching:
    """Gives each subclass its ``visit_<Class>`` lookup, resolved along each node's MRO and
    cached per node type (:class:`workbench.ir.dispatch.MethodTable`)."""

    _methods: MethodTable

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # Built lazily, type by type: visitors defined inside functions (a new class per
        # call) cost little.
        cls._methods = MethodTable(cls, "visit_")


class IRVisitor(_Dispatching):
    """Walks every node once per reference (no memo): override ``visit_<Class>`` as needed."""

    def visit(self, node: Any) -> None:
        h = self._methods.lookup(type(node))
        if h is not None:
            h(self, node)
        else:
            self.generic_visit(node)

    def generic_visit(self, node: Any) -> None:
        for name in field_names(type(node)):
            self.visit_field(getattr(node, name))

    def visit_field(self, value: Any) -> None:
        if isinstance(value, Node):
            self.visit(value)
        elif isinstance(value, tuple):
            for v in value:
                self.visit_field(v)
        elif isinstance(value, FrozenDict):
            for v in value.values():
                self.visit_field(v)

    # Buffers are visited through their fields only where asked: by default loads and stores
    # visit indices, not the buffer's shape (a separate concern for most analyses).
    def visit_Buffer(self, buf: Buffer) -> None:
        pass


class IRMutator(_Dispatching):
    """Rewrites bottom-up; returns the same object when nothing changed."""

    def __init__(self) -> None:
        self._buffer_memo: dict[Buffer, Buffer] = {}

    def visit(self, node: Any) -> Any:
        h = self._methods.lookup(type(node))
        if h is not None:
            return h(self, node)
        return self.generic_visit(node)

    def generic_visit(self, node: Any) -> Any:
        changes = None
        for name in field_names(type(node)):
            old = getattr(node, name)
            new = self.visit_field(old)
            if new is not old:
                if changes is None:
                    changes = {}
                changes[name] = new
        if changes is None:
            return node
        return node.replace(**changes)

    def visit_field(self, value: Any) -> Any:
        if isinstance(value, Node):
            return self.visit(value)
        if isinstance(value, tuple):
            new = tuple(self.visit_field(v) for v in value)
            if all(a is b for a, b in zip(new, value)):
                return value
            return new
        if isinstance(value, FrozenDict):
            new_d = {k: self.visit_field(v) for k, v in value.items()}
            if all(new_d[k] is v for k, v in value.items()):
                return value
            return FrozenDict(new_d)
        return value

    def visit_Buffer(self, buf: Buffer) -> Buffer:
        """Buffers are rewritten once (shape, strides, offset, data var) and memoised."""
        got = self._buffer_memo.get(buf)
        if got is None:
            got = self.rewrite_buffer(buf)
            self._buffer_memo[buf] = got
        return got

    def rewrite_buffer(self, buf: Buffer) -> Buffer:
        return self.generic_visit(buf)


class Substitute(IRMutator):
    """Replace variables by expressions (``vmap``: Var -> PrimExpr)."""

    def __init__(self, vmap: dict[Var, Any]):
        super().__init__()
        self.vmap = vmap

    def visit_Var(self, v: Var) -> Any:
        return self.vmap.get(v, v)


def substitute(node: Any, vmap: dict[Var, Any]) -> Any:
    """``node`` with every Var in ``vmap`` replaced; unchanged parts are shared."""
    if not vmap:
        return node
    return Substitute(vmap).visit(node)


def post_order_visit(node: Any, fvisit: Callable[[Any], None]) -> None:
    """Call ``fvisit`` on every node below ``node`` (children first), buffers included once."""

    class _V(IRVisitor):
        def generic_visit(self, n: Any) -> None:
            super().generic_visit(n)
            fvisit(n)

        def visit_Buffer(self, buf: Buffer) -> None:
            fvisit(buf)

    _V().visit(node)


def collect_vars(node: Any) -> set[Var]:
    """Every Var used in ``node`` (loads/stores' buffer shapes excluded)."""
    found: set[Var] = set()

    class _V(IRVisitor):
        def visit_Var(self, v: Var) -> None:
            found.add(v)

    _V().visit(node)
    return found


def uses_var(expr: PrimExpr, pred: Callable[[Var], bool]) -> bool:
    return any(pred(v) for v in collect_vars(expr))
