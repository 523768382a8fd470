"""``DeadCodeElimination``: drop unused bindings and unused functions (TVM's pass of that name).

Contract: ``DeadCodeElimination(entry_functions=None)(mod)`` returns a new module where

- in every Relax function, a binding whose variable is never used (directly or through other
  live bindings, the function's result or an If branch) is removed when its value is pure:
  op calls, ``call_tir``, tuples, tuple items, leaves, and calls of pure Relax functions.
  Calls of external/packed functions, impure functions and ``MatchCast`` checks are kept (they
  may have effects or raise); empty blocks disappear;
- every function not reachable from an entry function is removed. Entries are
  ``entry_functions`` when given, else the Relax functions with a ``global_symbol``; a module
  without Relax functions is returned unchanged (a library of PrimFuncs is all entries).
"""
from __future__ import annotations

from typing import Any, Sequence

from workbench.ir.module import GlobalVar, IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.relax.expr import (
    Binding, Call, Function, If, MatchCast, Op, SeqExpr,
)
from workbench.relax.transform._util import referenced_functions, relax_functions, used_vars

# Ops whose calls must stay even when their result is unused.
IMPURE_OPS = frozenset({"relax.print", "relax.assert_op", "relax.call_builtin_with_ctx",
                        "relax.memory.kill_storage", "relax.memory.kill_tensor"})


def _is_pure(value: Any, mod: IRModule) -> bool:
    if isinstance(value, Call):
        op = value.op
        if isinstance(op, Op):
            return op.name not in IMPURE_OPS
        if isinstance(op, GlobalVar):
            func = mod[op] if op in mod else None
            return isinstance(func, Function) and func.is_pure
        return False  # ExternFunc / closures: unknown effects
    if isinstance(value, If):
        return False  # branches may hold effects; keep the whole If
    return True  # leaves, tuples, tuple items


def _prune_seq(seq: SeqExpr, mod: IRModule) -> SeqExpr:
    live = {id(v) for v in used_vars(seq.body)}
    kept_rev: list[list[Binding]] = []
    for block in reversed(seq.blocks):
        kept: list[Binding] = []
        for b in reversed(block.bindings):
            value = b.value
            if isinstance(value, If):
                value = value.replace(true_branch=_prune_seq(value.true_branch, mod),
                                      false_branch=_prune_seq(value.false_branch, mod)) \
                    if isinstance(value.true_branch, SeqExpr) and \
                    isinstance(value.false_branch, SeqExpr) else value
                b = b if value is b.value else b.replace(value=value)
            if id(b.var) in live or isinstance(b, MatchCast) or not _is_pure(value, mod):
                kept.append(b)
                live |= {id(v) for v in used_vars(value)}
        kept_rev.append(list(reversed(kept)))
    blocks = [type(blk)(tuple(bs)) for blk, bs in zip(reversed(seq.blocks),
                                                       kept_rev) if bs]
    blocks.reverse()
    same = len(blocks) == len(seq.blocks) and all(
        len(a.bindings) == len(b.bindings) and all(x is y for x, y in zip(a.bindings, b.bindings))
        for a, b in zip(blocks, seq.blocks))
    return seq if same else SeqExpr(tuple(blocks), seq.body, seq.struct_info)


def reachable_functions(mod: IRModule, entries: Sequence[str]) -> set[str]:
    """Names of the functions reachable from ``entries`` through references."""
    seen: set[str] = set()
    stack = [e for e in entries if e in mod]
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        func = mod[name]
        if isinstance(func, Function):
            stack += [r for r in referenced_functions(func.body) if r in mod and r not in seen]
    return seen


class DeadCodeElimination(Pass):
    """The pass object: ``mod = DeadCodeElimination()(mod)`` (see the module docstring)."""

    name = "DeadCodeElimination"
    opt_level = 1  # TVM's level: a PassContext(opt_level=0) keeps dead code

    def __init__(self, entry_functions: Sequence[str] | None = None):
        self.entry_functions = list(entry_functions) if entry_functions else None
        self.removed_bindings = 0
        self.removed_functions: list[str] = []

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"DeadCodeElimination expects an IRModule, got "
                            f"{type(mod).__name__}")
        out = mod.copy()
        self.removed_bindings = 0
        for name, func in relax_functions(mod):
            if isinstance(func.body, SeqExpr):
                body = _prune_seq(func.body, mod)
                if body is not func.body:
                    self.removed_bindings += _count(func.body) - _count(body)
                    out[name] = func.replace(body=body)
        entries = self.entry_functions or [
            name for name, f in relax_functions(out) if "global_symbol" in f.attrs]
        if not entries:
            return out
        live = reachable_functions(out, entries)
        self.removed_functions = [n for n in list(out) if n not in live]
        for n in self.removed_functions:
            del out[n]
        return out


def _count(seq: SeqExpr) -> int:
    return sum(len(b.bindings) for b in seq.blocks)


__all__ = ["DeadCodeElimination", "reachable_functions"]
