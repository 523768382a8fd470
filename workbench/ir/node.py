"""The base of every IR node: frozen, slotted dataclasses compared by identity.

Nodes are immutable; an edit makes a new node with :meth:`Node.replace`, which returns the very
same object when nothing changed, so rewriters share unchanged subtrees and "did anything
change" is an ``is`` test. Structural comparison is :func:`workbench.ir.structural_equal`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator, Mapping

# Every node class by name, for JSON load and for dispatch tables built from method names.
NODE_REGISTRY: dict[str, type] = {}


class FrozenDict(dict):
    """An immutable, hashable dict used for annotations, attrs and buffer maps."""

    __slots__ = ()

    def _readonly(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("FrozenDict is immutable; build a new one instead")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _readonly  # type: ignore

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(sorted(self.items(), key=lambda kv: repr(kv[0]))))

    def set(self, key: Any, value: Any) -> "FrozenDict":
        d = dict(self)
        d[key] = value
        return FrozenDict(d)

    def without(self, key: Any) -> "FrozenDict":
        d = dict(self)
        d.pop(key, None)
        return FrozenDict(d)

    def __repr__(self) -> str:
        return f"FrozenDict({dict.__repr__(self)})"

    def __reduce__(self):
        return (FrozenDict, (dict(self),))


def merge_attrs(attrs: FrozenDict, updates: Any, where: str) -> FrozenDict:
    """``attrs`` with every entry of the mapping ``updates`` set (string keys only); ``where``
    names the caller in the error."""
    if not isinstance(updates, Mapping):
        raise TypeError(f"{where}: expected a dict of attributes, got {type(updates).__name__}")
    d = dict(attrs)
    for key, value in updates.items():
        if not isinstance(key, str):
            raise TypeError(f"{where}: attribute names are strings, got {key!r}")
        d[key] = value
    return FrozenDict(d)


NO_VALUE = object()


def attrs_with(attrs: FrozenDict, key_or_dict: Any, value: Any, where: str) -> FrozenDict:
    """The attrs of TVM's ``with_attr(key, value)`` / ``with_attr({key: value, ...})``."""
    if isinstance(key_or_dict, Mapping):
        if value is not NO_VALUE:
            raise TypeError(f"{where}: give a dict of attributes or a key and a value, not both")
        return merge_attrs(attrs, key_or_dict, where)
    if not isinstance(key_or_dict, str):
        raise TypeError(f"{where}: the attribute name must be a string (or a dict of "
                        f"attributes), got {key_or_dict!r}")
    if value is NO_VALUE:
        raise TypeError(f"{where}({key_or_dict!r}): the value is missing")
    return attrs.set(key_or_dict, value)


def frozen(mapping: Mapping | None) -> FrozenDict:
    if isinstance(mapping, FrozenDict):
        return mapping
    return FrozenDict(mapping or {})


class Node:
    """Base class for IR nodes. Subclasses are declared with :func:`node`."""

    __slots__ = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # First registration wins: the IR layers below (tir) import before those above (relax),
        # so a bare name like "Var" always means the same class in every process.
        NODE_REGISTRY.setdefault(cls.__name__, cls)

    def replace(self, **changes: Any):
        """A copy with some fields changed; ``self`` when every value is the same object."""
        if all(getattr(self, k) is v for k, v in changes.items()):
            return self
        return dataclasses.replace(self, **changes)

    def fields(self) -> Iterator[tuple[str, Any]]:
        for name in field_names(type(self)):
            yield name, getattr(self, name)

    def __repr__(self) -> str:
        # Readable default: printers give the real text form (see workbench.tir.printer).
        from workbench.ir.printer import short_repr
        return short_repr(self)

    def same_as(self, other: Any) -> bool:
        return self is other


_FIELDS_CACHE: dict[type, tuple[str, ...]] = {}


def field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS_CACHE.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls))
        _FIELDS_CACHE[cls] = names
    return names


def node(cls):
    """Decorator: make ``cls`` a frozen, slotted dataclass compared by identity."""
    new = dataclasses.dataclass(frozen=True, slots=True, eq=False, repr=False)(cls)
    # slots=True makes a new class; it replaces the pre-dataclass one it was built from.
    if NODE_REGISTRY.get(cls.__name__) is cls:
        NODE_REGISTRY[cls.__name__] = new
    return new


def rewrite_nodes(root: Any, replace: Callable[[Any], Any]) -> Any:
    """``root`` rebuilt bottom-up: every IR node (fields rewritten first) is passed to
    ``replace``, whose result stands for it wherever it occurs (``None`` keeps the node).
    Shared nodes stay shared (one rewrite per object), unchanged subtrees are the same
    objects, so identity-compared variables can be swapped consistently."""
    memo: dict[int, Any] = {}

    def rewrite(x: Any) -> Any:
        key = id(x)
        if key in memo:
            return memo[key]
        if isinstance(x, Node):
            out = x.replace(**{k: rewrite(getattr(x, k)) for k in field_names(type(x))})
            new = replace(out)
            out = out if new is None else new
        elif type(x) is tuple:
            items = tuple(rewrite(v) for v in x)
            out = x if all(a is b for a, b in zip(items, x)) else items
        elif isinstance(x, FrozenDict):
            items = {k: rewrite(v) for k, v in x.items()}
            out = x if all(items[k] is v for k, v in x.items()) else FrozenDict(items)
        else:
            out = x
        memo[key] = out
        return out

    return rewrite(root)
