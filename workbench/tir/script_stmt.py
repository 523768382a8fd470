"""TVMScript-style text of TIR statements and PrimFuncs.

Layout follows TVMScript: perfectly nested plain loops merge into ``T.grid``; the implicit root
block of a block-form function prints as a comment with its buffers allocated at function level;
block vars bound directly to enclosing loop vars print as one ``T.axis.remap``; statements that
scope a single body (LetStmt, Allocate, DeclBuffer, AssertStmt) print their body at the same
indentation, as a Python reader would expect.
"""
from __future__ import annotations

from typing import Any, Callable

from workbench.ir.dispatch import TypeTable
from workbench.ir.printer import quote
from workbench.ir.structural import structural_equal
from workbench.tir.buffer import Buffer, BufferRegion, MatchBufferRegion
from workbench.tir.expr import IntImm, PrimExpr, SizeVar, Var
from workbench.tir.function import PrimFunc
from workbench.tir.script_expr import ExprPrinter, Names, dtype_ann
from workbench.tir.stmt import (
    Allocate, AssertStmt, AttrStmt, Block, BlockRealize, BufferStore, DeclBuffer, Evaluate, For,
    ForKind, IfThenElse, IterType, IterVar, LetStmt, SeqStmt, Stmt, While,
)

_AXIS = {IterType.DATA_PAR: "spatial", IterType.COMM_REDUCE: "reduce",
         IterType.ORDERED: "scan", IterType.OPAQUE: "opaque"}
_REMAP = {IterType.DATA_PAR: "S", IterType.COMM_REDUCE: "R"}
_BUFFER_DEFAULTS = {"scope": "global", "data_alignment": 64, "offset_factor": 1}


def _is_const(e: Any, value: int) -> bool:
    return isinstance(e, IntImm) and e.value == value


def _same(a: Any, b: Any) -> bool:
    return a is b or structural_equal(a, b)


class StmtPrinter:
    """Collects ``(indent, text)`` lines for statements; dispatch is a per-type table."""

    def __init__(self, names: Names | None = None) -> None:
        self.names = names or Names()
        self.e = ExprPrinter(self.names)
        self.lines: list[tuple[int, str]] = []
        self._loops: dict[int, For] = {}  # enclosing loops by id(loop_var), for axis remap

    def emit(self, ind: int, text: str) -> None:
        self.lines.append((ind, text))

    def render(self, lines: list[tuple[int, str]] | None = None) -> str:
        return "\n".join("    " * ind + text for ind, text in (lines or self.lines))

    def stmt(self, s: Any, ind: int) -> None:
        h = _handler(type(s))
        if h is None:
            self.emit(ind, self.e.value(s))
        else:
            h(self, s, ind)

    def body(self, s: Any, ind: int) -> None:
        """A nested body; Python needs at least one statement there."""
        start = len(self.lines)
        self.stmt(s, ind)
        if len(self.lines) == start:
            self.emit(ind, "pass")

    # ---- buffers ------------------------------------------------------------------------------

    def define_buffer(self, buf: Buffer) -> str:
        name = self.names.define(buf, buf.name)
        if not self.names.has(buf.data):
            self.names.alias(buf.data, f"{name}.data")
        return name

    def buffer_args(self, buf: Buffer, dtype_always: bool) -> str:
        """Shape, dtype and the non-default properties, as ``T.Buffer``/``alloc_buffer`` args."""
        shape = ", ".join(self.e(s) for s in buf.shape)
        parts = [f"({shape},)" if len(buf.shape) == 1 else f"({shape})"]
        if dtype_always or buf.dtype != "float32":
            parts.append(quote(buf.dtype))
        if buf.strides:
            parts.append(f"strides=({', '.join(self.e(s) for s in buf.strides)}"
                         f"{',' if len(buf.strides) == 1 else ''})")
        if buf.elem_offset is not None:
            parts.append(f"elem_offset={self.e(buf.elem_offset)}")
        if buf.scope != _BUFFER_DEFAULTS["scope"]:
            parts.append(f"scope={quote(buf.scope)}")
        if buf.data_alignment != _BUFFER_DEFAULTS["data_alignment"]:
            parts.append(f"align={buf.data_alignment}")
        if buf.offset_factor != _BUFFER_DEFAULTS["offset_factor"]:
            parts.append(f"offset_factor={buf.offset_factor}")
        if buf.axis_separators:
            parts.append(f"axis_separators={list(buf.axis_separators)}")
        return ", ".join(parts)

    def region(self, r: BufferRegion) -> str:
        dims = []
        for rng in r.region:
            if _is_const(rng.extent, 1):
                dims.append(self.e(rng.min))
            else:
                stop = rng.extent if _is_const(rng.min, 0) else rng.min + rng.extent
                dims.append(f"{self.e(rng.min)}:{self.e(stop)}")
        return f"{self.names.buffer(r.buffer)}[{', '.join(dims) if dims else '()'}]"

    def declarations(self, ind: int) -> list[tuple[int, str]]:
        """``n = T.int32()`` / ``A = T.Buffer(...)`` lines for everything used but not defined."""
        # Buffers first: their shapes may name free vars not seen yet.
        buffers = [(ind, f"{self.names.buffer(b)} = T.Buffer({self.buffer_args(b, True)}"
                         f"{self._data_arg(b)})") for b in list(self.names.free_buffers)]
        out = []
        for v in self.names.free_vars:
            size = ", is_size_var=True" if isinstance(v, SizeVar) else ""
            out.append((ind, f"{self.names.var(v)} = T.{v.dtype}({size[2:]})"))
        return out + buffers

    def _data_arg(self, buf: Buffer) -> str:
        """``, data=A.data`` when a declared buffer views storage the printout already names
        (a flattened view of a parameter), so the text keeps the two buffers' shared data."""
        return f", data={self.names.var(buf.data)}" if self.names.has(buf.data) else ""

    # ---- statements ---------------------------------------------------------------------------

    def SeqStmt(self, s: SeqStmt, ind: int) -> None:
        for x in s.seq:
            self.stmt(x, ind)

    def BufferStore(self, s: BufferStore, ind: int) -> None:
        name = self.names.buffer(s.buffer)
        value = self.e(s.value)
        if s.predicate is not None:
            idx = ", ".join(self.e.index(i) for i in s.indices)
            self.emit(ind, f"{name}.vstore([{idx}], {value}, predicate={self.e(s.predicate)})")
        else:
            self.emit(ind, f"{name}[{self.e.indices(s.indices)}] = {value}")

    def Evaluate(self, s: Evaluate, ind: int) -> None:
        self.emit(ind, f"T.evaluate({self.e(s.value)})")

    def LetStmt(self, s: LetStmt, ind: int) -> None:
        value = self.e(s.value)
        name = self.names.define(s.var, s.var.name)
        self.emit(ind, f"{name}: {dtype_ann(s.var.dtype)} = {value}")
        self.stmt(s.body, ind)

    def AssertStmt(self, s: AssertStmt, ind: int) -> None:
        self.emit(ind, f"assert {self.e(s.condition)}, {self.e(s.message)}")
        self.stmt(s.body, ind)

    def AttrStmt(self, s: AttrStmt, ind: int) -> None:
        node = self.e(s.node.var) if isinstance(s.node, IterVar) else self.e.value(s.node)
        self.emit(ind, f"with T.attr({node}, {quote(s.attr_key)}, {self.e(s.value)}):")
        self.body(s.body, ind + 1)

    def IfThenElse(self, s: IfThenElse, ind: int) -> None:
        self.emit(ind, f"if {self.e(s.condition)}:")
        self.body(s.then_case, ind + 1)
        if s.else_case is not None:
            self.emit(ind, "else:")
            self.body(s.else_case, ind + 1)

    def While(self, s: While, ind: int) -> None:
        self.emit(ind, f"while {self.e(s.condition)}:")
        self.body(s.body, ind + 1)

    def Allocate(self, s: Allocate, ind: int) -> None:
        extents = ", ".join(self.e(x) for x in s.extents)
        args = [f"[{extents}]", quote(s.dtype)]
        if not _is_const(s.condition, 1):
            args.append(f"condition={self.e(s.condition)}")
        if s.annotations:
            args.append(f"annotations={self.e.value(dict(s.annotations))}")
        name = self.names.define(s.buffer_var, s.buffer_var.name)
        self.emit(ind, f"{name} = T.allocate({', '.join(args)})")
        self.stmt(s.body, ind)

    def DeclBuffer(self, s: DeclBuffer, ind: int) -> None:
        buf = s.buffer
        data = f", data={self.names.var(buf.data)}" if self.names.has(buf.data) else ""
        args = self.buffer_args(buf, True)
        name = self.define_buffer(buf)
        self.emit(ind, f"{name} = T.decl_buffer({args}{data})")
        self.stmt(s.body, ind)

    def For(self, s: For, ind: int) -> None:
        chain = [s]
        if _plain_loop(s):
            while isinstance(chain[-1].body, For) and _plain_loop(chain[-1].body):
                inner = chain[-1].body
                if _uses_any(inner, chain):
                    break
                chain.append(inner)
        if len(chain) > 1:
            extents = ", ".join(self.e(f.extent) for f in chain)
            names = ", ".join(self.names.define(f.loop_var, f.loop_var.name) for f in chain)
            self.emit(ind, f"for {names} in T.grid({extents}):")
        else:
            self.emit(ind, f"for {self._loop_var(s)} in {self._loop_range(s)}:")
        for f in chain:
            self._loops[id(f.loop_var)] = f
        self.body(chain[-1].body, ind + 1)
        for f in chain:
            self._loops.pop(id(f.loop_var), None)

    def _loop_var(self, s: For) -> str:
        return self.names.define(s.loop_var, s.loop_var.name)

    def _loop_range(self, s: For) -> str:
        start = None if _is_const(s.min, 0) else self.e(s.min)
        stop = self.e(s.extent) if start is None else self.e(s.min + s.extent)
        kwargs = []
        if s.thread_binding is not None:
            tag = getattr(s.thread_binding, "thread_tag", None) or str(s.thread_binding)
            kwargs.append(f"thread={quote(tag)}")
        if s.annotations:
            kwargs.append(f"annotations={self.e.value(dict(s.annotations))}")
        if s.kind == ForKind.SERIAL and not kwargs:
            return f"range({stop})" if start is None else f"range({start}, {stop})"
        if kwargs or start is not None:
            args = [start if start is not None else self.e(s.min), stop]
        else:
            args = [stop]
        return f"T.{s.kind}({', '.join(args + kwargs)})"

    def Block(self, b: Block, ind: int) -> None:
        self.emit(ind, f"with T.block({quote(b.name_hint)}, no_realize=True):")
        self._block_inside(b, None, ind + 1)

    def BlockRealize(self, r: BlockRealize, ind: int) -> None:
        self.emit(ind, f"with T.block({quote(r.block.name_hint)}):")
        self._block_inside(r.block, r, ind + 1)

    def _block_inside(self, b: Block, r: BlockRealize | None, ind: int) -> None:
        self._block_axes(b, r, ind)
        if r is not None and not _is_const(r.predicate, 1):
            self.emit(ind, f"T.where({self.e(r.predicate)})")
        self.emit(ind, f"T.reads({', '.join(self.region(x) for x in b.reads)})")
        self.emit(ind, f"T.writes({', '.join(self.region(x) for x in b.writes)})")
        if b.annotations:
            self.emit(ind, f"T.block_attr({self.e.value(dict(b.annotations))})")
        self._block_buffers(b, ind)
        if b.init is not None:
            self.emit(ind, "with T.init():")
            self.body(b.init, ind + 1)
        self.body(b.body, ind)

    def _block_axes(self, b: Block, r: BlockRealize | None, ind: int) -> None:
        values = r.iter_values if r is not None else (None,) * len(b.iter_vars)
        if b.iter_vars and r is not None and all(
                self._remappable(iv, v) for iv, v in zip(b.iter_vars, values)):
            loops = ", ".join(self.e(v) for v in values)
            kinds = "".join(_REMAP[iv.iter_type] for iv in b.iter_vars)
            names = ", ".join(self.names.define(iv.var, iv.var.name) for iv in b.iter_vars)
            self.emit(ind, f"{names} = T.axis.remap({quote(kinds)}, [{loops}])")
            return
        for iv, v in zip(b.iter_vars, values):
            dom = (self.e(iv.dom.extent) if _is_const(iv.dom.min, 0)
                   else f"({self.e(iv.dom.min)}, {self.e(iv.dom.min + iv.dom.extent)})")
            args = dom if v is None else f"{dom}, {self.e(v)}"
            kind = _AXIS.get(iv.iter_type, f"kind_{iv.iter_type}")
            name = self.names.define(iv.var, iv.var.name)
            self.emit(ind, f"{name} = T.axis.{kind}({args})")

    def _remappable(self, iv: IterVar, value: PrimExpr) -> bool:
        loop = self._loops.get(id(value)) if isinstance(value, Var) else None
        return (loop is not None and iv.iter_type in _REMAP and _is_const(iv.dom.min, 0)
                and _is_const(loop.min, 0) and _same(loop.extent, iv.dom.extent))

    def _block_buffers(self, b: Block, ind: int) -> None:
        for buf in b.alloc_buffers:
            args = self.buffer_args(buf, False)
            self.emit(ind, f"{self.define_buffer(buf)} = T.alloc_buffer({args})")
        for m in b.match_buffers:
            self._match_buffer(m, ind)

    def _match_buffer(self, m: MatchBufferRegion, ind: int) -> None:
        src = self.region(m.source)
        args = self.buffer_args(m.buffer, True)
        self.emit(ind, f"{self.define_buffer(m.buffer)} = T.match_buffer({src}, {args})")


def _plain_loop(f: For) -> bool:
    """A loop ``T.grid`` can express: serial from 0, no annotations, no thread binding."""
    return (f.kind == ForKind.SERIAL and _is_const(f.min, 0) and not f.annotations
            and f.thread_binding is None)


def _uses_any(inner: For, outer: list[For]) -> bool:
    """Does ``inner``'s extent depend on an outer loop var (then it cannot join the grid)?"""
    from workbench.tir.functor import collect_vars
    used = collect_vars(inner.extent)
    return any(f.loop_var in used for f in outer)


_STMT_TYPES = (SeqStmt, BufferStore, Evaluate, LetStmt, AssertStmt, AttrStmt, IfThenElse, While,
               Allocate, DeclBuffer, For, Block, BlockRealize)
_HANDLERS: TypeTable[Callable[[StmtPrinter, Any, int], None]] = TypeTable({
    cls: getattr(StmtPrinter, cls.__name__) for cls in _STMT_TYPES})
_handler = _HANDLERS.lookup  # node type -> handler, along the MRO, cached


# ---- functions --------------------------------------------------------------------------------

def _implicit_root(body: Stmt) -> Block | None:
    """The root block of a block-form function when TVMScript would leave it implicit."""
    if not isinstance(body, BlockRealize):
        return None
    b = body.block
    if (body.iter_values or not _is_const(body.predicate, 1) or b.name_hint != "root"
            or b.iter_vars or b.reads or b.writes or b.init is not None or b.match_buffers
            or b.annotations):
        return None
    return b


def script_func(func: PrimFunc, name: str = "main") -> str:
    """``@T.prim_func def <name>(...):`` with the whole body; deterministic for equal input."""
    p = StmtPrinter()
    names = p.names
    # Visible names first (buffers and scalar params, in parameter order), then the hidden
    # handle vars, so a handle never takes the name its buffer should have.
    for v in func.params:
        buf = func.buffer_map.get(v)
        if buf is not None:
            p.define_buffer(buf)
        else:
            names.define(v, v.name)
    for v in func.params:
        if v in func.buffer_map and not names.has(v):
            names.define(v, v.name)
    sig = []
    for v in func.params:
        buf = func.buffer_map.get(v)
        if buf is not None:
            sig.append(f"{names.buffer(buf)}: T.Buffer({p.buffer_args(buf, True)})")
        else:
            # A size var keeps its kind in the annotation (it reads back as a SizeVar).
            size = "(is_size_var=True)" if isinstance(v, SizeVar) else ""
            sig.append(f"{names.var(v)}: {dtype_ann(v.dtype)}{size}")
    ret = "" if func.ret_type == "void" else f" -> {dtype_ann(func.ret_type)}"

    root = _implicit_root(func.body)
    if root is not None:
        p.emit(1, '# with T.block("root"):')
        p._block_buffers(root, 1)
        p.body(root.body, 1)
    else:
        p.body(func.body, 1)

    # A function without a global symbol is private (TVMScript's spelling), so it reads back so.
    deco = "@T.prim_func" if "global_symbol" in func.attrs else "@T.prim_func(private=True)"
    head = [(0, deco), (0, f"def {name}({', '.join(sig)}){ret}:")]
    attrs = {k: v for k, v in func.attrs.items() if not (k == "global_symbol" and v == name)}
    if attrs:
        head.append((1, f"T.func_attr({p.e.value(attrs)})"))
    return p.render(head + p.declarations(1) + p.lines)


def script_stmt(s: Any) -> str:
    """A statement (or expression) on its own, with declarations for what it uses freely."""
    p = StmtPrinter()
    if isinstance(s, PrimExpr):
        text = p.e(s)
        return p.render(p.declarations(0) + [(0, text)])
    p.body(s, 0)
    return p.render(p.declarations(0) + p.lines)
