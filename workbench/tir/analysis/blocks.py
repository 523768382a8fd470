"""Walking statements: the statements directly inside one, and the blocks below one.

These walk statements only (blocks never hide inside expressions), which keeps them cheap
enough for the checks every schedule primitive runs; the schedule state, the primitives,
lowering passes, dlight and meta_schedule all walk block trees with them.
"""
from __future__ import annotations

from typing import Any, Iterator

from workbench.ir.node import field_names
from workbench.tir.stmt import Block, BlockRealize, BufferStore, Evaluate, For, SeqStmt, Stmt


def child_stmts(stmt: Any) -> Iterator[Stmt]:
    """The statements directly inside ``stmt`` (in order)."""
    if isinstance(stmt, SeqStmt):
        yield from stmt.seq
        return
    for name in field_names(type(stmt)):
        v = getattr(stmt, name)
        if isinstance(v, Stmt):
            yield v


def _collect_realizes(stmt: Any, out: list[BlockRealize]) -> None:
    t = type(stmt)
    if t is BlockRealize:
        out.append(stmt)
    elif t is SeqStmt:
        for s in stmt.seq:
            _collect_realizes(s, out)
    elif t is For:
        _collect_realizes(stmt.body, out)
    elif t is not BufferStore and t is not Evaluate:
        for s in child_stmts(stmt):
            _collect_realizes(s, out)


def blocks_under(stmt: Any, post_order: bool = False) -> list[Block]:
    """Every Block inside ``stmt`` (nested ones too), parents before children unless
    ``post_order``; walks statements only, like :func:`realizes_under`."""
    out: list[Block] = []

    def walk(s: Any) -> None:
        t = type(s)
        if t is BufferStore or t is Evaluate:
            return
        if t is Block and not post_order:
            out.append(s)
        for c in (s.seq if t is SeqStmt else child_stmts(s)):
            walk(c)
        if t is Block and post_order:
            out.append(s)

    walk(stmt)
    return out


def realizes_under(stmt: Stmt) -> list[BlockRealize]:
    """Every BlockRealize inside ``stmt`` (not descending into found blocks' bodies).

    Walks statements only (realizes never hide inside expressions), which is what makes this
    cheap enough for the checks every primitive runs."""
    out: list[BlockRealize] = []
    _collect_realizes(stmt, out)
    return out


__all__ = ["child_stmts", "blocks_under", "realizes_under"]
