"""Dispatch on a node's type: the one place that walks a class's MRO to find its rule.

Printers, rule tables, evaluators, functors and mutators all need "the handler for this
node's type, or for the nearest base class that has one" (``SizeVar`` -> ``Var``, ``LT`` ->
``CmpOp``). Two forms:

- :class:`TypeTable`: a table of rules keyed by type (``table.register(Add, fn)``).
- :class:`MethodTable`: a visitor class's methods named after node classes
  (``visit_Add``), TVM's functor convention.

Both resolve a concrete type once, along its MRO, and cache the answer per concrete type:
the hot path, ``table.lookup(type(node))``, is one dict lookup (a bound ``dict.__getitem__``,
no Python frame). Registering a rule drops what was cached, so later lookups see it.
"""
from __future__ import annotations

from typing import Any, Callable, Generic, Iterator, Mapping, TypeVar

__all__ = ["TypeTable", "MethodTable"]

V = TypeVar("V")


class _Resolved(dict):
    """Concrete type -> answer; a missing type is resolved by ``resolve`` and kept."""

    __slots__ = ("_resolve",)

    def __init__(self, resolve: Callable[[type], Any]) -> None:
        super().__init__()
        self._resolve = resolve

    def __missing__(self, cls: type) -> Any:
        value = self[cls] = self._resolve(cls)
        return value


class TypeTable(Generic[V]):
    """Rules keyed by type, found along the MRO of the type looked up.

    ``lookup(cls)`` is the rule of the first class in ``cls.__mro__`` that has one, else
    ``default``; the answer is cached per ``cls``. ``rule(cls)`` is the class's own rule
    (no MRO, no default). Registering (``register``, ``table[cls] = rule``, or ``update``)
    replaces a class's rule and empties the cache.
    """

    __slots__ = ("_rules", "_resolved", "default", "lookup")

    def __init__(self, rules: Mapping[type, V] | None = None, default: V | None = None) -> None:
        self._rules: dict[type, V] = dict(rules or {})
        self.default = default
        self._resolved = _Resolved(self._find)
        #: ``lookup(cls) -> rule or default``: the cached MRO lookup (a bound dict method).
        self.lookup: Callable[[type], V | None] = self._resolved.__getitem__

    def _find(self, cls: type) -> V | None:
        rules = self._rules
        for base in cls.__mro__:
            if base in rules:
                return rules[base]
        return self.default

    def register(self, cls: type, rule: V | None = None) -> Any:
        """Set ``cls``'s rule; without ``rule``, a decorator that sets it and returns it."""
        if rule is None:
            def deco(fn: V) -> V:
                self.register(cls, fn)
                return fn
            return deco
        self._rules[cls] = rule
        self._resolved.clear()
        return rule

    def __setitem__(self, cls: type, rule: V) -> None:
        self.register(cls, rule)

    def update(self, rules: Mapping[type, V]) -> None:
        self._rules.update(rules)
        self._resolved.clear()

    def setdefault(self, cls: type, rule: V) -> V:
        """``cls``'s own rule, registering ``rule`` first if it has none."""
        own = self._rules.get(cls)
        return own if own is not None else self.register(cls, rule)

    def rule(self, cls: type) -> V | None:
        """``cls``'s own rule (None when only a base class has one)."""
        return self._rules.get(cls)

    def __contains__(self, cls: object) -> bool:
        return cls in self._rules

    def __iter__(self) -> Iterator[type]:
        return iter(self._rules)

    def __len__(self) -> int:
        return len(self._rules)

    def __repr__(self) -> str:
        names = ", ".join(sorted(c.__name__ for c in self._rules))
        return f"TypeTable({names})"


class MethodTable:
    """The methods of ``owner`` named ``prefix + <class name> + suffix``, found along the MRO of
    a node type: ``MethodTable(MyVisitor, "visit_").lookup(SizeVar)`` is ``visit_SizeVar`` if
    the visitor (or a base of it) defines one, else ``visit_Var``, ..., else None.

    Methods come from the class (plain functions: call them with the visitor as first
    argument). Build one per visitor class (``__init_subclass__``): methods added to a class
    after its first lookup are not seen.
    """

    __slots__ = ("owner", "prefix", "suffix", "_resolved", "lookup")

    def __init__(self, owner: type, prefix: str = "visit_", suffix: str = "") -> None:
        self.owner = owner
        self.prefix = prefix
        self.suffix = suffix
        self._resolved = _Resolved(self._find)
        #: ``lookup(node_type) -> function or None``, cached per node type.
        self.lookup: Callable[[type], Callable | None] = self._resolved.__getitem__

    def _find(self, node_type: type) -> Callable | None:
        owner, prefix, suffix = self.owner, self.prefix, self.suffix
        for base in node_type.__mro__:
            method = getattr(owner, f"{prefix}{base.__name__}{suffix}", None)
            if method is not None:
                return method
        return None

    def __repr__(self) -> str:
        return f"MethodTable({self.owner.__name__}, {self.prefix!r}, {self.suffix!r})"
