"""Structural equality and hashing: compare IR by shape, with variables mapped.

Contract
--------
``structural_equal(a, b)`` walks both values in lockstep over their dataclass fields (tuples,
FrozenDicts, IRModules and plain values too). Variables are not compared by name: a variable
(or Buffer / IterVar) met first in a *definition* position binds to its counterpart, and every
later occurrence must map the same way. A variable used without a definition is *free*: free
variables are equal only when they are the same object, unless ``map_free_vars=True``, in which
case they bind on first use like definitions.

``structural_hash`` walks the same way and numbers variables in definition order (de Bruijn
style), so renaming does not change it and ``structural_equal(a, b) => structural_hash(a) ==
structural_hash(b)``. The hash is deterministic across processes (databases key on it).

Which fields define variables is data, not code: each IR layer registers its node classes with
:func:`register_structural` (``workbench.tir`` does so on import), so this layer never imports
the layers above it.

Both walks are iterative (an explicit stack), so deep expressions do not hit Python's recursion
limit, and they visit a shared subtree once per reference, like the IR's own visitors.
"""
from __future__ import annotations

import hashlib
import math

import numpy as np
import operator
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator

from workbench.ir.dispatch import TypeTable
from workbench.ir.module import IRModule
from workbench.ir.node import FrozenDict, Node, field_names

# Kinds of node class.
NODE = "node"    # compared field by field
VAR = "var"      # a variable: mapped, compared by its non-ignored fields only when bound
BOUND = "bound"  # an object with identity (Buffer, IterVar): compared once, then mapped

# How a field is visited: as a use, always as a definition, or as a definition only when the
# node holding it is itself in a definition position (a declared Buffer's data var and shape).
_USE, _DEF, _INHERIT = 0, 1, 2

_ATOMS = (str, int, bool, type(None))


@dataclass(frozen=True)
class _Rule:
    kind: str
    fields: tuple[str, ...]   # comparison order, ignored fields dropped
    codes: tuple[int, ...]    # _USE / _DEF / _INHERIT per field
    tag: str                  # stable class token for hashing
    free_fields: tuple[str, ...]  # every field, for the token of a free variable
    get: Callable[[Any], tuple]   # the values of ``fields``, as a tuple


# The declared spec of a class, found along its MRO; undeclared classes compare every field.
_REGISTERED: TypeTable[dict[str, Any]] = TypeTable(default=dict(
    kind=NODE, order=(), defs=frozenset(), inherit_defs=frozenset(), ignore=frozenset()))
# The rule of each concrete class (its own fields, its spec's order): built on first use.
_RULES: dict[type, _Rule] = {}


def register_structural(cls: type, *, kind: str = NODE, order: Iterable[str] = (),
                        defs: Iterable[str] = (), inherit_defs: Iterable[str] = (),
                        ignore: Iterable[str] = ()) -> None:
    """Declare how ``cls`` (and its subclasses) take part in structural equality and hashing.

    ``kind`` is ``"node"``, ``"var"`` or ``"bound"``; ``order`` lists fields to visit first
    (definitions must come before the uses they scope); ``defs`` are fields whose variables are
    always definitions; ``inherit_defs`` are definitions only when the node itself is being
    defined; ``ignore`` fields take no part (names of variables and buffers).
    """
    if kind not in (NODE, VAR, BOUND):
        raise ValueError(
            f"register_structural: kind must be 'node', 'var' or 'bound', got {kind!r}")
    _REGISTERED.register(cls, dict(kind=kind, order=tuple(order), defs=frozenset(defs),
                                   inherit_defs=frozenset(inherit_defs),
                                   ignore=frozenset(ignore)))
    _RULES.clear()


def _rule(cls: type) -> _Rule:
    rule = _RULES.get(cls)
    if rule is not None:
        return rule
    spec = _REGISTERED.lookup(cls)
    names = field_names(cls)
    unknown = [f for f in (*spec["order"], *spec["defs"], *spec["inherit_defs"]) if f not in names]
    if unknown:
        raise TypeError(f"structural rule for {cls.__name__} names unknown fields {unknown}")
    ordered = [f for f in spec["order"]] + [f for f in names if f not in spec["order"]]
    fields = tuple(f for f in ordered if f not in spec["ignore"])
    codes = tuple(_DEF if f in spec["defs"] else _INHERIT if f in spec["inherit_defs"] else _USE
                  for f in fields)
    getter = (operator.attrgetter(*fields) if len(fields) > 1
              else (lambda o, f=fields[0]: (getattr(o, f),)) if fields else (lambda o: ()))
    rule = _Rule(spec["kind"], fields, codes, f"{cls.__module__}.{cls.__qualname__}", names,
                 getter)
    _RULES[cls] = rule
    return rule


def _is_array(x: Any) -> bool:
    """(Atoms first: the common case stays one set lookup.) A tensor value outside the IR (an NDArray or numpy array in an attr, such as the
    importers' ``params``): compared by content, as TVM compares NDArrays."""
    if type(x) in _ATOMS:
        return False
    return isinstance(x, np.ndarray) or (hasattr(x, "shape") and hasattr(x, "dtype")
                                         and callable(getattr(x, "numpy", None)))


def _array_bytes(x: Any) -> tuple[str, tuple, bytes]:
    arr = np.asarray(x if isinstance(x, np.ndarray) else x.numpy())
    return str(arr.dtype), tuple(arr.shape), np.ascontiguousarray(arr).tobytes()


def _array_key(x: Any) -> str:
    dtype, shape, data = _array_bytes(x)
    return f"{dtype}{shape}:{hashlib.sha1(data).hexdigest()}"


def _leaf_equal(x: Any, y: Any) -> bool:
    if _is_array(x):
        return type(x) is type(y) and _array_bytes(x) == _array_bytes(y)
    content = _OPAQUE.get(type(x))
    if content is not None:
        return type(x) is type(y) and content(x) == content(y)
    return x == y


# Values outside the IR compared by content, not identity (runtime modules a backend codegen
# attached to a module): type -> its content as bytes. Registered by the layer that knows them.
_OPAQUE: dict[type, Callable[[Any], bytes]] = {}


def register_opaque_value(cls: type, content: Callable[[Any], bytes]) -> None:
    """Compare and hash values of type ``cls`` (outside the IR) by ``content(value)``."""
    _OPAQUE[cls] = content


def _leaf_key(x: Any) -> str:
    if _is_array(x):
        return _array_key(x)
    content = _OPAQUE.get(type(x))
    return hashlib.sha1(content(x)).hexdigest() if content is not None else repr(x)


def _float_eq(x: float, y: float) -> bool:
    if x != x:
        return y != y
    # 0.0 and -0.0 differ: a round trip must keep the sign, and a mutation to it is a change.
    return x == y and (x != 0.0 or math.copysign(1.0, x) == math.copysign(1.0, y))


def _key_order(k: Any) -> tuple[str, str]:
    return (type(k).__name__, repr(k))


def _plain_keys(d: dict) -> bool:
    return all(type(k) in _ATOMS or type(k) is float for k in d)


# ---- equality ---------------------------------------------------------------------------------

@dataclass
class Mismatch:
    """Where two values first differ: ``path`` from the root, both sub-values and why."""

    path: str
    lhs: Any
    rhs: Any
    reason: str
    lhs_parent: Any = None
    rhs_parent: Any = None


def _path_text(path: Any) -> str:
    parts: list[str] = []
    while path is not None:
        path, label, _, _ = path
        parts.append(label)
    return "root" + "".join(reversed(parts))


def _mismatch(path: Any, x: Any, y: Any, reason: str) -> Mismatch:
    parent = (None, None) if path is None else (path[2], path[3])
    return Mismatch(_path_text(path), x, y, reason, *parent)


def first_mismatch(a: Any, b: Any, map_free_vars: bool = False) -> Mismatch | None:
    """The first place where ``a`` and ``b`` differ structurally, or ``None`` when equal."""
    lmap: dict[int, Any] = {}
    rmap: dict[int, Any] = {}
    # Entries: (lhs, rhs, in definition position, path). A path is (parent path, label,
    # lhs parent, rhs parent), built cheaply as tuples and only turned into text on failure.
    stack: list[tuple[Any, Any, bool, Any]] = [(a, b, False, None)]
    pop, push = stack.pop, stack.append
    rules_get = _RULES.get
    while stack:
        x, y, d, path = pop()
        tx = type(x)
        if tx is not type(y):
            return _mismatch(path, x, y, f"type {tx.__name__} vs {type(y).__name__}")
        rule = rules_get(tx)
        if rule is None:
            if tx in _ATOMS:
                if x != y:
                    return _mismatch(path, x, y, "values differ")
                continue
            if tx is float:
                if not _float_eq(x, y):
                    return _mismatch(path, x, y, "values differ")
                continue
            if tx is tuple or tx is list:
                if len(x) != len(y):
                    return _mismatch(path, x, y, f"length {len(x)} vs {len(y)}")
                for i in range(len(x) - 1, -1, -1):
                    push((x[i], y[i], d, (path, f"[{i}]", x, y)))
                continue
            if tx is FrozenDict or tx is dict:
                bad = _push_dict_pairs(x, y, d, path, push)
                if bad is not None:
                    return bad
                continue
            if tx is IRModule:
                names_x, names_y = sorted(x._funcs), sorted(y._funcs)
                if names_x != names_y:
                    return _mismatch(path, x, y, f"functions {names_x} vs {names_y}")
                for name in reversed(names_x):
                    push((x[name], y[name], False, (path, f"[{name!r}]", x, y)))
                push((x.attrs, y.attrs, False, (path, ".attrs", x, y)))
                continue
            if not isinstance(x, Node):
                if x is not y and not _leaf_equal(x, y):
                    return _mismatch(path, x, y, "values differ")
                continue
            rule = _rule(tx)
        kind = rule.kind
        if kind is not NODE:
            m = lmap.get(id(x))
            if m is not None:
                if m is not y:
                    return _mismatch(path, x, y, "maps to a different object earlier")
                continue
            if id(y) in rmap:
                return _mismatch(path, x, y, "the right-hand object maps to another earlier")
            if kind is VAR and not d and not map_free_vars:
                if x is not y:
                    return _mismatch(path, x, y,
                                     "free variables differ (map_free_vars=True would map them)")
                lmap[id(x)] = y
                rmap[id(y)] = x
                continue
            lmap[id(x)] = y
            rmap[id(y)] = x
        fields, codes = rule.fields, rule.codes
        for i in range(len(fields) - 1, -1, -1):
            f = fields[i]
            c = codes[i]
            push((getattr(x, f), getattr(y, f), c == _DEF or (c == _INHERIT and d),
                  (path, "." + f, x, y)))
    return None


def _push_dict_pairs(x: dict, y: dict, d: bool, path: Any, push: Any) -> Mismatch | None:
    if len(x) != len(y):
        return _mismatch(path, x, y, f"size {len(x)} vs {len(y)}")
    if _plain_keys(x) and _plain_keys(y):
        # Plain keys (attribute names) pair by value, so insertion order does not matter.
        kx, ky = sorted(x, key=_key_order), sorted(y, key=_key_order)
        for p, q in zip(kx, ky):
            if type(p) is not type(q) or not (p == q or (p != p and q != q)):
                return _mismatch(path, x, y, f"keys {kx} vs {ky}")
        for p, q in zip(reversed(kx), reversed(ky)):
            push((x[p], y[q], d, (path, f"[{p!r}]", x, y)))
        return None
    # Node keys (a buffer_map's params) pair in insertion order, key before value.
    items_x, items_y = list(x.items()), list(y.items())
    for i in range(len(items_x) - 1, -1, -1):
        (kp, vp), (kq, vq) = items_x[i], items_y[i]
        push((vp, vq, d, (path, f"[#{i} value]", x, y)))
        push((kp, kq, d, (path, f"[#{i} key]", x, y)))
    return None


def structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> bool:
    """True when ``a`` and ``b`` have the same structure up to a consistent renaming of the
    variables and buffers they define (and of free variables when ``map_free_vars``)."""
    return first_mismatch(a, b, map_free_vars) is None


def assert_structural_equal(a: Any, b: Any, map_free_vars: bool = False) -> None:
    """Raise ``ValueError`` naming the first mismatching path and showing both sub-values."""
    m = first_mismatch(a, b, map_free_vars)
    if m is None:
        return
    from workbench.ir.printer import script_or_repr

    lines = [f"structural mismatch at {m.path}: {m.reason}",
             f"lhs: {script_or_repr(m.lhs)}", f"rhs: {script_or_repr(m.rhs)}"]
    if m.lhs_parent is not None and not isinstance(m.lhs_parent, (tuple, list, dict)):
        lines += [f"in lhs: {script_or_repr(m.lhs_parent)}",
                  f"in rhs: {script_or_repr(m.rhs_parent)}"]
    raise ValueError("\n".join(lines))


# ---- hashing ----------------------------------------------------------------------------------

def structural_hash(node: Any, map_free_vars: bool = False) -> int:
    """A deterministic 64-bit hash consistent with :func:`structural_equal`.

    The walk emits one token per node, value and container (with lengths, so the token stream
    identifies the tree) and digests them with BLAKE2b, which unlike ``hash(str)`` does not
    change between processes.
    """
    memo = node.__dict__.get("_shash") if type(node) is IRModule else None
    if memo is not None:
        h = memo.get(map_free_vars)
        if h is not None:
            return h
    h = int.from_bytes(hashlib.blake2b("\x00".join(_tokens(node, map_free_vars)).encode(),
                                       digest_size=8).digest(), "little")
    if memo is not None:
        memo[map_free_vars] = h
    return h


def _tokens(node: Any, map_free_vars: bool) -> list[str]:
    toks: list[str] = []
    emit = toks.append
    seen: dict[int, str] = {}  # id -> token for variables / bound objects met before
    count = 0
    stack: list[tuple[Any, bool]] = [(node, False)]
    pop, push = stack.pop, stack.append
    rules_get = _RULES.get
    while stack:
        x, d = pop()
        tx = type(x)
        rule = rules_get(tx)
        if rule is None:
            if tx is str:
                emit(repr(x))
                continue
            if tx is int or tx is bool or x is None:
                emit(str(x))
                continue
            if tx is float:
                emit("f" + repr(x))
                continue
            if tx is bytes:  # constant data: a digest, not a token per byte
                emit("b%d:%s" % (len(x), hashlib.blake2b(x, digest_size=16).hexdigest()))
                continue
            if tx is tuple or tx is list:
                emit(("(%d" if tx is tuple else "[%d") % len(x))
                for i in range(len(x) - 1, -1, -1):
                    push((x[i], d))
                continue
            if tx is FrozenDict or tx is dict:
                emit(("F{%d" if tx is FrozenDict else "{%d") % len(x))
                if _plain_keys(x):
                    for k in sorted(x, key=_key_order, reverse=True):
                        push((x[k], d))
                        push((k, d))
                else:
                    for k, v in reversed(list(x.items())):
                        push((v, d))
                        push((k, d))
                continue
            if tx is IRModule:
                emit("IRModule")
                names = sorted(x._funcs)
                emit("{%d" % len(names))
                for name in reversed(names):
                    push((x[name], False))
                    push((name, False))
                push((x.attrs, False))
                continue
            if not isinstance(x, Node):
                emit(f"?{tx.__module__}.{tx.__qualname__}:{_leaf_key(x)}")
                continue
            rule = _rule(tx)
        if rule.kind is not NODE:
            tok = seen.get(id(x))
            if tok is not None:
                emit(tok)
                continue
            if rule.kind is VAR and not d and not map_free_vars:
                # A free variable is equal only to itself: identify it by all its plain fields.
                tok = "F" + rule.tag + repr(tuple(
                    v for v in (getattr(x, f) for f in rule.free_fields)
                    if type(v) in _ATOMS))
                seen[id(x)] = tok
                emit(tok)
                continue
            seen[id(x)] = "v%d" % count
            count += 1
            emit("D" + rule.tag)
        else:
            emit(rule.tag)
        # Atom fields (dtypes, names, numbers) are emitted in place, saving a trip through the
        # stack; a child node leaves a "@" marker there, so the stream still has one token per
        # field in field order, then each child's tokens in the same order.
        codes = rule.codes
        kids = []
        for i, v in enumerate(rule.get(x)):
            tv = type(v)
            if tv is str:
                emit(repr(v))
            elif tv is int or tv is bool or v is None:
                emit(str(v))
            else:
                emit("@")
                c = codes[i]
                kids.append((v, c == _DEF or (c == _INHERIT and d)))
        if kids:
            kids.reverse()
            stack.extend(kids)
    return toks


class StructuralSet:
    """A set of IR values up to structural equality, in insertion order: items are bucketed by
    ``hash(key(item))`` and told apart by ``equal``, so a lookup compares only same-hash items.

    ``key`` picks what is compared (the item itself by default; a database's workloads compare
    their modules); ``hash`` / ``equal`` default to :func:`structural_hash` /
    :func:`structural_equal`. Where a caller already knows the hash it passes it as ``h``.
    """

    def __init__(self, key: Callable[[Any], Any] | None = None,
                 hash: Callable[[Any], int] = structural_hash,  # noqa: A002 - the set's hash
                 equal: Callable[[Any, Any], bool] = structural_equal) -> None:
        self.key = key if key is not None else (lambda item: item)
        self.hash = hash
        self.equal = equal
        self._buckets: dict[int, list[Any]] = {}
        self._order: list[Any] = []

    def find(self, probe: Any, h: int | None = None) -> Any:
        """The item whose key equals ``probe``, or None."""
        for item in self._buckets.get(self.hash(probe) if h is None else h, ()):
            if self.equal(self.key(item), probe):
                return item
        return None

    def add(self, item: Any, h: int | None = None) -> bool:
        """Add ``item`` unless an equal one is present (then False)."""
        key = self.key(item)
        h = self.hash(key) if h is None else h
        if self.find(key, h) is not None:
            return False
        self._buckets.setdefault(h, []).append(item)
        self._order.append(item)
        return True

    def owns(self, item: Any, h: int | None = None) -> bool:
        """Is ``item`` itself (by identity, not equality) in the set?"""
        h = self.hash(self.key(item)) if h is None else h
        return any(x is item for x in self._buckets.get(h, ()))

    def copy(self) -> "StructuralSet":
        """A set with the same items that grows on its own."""
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__)
        new._buckets = {h: list(items) for h, items in self._buckets.items()}
        new._order = list(self._order)
        return new

    def __contains__(self, probe: Any) -> bool:
        return self.find(probe) is not None

    def __iter__(self) -> Iterator[Any]:
        return iter(self._order)

    def __len__(self) -> int:
        return len(self._order)


__all__ = ["structural_equal", "structural_hash", "assert_structural_equal", "first_mismatch",
           "register_structural", "register_opaque_value", "Mismatch", "NODE", "VAR", "BOUND",
           "StructuralSet"]
