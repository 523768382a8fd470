"""Structural keys for expressions: equal keys mean structurally equal expressions.

The canonical form merges terms by these keys (two separately built ``x // 16`` are one atom)
and sorts terms by them, so the order of atoms is deterministic: variables sort by name, then
by creation (identity breaks ties between distinct variables that share a name).

Keys are nested tuples that start with the node's class name, so any two keys compare without
mixing types at the same position. They are memoised per analyzer (nodes hash by identity).
"""
from __future__ import annotations

from typing import Any

from workbench.ir.node import Node, field_names
from workbench.tir import expr as E

Key = tuple


class KeyMaker:
    """``key(e)``: a structural key for ``e``, memoised by identity."""

    def __init__(self) -> None:
        self._memo: dict[Any, Key] = {}
        # Variables get a creation-order serial the first time they are seen, so ties between
        # same-named variables break the same way on every run for the same input.
        self._serial: dict[E.Var, int] = {}
        self._by_serial: dict[int, E.Var] = {}

    def key(self, e: Any) -> Key:
        k = self._memo.get(e)
        if k is None:
            k = self._make(e)
            self._memo[e] = k
        return k

    def var_of(self, key: Key) -> E.Var:
        """The variable whose key is ``key`` (a key made by this KeyMaker)."""
        return self._by_serial[key[3]]

    def _make(self, e: Any) -> Key:
        if isinstance(e, E.Var):
            serial = self._serial.setdefault(e, len(self._serial))
            self._by_serial[serial] = e
            return ("Var", e.name, e.dtype, serial)
        if isinstance(e, E.IntImm):
            return ("IntImm", e.dtype, e.value)
        if isinstance(e, E.FloatImm):
            return ("FloatImm", e.dtype, e.value)
        if isinstance(e, E.BinaryOp):
            return (type(e).__name__, e.dtype, self.key(e.a), self.key(e.b))
        if isinstance(e, Node):
            if type(e).__name__ == "Buffer":
                serial = self._serial.setdefault(e, len(self._serial))  # type: ignore[arg-type]
                return ("Buffer", e.name, serial)  # type: ignore[attr-defined]
            return (type(e).__name__,) + tuple(self._field(getattr(e, n))
                                               for n in field_names(type(e)))
        return self._field(e)

    def _field(self, v: Any) -> Key:
        if isinstance(v, Node):
            return self.key(v)
        if isinstance(v, tuple):
            return ("tuple",) + tuple(self._field(x) for x in v)
        if v is None:
            return ("None",)
        if isinstance(v, (int, float, str, bool)):
            return ("lit", str(type(v).__name__), repr(v))
        return ("obj", type(v).__name__, id(v))
