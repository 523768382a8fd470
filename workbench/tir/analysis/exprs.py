"""Small facts about expressions and loops that every analysis asks: which variables an
expression uses, and whether an expression or a loop extent is a constant.

These were copied into te, dlight, meta_schedule and the feature extractor; they live here
once. Where two copies answered subtly different questions, both answers have a name:
:func:`vars_in_order` keeps the order of appearance and, with ``unique=False``, every
occurrence (``i + i`` has two), which :func:`collect_vars` (a set) cannot tell.
"""
from __future__ import annotations

from typing import Any

from workbench.tir.expr import IntImm, Var
from workbench.tir.functor import IRVisitor, collect_vars
from workbench.tir.stmt import For


def vars_in_order(node: Any, unique: bool = True) -> list[Var]:
    """The Vars of ``node`` in the order a visitor meets them (operands left to right).

    ``unique=True``: each variable once, at its first appearance (a deterministic order for
    new iteration variables). ``unique=False``: every occurrence, so ``len`` counts uses.
    """
    found: list[Var] = []

    class _V(IRVisitor):
        def visit_Var(self, v: Var) -> None:
            if not unique or v not in found:
                found.append(v)

    _V().visit(node)
    return found


def const_int(e: Any) -> int | None:
    """The value of an ``IntImm`` as a Python int; ``None`` for anything else."""
    return int(e.value) if isinstance(e, IntImm) else None


def const_extent(loop: For) -> int | None:
    """The loop's extent when it is a constant (TVM's ``GetLoopIntExtent``), else ``None``."""
    ext = loop.extent
    return int(ext.value) if isinstance(ext, IntImm) else None


__all__ = ["collect_vars", "vars_in_order", "const_int", "const_extent"]
