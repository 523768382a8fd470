"""A tiny, test-only text form of TIR expressions and regions (the real printer lives in
workbench.tir.printer; these tests must not depend on it)."""
from __future__ import annotations

from workbench.tir import expr as E
from workbench.tir.buffer import BufferRegion, Range
from workbench.tir import stmt as S

_INFIX = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.Div: "/", E.Mod: "rem", E.FloorDiv: "//",
          E.FloorMod: "%", E.EQ: "==", E.NE: "!=", E.LT: "<", E.LE: "<=", E.GT: ">",
          E.GE: ">=", E.And: "and", E.Or: "or"}
_CALLS = {E.Min: "min", E.Max: "max"}


def fmt(e) -> str:
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.IntImm):
        return str(bool(e.value)) if e.dtype == "bool" else (
            str(e.value) if e.dtype == "int32" else f"{e.dtype}({e.value})")
    if isinstance(e, E.FloatImm):
        return f"{e.dtype}({e.value:g})"
    if type(e) in _INFIX:
        return f"({fmt(e.a)} {_INFIX[type(e)]} {fmt(e.b)})"
    if type(e) in _CALLS:
        return f"{_CALLS[type(e)]}({fmt(e.a)}, {fmt(e.b)})"
    if isinstance(e, E.Not):
        return f"not {fmt(e.a)}"
    if isinstance(e, E.Cast):
        return f"{e.dtype}({fmt(e.value)})"
    if isinstance(e, E.Select):
        return f"select({fmt(e.condition)}, {fmt(e.true_value)}, {fmt(e.false_value)})"
    if isinstance(e, E.Call):
        return f"{e.op}({', '.join(fmt(a) for a in e.args)})"
    if isinstance(e, E.BufferLoad):
        return f"{e.buffer.name}[{', '.join(fmt(i) for i in e.indices)}]"
    if isinstance(e, Range):
        return f"{fmt(e.min)}:+{fmt(e.extent)}"
    if isinstance(e, BufferRegion):
        return f"{e.buffer.name}[{', '.join(fmt(r) for r in e.region)}]"
    if isinstance(e, S.BufferStore):
        return f"{e.buffer.name}[{', '.join(fmt(i) for i in e.indices)}] = {fmt(e.value)}"
    if isinstance(e, S.SeqStmt):
        return "; ".join(fmt(s) for s in e.seq)
    if isinstance(e, S.LetStmt):
        return f"let {e.var.name} = {fmt(e.value)}; {fmt(e.body)}"
    raise TypeError(f"te_text cannot format {type(e).__name__}")


def loops_and_block(stmt):
    """([(loop var name, min, extent)], BlockRealize) for one stage's loop nest."""
    loops = []
    while isinstance(stmt, S.For):
        loops.append((stmt.loop_var.name, fmt(stmt.min), fmt(stmt.extent)))
        stmt = stmt.body
    return loops, stmt


def stages(func):
    """The root block's stages as (loops, BlockRealize) pairs."""
    body = func.body.block.body
    seq = body.seq if isinstance(body, S.SeqStmt) else (body,)
    return [loops_and_block(s) for s in seq]


def regions(regs) -> list[str]:
    return [fmt(r) for r in regs]
