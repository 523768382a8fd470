"""Common integer subexpressions rendered once per basic block.

Lowered TIR repeats its index arithmetic in full at every buffer access: a matmul's 8 x 2
register tile unrolled 4 times along k computes ``fused // 8 * 32768 + fused % 2 * 16384 +
i * 4096 + ...`` in each of the 128 loads of its 64 updates, and every ``//`` / ``%`` is
several LLVM instructions (floor semantics). LLVM's CSE removes the repeats again, but
building, printing and parsing them first was over half of the renderer's time and a fifth
of a tuning candidate's build.

:class:`IndexCSE` gives an integer arithmetic tree a structural key and remembers the value it
was rendered to, per basic block: a value defined earlier in the block the builder is
appending to dominates the insertion point, so reusing it is always valid IR. Variables enter
the key as the LLVM value they are bound to *now*, so a loop or let variable rebound in the
same block (an unrolled body) never reuses a value computed under the old binding. Loads,
calls and floats are never keyed: only arithmetic whose value depends on its operands alone.
"""
from __future__ import annotations

from typing import Any, Callable, Hashable

import llvmlite.ir as ir

from workbench.ir import dtype as dt
from workbench.tir import expr as E

#: Integer operations whose value depends only on their operands (what may be shared).
_BINARY = (E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Div, E.Mod, E.Min, E.Max)
KEYED = frozenset(_BINARY + (E.Cast,))


def _is_int(dtype: str) -> bool:
    return dt.parse(dtype).is_integer  # (parse is cached)


class IndexCSE:
    """Per-function memo of rendered integer arithmetic, valid within one basic block.

    ``render(e, builder, rule)`` returns the value of ``e`` (a node of a :data:`KEYED` type),
    reusing one rendered earlier in the builder's current block when ``e`` has the same
    structure over the same variable bindings, else calling ``rule()`` to emit it.
    """

    def __init__(self, bindings: dict[E.Var, ir.Value]) -> None:
        self.bindings = bindings
        self.values: dict[tuple[int, Hashable], ir.Value] = {}
        # Keys of the nodes of the tree being rendered, by id: computed once for the whole
        # tree when its root is reached, dropped when the root is done (ids are only stable
        # while the tree is alive, and bindings only fixed while rendering one tree).
        self._keys: dict[int, Hashable | None] = {}
        # Every LLVM value a key names by id, kept alive so that no id is ever reused.
        self._named: dict[int, ir.Value] = {}

    def render(self, e: E.PrimExpr, b: ir.IRBuilder, rule: Callable[[], ir.Value]) -> ir.Value:
        keys = self._keys
        root = id(e) not in keys
        key = self._key(e) if root else keys[id(e)]
        try:
            return rule() if key is None else self.reuse(b, key, rule)
        finally:
            if root:
                keys.clear()

    def pointer(self, b: ir.IRBuilder, base: ir.Value, ty: ir.Type) -> ir.Value:
        """``base`` cast to pointer type ``ty``, one cast per block (each access asks)."""
        self._named[id(base)] = base
        return self.reuse(b, ("p", id(base), str(ty)), lambda: b.bitcast(base, ty))

    def reuse(self, b: ir.IRBuilder, key: Hashable, make: Callable[[], ir.Value]) -> ir.Value:
        """The value made for ``key`` earlier in ``b``'s current block, else ``make()``."""
        block = b.block
        slot = (id(block), key)  # blocks live as long as the function
        value = self.values.get(slot)
        if value is None:
            value = make()
            if b.block is block:  # emitted without branching: defined in this block
                self.values[slot] = value
        return value

    def _key(self, e: E.PrimExpr) -> Hashable | None:
        t = type(e)
        key: Any
        if t is E.IntImm:
            key = ("c", e.dtype, e.value)
        elif t is E.Var or t is E.SizeVar:
            bound = self.bindings.get(e)
            if bound is None:
                key = None
            else:
                key = ("v", id(bound))
                self._named[id(bound)] = bound
        elif t in KEYED and _is_int(e.dtype):
            if t is E.Cast:
                inner = self._key(e.value) if _is_int(e.value.dtype) else None
                key = None if inner is None else (t, e.dtype, inner)
            else:
                a, c = self._key(e.a), self._key(e.b)
                key = None if a is None or c is None else (t, e.dtype, a, c)
        else:
            key = None
        self._keys[id(e)] = key
        return key
