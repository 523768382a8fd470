"""The TIR printer: registers TIR's text forms with workbench.ir.printer on import.

Imported by ``workbench/tir/__init__.py``, so any use of TIR has its printers registered.

- ``script_func(func, name)``: a PrimFunc as TVMScript-like text (``@T.prim_func def ...``).
- ``script(obj)`` (from workbench.ir.printer) then works for PrimFuncs, statements and
  expressions, and ``IRModule.script()`` prints each PrimFunc inside ``@I.ir_module``.
- ``short_repr`` forms: expressions in one-line infix (``i * 2 + 3``), statements as a summary
  (``<For i in 0..128>``), used by ``Node.__repr__``.
"""
from __future__ import annotations

from typing import Any, Callable

from workbench.ir.printer import (
    html_highlight, quote, register_function_printer, register_script, register_short_repr,
)
from workbench.tir.buffer import Buffer, BufferRegion, MatchBufferRegion, Range
from workbench.tir.expr import IntImm, PrimExpr
from workbench.tir.function import PrimFunc
from workbench.tir.script_expr import ExprPrinter, Names, deep_recursion
from workbench.tir import script_stmt as _stmt
from workbench.tir.script_stmt import StmtPrinter
from workbench.tir.stmt import (
    Allocate, AssertStmt, AttrStmt, Block, BlockRealize, BufferStore, DeclBuffer, Evaluate, For,
    IfThenElse, IterType, IterVar, LetStmt, SeqStmt, Stmt, While,
)

_SUMMARY_LIMIT = 80


def _cut(text: str, limit: int = _SUMMARY_LIMIT) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def expr_text(e: Any) -> str:
    """A one-line infix text of an expression (vars by name, clashing names suffixed)."""
    return ExprPrinter(Names()).text(e)


def _range_text(p: ExprPrinter, lo: PrimExpr, extent: PrimExpr) -> str:
    if isinstance(lo, IntImm) and lo.value == 0:
        return f"0..{p(extent)}"
    return f"{p(lo)}..{p(lo + extent)}"


def _for(s: For) -> str:
    p = ExprPrinter(Names())
    kind = "" if s.kind == "serial" else f" {s.kind}"
    return f"<For {p(s.loop_var)} in {_range_text(p, s.min, s.extent)}{kind}>"


def _store(s: BufferStore) -> str:
    p = ExprPrinter(Names())
    text = f"{p.names.buffer(s.buffer)}[{p.indices(s.indices)}] = {p(s.value)}"
    return f"<BufferStore {_cut(text)}>"


def _buffer(b: Buffer) -> str:
    shape = ", ".join(expr_text(s) for s in b.shape)
    shape = f"({shape},)" if len(b.shape) == 1 else f"({shape})"
    scope = "" if b.scope == "global" else f" {b.scope}"
    return f"<Buffer {b.name}: {shape} {b.dtype}{scope}>"


def _region(r: BufferRegion) -> str:
    return StmtPrinter().region(r)


def _iter_var(iv: IterVar) -> str:
    p = ExprPrinter(Names())
    kind = {IterType.DATA_PAR: "spatial", IterType.COMM_REDUCE: "reduce",
            IterType.ORDERED: "scan", IterType.OPAQUE: "opaque"}.get(iv.iter_type, iv.iter_type)
    tag = f" {quote(iv.thread_tag)}" if iv.thread_tag else ""
    return f"<IterVar {p(iv.var)}: {kind} {_range_text(p, iv.dom.min, iv.dom.extent)}{tag}>"


def _func(f: PrimFunc) -> str:
    params = ", ".join(f.buffer_map[v].name if v in f.buffer_map else v.name for v in f.params)
    return f"<PrimFunc {f.attrs.get('global_symbol', '')}({params})>"


def _cond(label: str) -> Callable[[Any], str]:
    return lambda s: f"<{label} {_cut(expr_text(s.condition))}>"


_SHORT: dict[type, Callable[[Any], str]] = {
    PrimExpr: expr_text,
    For: _for,
    BufferStore: _store,
    While: _cond("While"),
    IfThenElse: _cond("IfThenElse"),
    AssertStmt: _cond("AssertStmt"),
    SeqStmt: lambda s: f"<SeqStmt of {len(s.seq)}>",
    LetStmt: lambda s: f"<LetStmt {s.var.name} = {_cut(expr_text(s.value))}>",
    Evaluate: lambda s: f"<Evaluate {_cut(expr_text(s.value))}>",
    AttrStmt: lambda s: f"<AttrStmt {s.attr_key} = {_cut(expr_text(s.value))}>",
    Allocate: lambda s: (f"<Allocate {s.buffer_var.name}: {s.dtype}"
                         f"[{', '.join(expr_text(x) for x in s.extents)}]>"),
    DeclBuffer: lambda s: f"<DeclBuffer {s.buffer.name}>",
    Block: lambda s: f"<Block {s.name_hint}>",
    BlockRealize: lambda s: f"<BlockRealize {s.block.name_hint}>",
    Buffer: _buffer,
    BufferRegion: _region,
    MatchBufferRegion: lambda m: f"<MatchBufferRegion {m.buffer.name} <- {_region(m.source)}>",
    Range: lambda r: f"Range({expr_text(r.min)}, {expr_text(r.extent)})",
    IterVar: _iter_var,
    PrimFunc: _func,
}


def _deep(fn: Callable[..., str]) -> Callable[..., str]:
    def wrapped(*args: Any) -> str:
        with deep_recursion():
            return fn(*args)
    wrapped.__name__ = getattr(fn, "__name__", "printer")
    return wrapped


def script_func(func: PrimFunc, name: str = "main") -> str:
    """``func`` as ``@T.prim_func def <name>(...):`` text; equal input gives equal text."""
    with deep_recursion():
        return _stmt.script_func(func, name)


def script_stmt(s: Any) -> str:
    """A statement on its own, with declarations of the vars and buffers it uses freely."""
    with deep_recursion():
        return _stmt.script_stmt(s)


def register() -> None:
    for cls, fn in _SHORT.items():
        register_short_repr(cls, _deep(fn))
    register_script(PrimFunc, lambda f: script_func(f, f.attrs.get("global_symbol", "main")))
    register_script(Stmt, script_stmt)
    register_script(PrimExpr, _deep(expr_text))
    register_function_printer(PrimFunc, script_func)


register()

__all__ = ["script_func", "script_stmt", "expr_text", "html_highlight", "register"]
