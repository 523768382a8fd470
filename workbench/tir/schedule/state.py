"""Where things are in one version of a PrimFunc, and how to replace a statement in it.

IR nodes are immutable, so a schedule keeps stable *keys* rather than pointers: a block is known
by its (unique) name and a loop by its loop variable, which primitives keep when a loop
survives. :class:`FuncIndex` maps those keys to the current nodes and their ancestors;
:func:`replace_stmt` rebuilds only the path from a replaced statement up to the root.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.ir.node import field_names
from workbench.tir.analysis.blocks import child_stmts  # also imported from here by others
from workbench.tir.buffer import Buffer
from workbench.tir.expr import Var
from workbench.tir.function import PrimFunc
from workbench.tir.stmt import Block, BlockRealize, For, SeqStmt, Stmt


@dataclass(frozen=True)
class BlockInfo:
    block: Block
    realize: BlockRealize
    ancestors: tuple[Stmt, ...]   # from the function body down to the block's parent
    # Inside another block's ``init`` (blockize of a reduction puts a block there): such a
    # block is part of that init, not a stage of its own, so primitives refuse it (as TVM,
    # which gives these blocks no sref).
    in_init: bool = False

    @property
    def loops(self) -> list[For]:
        """The loops between the enclosing block (or root) and this block, outermost first."""
        out: list[For] = []
        for s in reversed(self.ancestors):
            if isinstance(s, Block):
                break
            if isinstance(s, For):
                out.append(s)
        return out[::-1]

    @property
    def scope_block(self) -> Block | None:
        """The nearest enclosing block (the root block for top-level stages)."""
        for s in reversed(self.ancestors):
            if isinstance(s, Block):
                return s
        return None


@dataclass(frozen=True)
class LoopInfo:
    loop: For
    ancestors: tuple[Stmt, ...]
    in_init: bool = False          # inside a block's init (see BlockInfo.in_init)


class FuncIndex:
    """Blocks by name and loops by loop variable for one PrimFunc (built once per version)."""

    def __init__(self, func: PrimFunc) -> None:
        self.func = func
        self.blocks: dict[str, BlockInfo] = {}
        self.loops: dict[Var, LoopInfo] = {}
        self.block_order: list[str] = []
        self._walk(func.body, (), False)

    def _walk(self, stmt: Any, ancestors: tuple[Stmt, ...], in_init: bool) -> None:
        if isinstance(stmt, BlockRealize):
            name = stmt.block.name_hint
            if name in self.blocks:
                raise ValueError(f"two blocks are named {name!r}; block names must be unique "
                                 "in a scheduled function")
            self.blocks[name] = BlockInfo(stmt.block, stmt, ancestors, in_init)
            self.block_order.append(name)
            inner = ancestors + (stmt, stmt.block)
            if stmt.block.init is not None:
                self._walk(stmt.block.init, inner, True)
            self._walk(stmt.block.body, inner, in_init)
            return
        if isinstance(stmt, For):
            self.loops[stmt.loop_var] = LoopInfo(stmt, ancestors, in_init)
        for child in child_stmts(stmt):
            self._walk(child, ancestors + (stmt,), in_init)

    def init_owner(self, key: str | Var) -> str | None:
        """The block whose init holds block (by name) or loop (by var) ``key``; None for a
        schedulable one."""
        info = self.blocks[key] if isinstance(key, str) else self.loops[key]
        if not info.in_init:
            return None
        owner = next(s for s in reversed(info.ancestors) if isinstance(s, Block))
        while self.blocks[owner.name_hint].in_init:
            owner = self.blocks[owner.name_hint].scope_block
        return owner.name_hint

    def parent_of(self, key: Any) -> Stmt | None:
        info = self.blocks[key] if isinstance(key, str) else self.loops[key]
        return info.ancestors[-1] if info.ancestors else None


def _replace_child(parent: Stmt, old: Stmt, new: Stmt | None) -> Stmt | None:
    """``parent`` with its child ``old`` replaced by ``new`` (``None`` removes it)."""
    if isinstance(parent, SeqStmt):
        items: list[Stmt] = []
        for s in parent.seq:
            if s is old:
                if new is None:
                    continue
                items.extend(new.seq if isinstance(new, SeqStmt) else (new,))
            else:
                items.append(s)
        if not items:
            return None
        return items[0] if len(items) == 1 else SeqStmt(tuple(items))
    for name in field_names(type(parent)):
        if getattr(parent, name) is old:
            if new is None:
                raise ValueError(f"cannot remove the only body of a {type(parent).__name__}")
            return parent.replace(**{name: new})
    raise KeyError(f"{type(old).__name__} is not a child of {type(parent).__name__}")


def replace_stmt(func: PrimFunc, ancestors: tuple[Stmt, ...], old: Stmt,
                 new: Stmt | None) -> PrimFunc:
    """Replace ``old`` (whose ancestors are given, root first) and rebuild the path to the root."""
    for parent in reversed(ancestors):
        if isinstance(parent, BlockRealize):
            # Our "parent" chain lists both the realize and its block; the block is the child.
            new = parent.replace(block=new) if new is not None else None
            old = parent
            continue
        replaced = _replace_child(parent, old, new)
        old, new = parent, replaced
    if old is not func.body:
        raise KeyError("the statement to replace is not in this function")
    if new is None:
        raise ValueError("cannot remove the whole function body")
    return func.with_body(new)


def buffers_read(block: Block) -> list[Buffer]:
    return [r.buffer for r in block.reads]


def buffers_written(block: Block) -> list[Buffer]:
    return [r.buffer for r in block.writes]
