"""TVMScript -> PrimFunc: the TIR statements and what each ``T.*`` directive builds.

Contract: ``parse_prim_func(fdef, source, env, private)`` reads one ``def`` (an ``ast``
node) and returns the ``PrimFunc`` it describes. Rules that are not plain Python:

- Symbolic vars declared in the body (``n = T.int64()``) are known from the start, so the
  parameter annotations above them (``A: T.Buffer((n, 4))``) can use them, as printed.
- A function whose body has blocks (or function-level ``T.alloc_buffer``) gets TVMScript's
  implicit root block.
- ``x = <PrimExpr>`` / ``x: T.int32 = ...`` bind a let var for the rest of the body; other
  Python values (numbers, strings, buffers) are plain names for the parse (meta-programming).
- A block without ``T.reads``/``T.writes`` gets the regions its body accesses.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Any, Callable

from workbench.ir import dtype as dt
from workbench.ir.node import FrozenDict, frozen
from workbench.ir.structural import structural_equal
from workbench.script import tir as T
from workbench.script.parser.core import Parser, Source
from workbench.script.tir_directives import (
    AllocateSpec, AllocBuffer, AttrScope, Axis, AxisRemap, BlockAttr, BlockScope,
    DeclBufferSpec, FuncAttr, Grid, InitScope, LoopSpec, MatchBuffer, Reads, Sliced, Where,
    Writes,
)
from workbench.tir import op
from workbench.tir.analysis.blocks import blocks_under
from workbench.tir.analysis.regions import block_regions
from workbench.tir.buffer import Buffer, BufferRegion, MatchBufferRegion, Range
from workbench.tir.expr import (
    EQ, GE, GT, LE, LT, NE, Add, And, BufferLoad, Div, FloorDiv, FloorMod, IntImm, Mul, Not,
    Or, PrimExpr, Ramp, SizeVar, StringImm, Sub, Var,
)
from workbench.tir.function import PrimFunc
from workbench.tir.stmt import (
    Allocate, AssertStmt, AttrStmt, Block, BlockRealize, BufferStore, DeclBuffer, Evaluate, For,
    IfThenElse, IterType, IterVar, LetStmt, SeqStmt, Stmt, While, seq,
)

_BINARY: dict[type, type] = {ast.Add: Add, ast.Sub: Sub, ast.Mult: Mul, ast.Div: Div,
                             ast.FloorDiv: FloorDiv, ast.Mod: FloorMod}
_BITWISE: dict[type, Callable[[Any, Any], PrimExpr]] = {
    ast.BitAnd: op.bitwise_and, ast.BitOr: op.bitwise_or, ast.BitXor: op.bitwise_xor,
    ast.LShift: op.shift_left, ast.RShift: op.shift_right}
_COMPARE: dict[type, type] = {ast.Eq: EQ, ast.NotEq: NE, ast.Lt: LT, ast.LtE: LE, ast.Gt: GT,
                              ast.GtE: GE}
_REGION_TAKERS = (T.reads, T.writes, T.match_buffer)


@dataclass
class _BlockFrame:
    """What the statements of one block (or of the function, for the root) have declared."""

    name: str
    iter_vars: list[IterVar] = field(default_factory=list)
    iter_values: list[PrimExpr] = field(default_factory=list)
    reads: tuple | None = None
    writes: tuple | None = None
    predicate: PrimExpr | None = None
    annotations: dict = field(default_factory=dict)
    alloc_buffers: list[Buffer] = field(default_factory=list)
    match_buffers: list[MatchBufferRegion] = field(default_factory=list)
    init: Stmt | None = None


class _Rest:
    """A statement that scopes the rest of its body (LetStmt, Allocate, DeclBuffer, assert)."""

    def __init__(self, build: Callable[[Stmt], Stmt]) -> None:
        self.build = build


def _is_zero(e: Any) -> bool:
    return isinstance(e, IntImm) and e.value == 0


def extent_of(start: PrimExpr, stop: PrimExpr) -> PrimExpr:
    """``stop - start`` as the printer wrote ``stop`` (``start + extent``, constants folded)."""
    if _is_zero(start):
        return stop
    if isinstance(start, IntImm) and isinstance(stop, IntImm):
        return IntImm(stop.dtype, stop.value - start.value)
    if isinstance(stop, Add) and structural_equal(stop.a, start):
        return stop.b
    if isinstance(stop, Add) and structural_equal(stop.b, start):
        return stop.a
    return T.binary(Sub, stop, start)


class TIRParser(Parser):
    """Parses one ``@T.prim_func``; see the module docstring."""

    def __init__(self, source: Source, env: dict[str, Any]) -> None:
        super().__init__(source, env)
        self.frames: list[_BlockFrame] = []
        self.loops: dict[int, tuple[PrimExpr, PrimExpr]] = {}  # id(loop var) -> (min, extent)
        self.buffer_map: dict[Var, Buffer] = {}
        self.func_attrs: dict[str, Any] = {}
        self._done: set[int] = set()  # statements handled ahead of their turn

    # ---- function ----------------------------------------------------------------------------

    def string_dim(self, name: str) -> Var:
        """The function's var called ``name`` (declared, or made now and declared)."""
        for frame in reversed(self.scopes):
            if isinstance(frame.get(name), Var):
                return frame[name]
        var = Var(name, "int32")
        self.scopes[1].setdefault(name, var)
        return self.scopes[1][name]

    def parse_function(self, fdef: ast.FunctionDef, private: bool = False) -> PrimFunc:
        token = T.STRING_DIMS.set(self.string_dim)
        try:
            return self._parse_function(fdef, private)
        finally:
            T.STRING_DIMS.reset(token)

    def _parse_function(self, fdef: ast.FunctionDef, private: bool) -> PrimFunc:
        with self.scope():
            self._declare_ahead(fdef.body)
            params = [self._param(a) for a in fdef.args.args]
            ret_type = "void"
            if fdef.returns is not None:
                ret = self.eval(fdef.returns)
                ret_type = getattr(ret, "dtype", None) or "void"
            root = _BlockFrame("root")
            self.frames.append(root)
            body = self.parse_body(fdef.body)
            self.frames.pop()
        body = self._with_root(body, root)
        bmap = {p: self.buffer_map[p] for p in params if p in self.buffer_map}
        attrs = dict(self.func_attrs)
        if not private:
            attrs.setdefault("global_symbol", fdef.name)
        return PrimFunc(tuple(params), body, FrozenDict(bmap), frozen(attrs), ret_type)

    def _declare_ahead(self, body: list[ast.stmt]) -> None:
        """Define ``n = T.int64()`` style declarations before the signature that uses them."""
        for node in body:
            if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
                continue
            calls = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            if all(isinstance(c, ast.Call) and not c.args and _is_scalar_type(self, c.func)
                   for c in calls):
                self.statement(node)
                self._done.add(id(node))

    def _param(self, arg: ast.arg) -> Var:
        if arg.annotation is None:
            raise self.error(arg, f"parameter {arg.arg!r} needs a type annotation "
                                  "(T.Buffer(...), T.handle, T.int32, ...)")
        ann = self.eval(arg.annotation)
        if isinstance(ann, Buffer):
            handle = Var(arg.arg + "_handle", "handle")  # as tir.prim_func names it
            buf = _renamed(ann, arg.arg)
            self.buffer_map[handle] = buf
            self.define(arg.arg, buf)
            return handle
        if isinstance(ann, T._ScalarType) or (isinstance(ann, Var) and ann.name == ""):
            # ``n: T.int64`` is a Var; ``n: T.int64(is_size_var=True)`` a SizeVar.
            v = (type(ann) if isinstance(ann, Var) else Var)(arg.arg, ann.dtype)
            self.define(arg.arg, v)
            return v
        raise self.error(arg, f"parameter {arg.arg!r}: unsupported annotation "
                              f"{ast.unparse(arg.annotation)} (expected T.Buffer(...) or a "
                              "scalar type such as T.int32 or T.handle)")

    def _with_root(self, body: Stmt, root: _BlockFrame) -> Stmt:
        explicit = isinstance(body, BlockRealize) and not body.iter_values and \
            body.block.name_hint == "root" and not root.alloc_buffers
        if explicit or not (root.alloc_buffers or root.match_buffers or blocks_under(body)):
            return body
        block = Block((), (), (), "root", body, None, tuple(root.alloc_buffers),
                      tuple(root.match_buffers))
        return BlockRealize((), IntImm("bool", 1), block)

    # ---- statements --------------------------------------------------------------------------

    def parse_body(self, stmts: list[ast.stmt]) -> Stmt:
        out: list[Stmt] = []
        for k, node in enumerate(stmts):
            if id(node) in self._done:
                continue
            got = self.statement(node)
            if isinstance(got, _Rest):
                out.append(got.build(self.parse_body(stmts[k + 1:])))
                break
            if got is not None:
                out.append(got)
        return seq(*out) if out else SeqStmt(())

    def statement(self, node: ast.stmt) -> Any:
        handler = _STMT.get(type(node))
        if handler is None:
            raise self.error(node, f"unsupported statement in a TIR function: "
                                   f"{type(node).__name__} ({ast.unparse(node).splitlines()[0]})")
        with self.located(node):
            return handler(self, node)

    def _assign(self, node: ast.Assign) -> Any:
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment (a = b = ...) is not supported")
        target = node.targets[0]
        if isinstance(target, ast.Subscript):
            return self._store(target, self.eval(node.value))
        return self.bind(target, self.eval(node.value), node)

    def _ann_assign(self, node: ast.AnnAssign) -> Any:
        ann = self.eval(node.annotation)
        if not isinstance(node.target, ast.Name) or not isinstance(ann, T._ScalarType):
            raise self.error(node, "an annotated assignment must be `name: T.<dtype> = value`")
        if node.value is None:
            raise self.error(node, f"{node.target.id}: a let binding needs a value")
        var = Var(node.target.id, ann.dtype)
        value = op.convert(self.eval(node.value), var)
        self.define(var.name, var)
        return _Rest(lambda body: LetStmt(var, value, body))

    def _aug_assign(self, node: ast.AugAssign) -> Any:
        if not isinstance(node.target, ast.Subscript):
            raise self.error(node, "augmented assignment is only supported on buffer elements")
        old = self.eval(node.target)
        return self._store(node.target, self.binop(node.op, old, self.eval(node.value), node))

    def bind(self, target: ast.expr, value: Any, node: ast.AST) -> Any:
        handler = _BIND.get(type(value))
        if handler is not None:
            return handler(self, target, value, node)
        if isinstance(target, ast.Tuple):
            values = list(value)
            if len(values) != len(target.elts):
                raise self.error(node, f"cannot unpack {len(values)} values into "
                                       f"{len(target.elts)} names")
            for t, v in zip(target.elts, values):
                if self.bind(t, v, node) is not None:
                    raise self.error(node, "a let binding cannot be part of a tuple assignment")
            return None
        if not isinstance(target, ast.Name):
            raise self.error(node, f"cannot assign to {ast.unparse(target)}")
        name = target.id
        if isinstance(value, Var) and value.name == "":  # T.int64(): a new symbolic var
            var = (SizeVar if isinstance(value, SizeVar) else Var)(name, value.dtype)
            self.define(name, var)
            return None
        if isinstance(value, Buffer) and value.name == "buffer":  # A_1 = T.Buffer(...)
            value = _renamed(value, name)
        if isinstance(value, PrimExpr):
            var = Var(name, value.dtype)
            self.define(name, var)
            return _Rest(lambda body: LetStmt(var, value, body))
        self.define(name, value)
        return None

    def _store(self, target: ast.Subscript, value: Any) -> Stmt:
        buf = self.eval(target.value)
        if not isinstance(buf, Buffer):
            raise self.error(target, f"{ast.unparse(target.value)} is not a buffer")
        indices = self.indices(buf, self.eval(target.slice), target)
        lanes = max([dt.lanes_of(i.dtype) for i in indices] + [1])
        value = self.as_expr(value)
        if not isinstance(value, PrimExpr):
            value = op.const(value, dt.with_lanes(buf.dtype, lanes))
        return BufferStore(buf, value, tuple(indices))

    def _expr_stmt(self, node: ast.Expr) -> Any:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # a docstring
        value = self.eval(node.value)
        handler = _DIRECTIVE.get(type(value))
        if handler is not None:
            return handler(self, value, node)
        if isinstance(value, Stmt):
            return value
        if isinstance(value, PrimExpr):
            return Evaluate(value)
        if value is None:
            return None  # a Python call made for its effect
        raise self.error(node, f"this expression makes no statement: {ast.unparse(node)}")

    def _for(self, node: ast.For) -> Stmt:
        if node.orelse:
            raise self.error(node, "for ... else is not supported")
        spec = self._loop_iter(node.iter)
        loops = spec.loops if isinstance(spec, Grid) else (spec,)
        targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        if len(targets) != len(loops) or not all(isinstance(t, ast.Name) for t in targets):
            raise self.error(node, f"{len(targets)} loop variable(s) for {len(loops)} loop(s)")
        made = []
        with self.scope():
            for t, loop in zip(targets, loops):
                if loop.start is None:
                    stop = op.convert(loop.stop)
                    start = IntImm(stop.dtype, 0)
                    extent = stop
                else:
                    start, stop = T._pair(loop.start, loop.stop)
                    extent = extent_of(start, stop)
                v = Var(t.id, start.dtype)
                self.define(t.id, v)
                self.loops[id(v)] = (start, extent)
                made.append((v, start, extent, loop))
            body = self.parse_body(node.body)
        for v, start, extent, loop in reversed(made):
            ann = frozen(loop.annotations or {})
            body = For(v, start, extent, loop.kind, body, loop.thread, ann)
        return body

    def _loop_iter(self, node: ast.expr) -> LoopSpec | Grid:
        if isinstance(node, ast.Call) and self.eval(node.func) is range:
            args = [self.eval(a) for a in node.args]
            if not 1 <= len(args) <= 2 or node.keywords:
                raise self.error(node, "range() in a TIR loop takes (stop) or (start, stop)")
            return LoopSpec(None, args[0]) if len(args) == 1 else LoopSpec(args[0], args[1])
        spec = self.eval(node)
        if not isinstance(spec, (LoopSpec, Grid)):
            raise self.error(node, f"cannot loop over {ast.unparse(node)} (use range, T.grid, "
                                   "T.serial, T.parallel, T.vectorized or T.unroll)")
        return spec

    def _with(self, node: ast.With) -> Any:
        if len(node.items) != 1:
            raise self.error(node, "one context per `with` in TIR")
        item = node.items[0]
        scope = self.eval(item.context_expr)
        handler = _WITH.get(type(scope))
        if handler is None:
            raise self.error(node, f"unsupported `with` in TIR: {ast.unparse(item.context_expr)}")
        return handler(self, scope, node)

    def _block(self, scope: BlockScope, node: ast.With) -> Stmt:
        frame = _BlockFrame(scope.name)
        self.frames.append(frame)
        try:
            with self.scope():
                body = self.parse_body(node.body)
        finally:
            self.frames.pop()
        reads, writes = frame.reads, frame.writes
        if reads is None or writes is None:
            auto_r, auto_w = block_regions(body, frame.init, frame.iter_vars)
            reads = auto_r if reads is None else reads
            writes = auto_w if writes is None else writes
        block = Block(tuple(frame.iter_vars), tuple(reads), tuple(writes), scope.name, body,
                      frame.init, tuple(frame.alloc_buffers), tuple(frame.match_buffers),
                      frozen(frame.annotations))
        if scope.no_realize:
            return block
        pred = frame.predicate if frame.predicate is not None else IntImm("bool", 1)
        return BlockRealize(tuple(frame.iter_values), pred, block)

    def _init(self, scope: InitScope, node: ast.With) -> None:
        with self.scope():
            self.frames[-1].init = self.parse_body(node.body)
        return None

    def _attr(self, scope: AttrScope, node: ast.With) -> Stmt:
        with self.scope():
            body = self.parse_body(node.body)
        return AttrStmt(scope.node, scope.key, op.convert(scope.value), body)

    def _if(self, node: ast.If) -> Any:
        cond = self.eval(node.test)
        if not isinstance(cond, PrimExpr):  # a Python condition chooses the code to parse
            chosen = node.body if cond else node.orelse
            return self.parse_body(chosen) if chosen else None
        with self.scope():
            then = self.parse_body(node.body)
        other = None
        if node.orelse:
            with self.scope():
                other = self.parse_body(node.orelse)
        return IfThenElse(cond, then, other)

    def _while(self, node: ast.While) -> Stmt:
        with self.scope():
            return While(op.convert(self.eval(node.test)), self.parse_body(node.body))

    def _assert(self, node: ast.Assert) -> _Rest:
        cond = op.convert(self.eval(node.test))
        msg = self.eval(node.msg) if node.msg is not None else ""
        msg = StringImm(msg) if isinstance(msg, str) else msg
        return _Rest(lambda body: AssertStmt(cond, msg, body))

    # ---- directives --------------------------------------------------------------------------

    def _axis(self, target: ast.expr, a: Axis, node: ast.AST) -> None:
        if not isinstance(target, ast.Name):
            raise self.error(node, "T.axis.* defines one block variable: `v = T.axis...`")
        binding = None if a.binding is None else op.convert(a.binding)
        if isinstance(a.dom, (tuple, list)):
            lo, hi = T._pair(*a.dom)
            dom = Range(lo, extent_of(lo, hi))
        else:
            ext = op.convert(a.dom, binding) if binding is not None else op.convert(a.dom)
            dom = Range(IntImm(ext.dtype, 0), ext)
        dtype = a.dtype or (binding.dtype if binding is not None else dom.extent.dtype)
        self._add_iter(target.id, IterVar(dom, Var(target.id, dtype), a.kind), binding, node)

    def _remap(self, target: ast.expr, r: AxisRemap, node: ast.AST) -> None:
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        if len(names) != len(r.bindings) or not all(isinstance(n, ast.Name) for n in names):
            raise self.error(node, f"T.axis.remap binds {len(r.bindings)} block var(s) but "
                                   f"{len(names)} name(s) are assigned")
        for n, kind, loop_var in zip(names, r.kinds, r.bindings):
            rng = self.loops.get(id(loop_var)) if isinstance(loop_var, Var) else None
            if rng is None:
                raise self.error(node, f"T.axis.remap: {loop_var!r} is not an enclosing loop var")
            kind_id = IterType.DATA_PAR if kind == "S" else IterType.COMM_REDUCE
            iv = IterVar(Range(*rng), Var(n.id, loop_var.dtype), kind_id)
            self._add_iter(n.id, iv, loop_var, node)

    def _add_iter(self, name: str, iv: IterVar, binding: Any, node: ast.AST) -> None:
        frame = self._block_frame(node, "T.axis")
        frame.iter_vars.append(iv)
        if binding is not None:
            frame.iter_values.append(binding)
        self.define(name, iv.var)

    def _block_frame(self, node: ast.AST, what: str) -> _BlockFrame:
        if len(self.frames) < 2:
            raise self.error(node, f"{what} is only allowed inside `with T.block(...)`")
        return self.frames[-1]

    def _alloc(self, target: ast.expr, a: AllocBuffer, node: ast.AST) -> None:
        buf = _renamed(a.buffer, _target_name(self, target, node))
        self.frames[-1].alloc_buffers.append(buf)
        self.define(buf.name, buf)

    def _match(self, target: ast.expr, m: MatchBuffer, node: ast.AST) -> None:
        buf = _renamed(m.buffer, _target_name(self, target, node))
        if isinstance(m.source, Var) and m.source.dtype == "handle":
            self.buffer_map[m.source] = buf
        else:
            self.frames[-1].match_buffers.append(MatchBufferRegion(buf, self.region(m.source)))
        self.define(buf.name, buf)

    def _decl(self, target: ast.expr, d: DeclBufferSpec, node: ast.AST) -> _Rest:
        buf = _renamed(d.buffer, _target_name(self, target, node))
        if d.data is not None:
            buf = buf.replace(data=d.data)
        self.define(buf.name, buf)
        return _Rest(lambda body: DeclBuffer(buf, body))

    def _allocate(self, target: ast.expr, a: AllocateSpec, node: ast.AST) -> _Rest:
        var = Var(_target_name(self, target, node), "handle")
        self.define(var.name, var)
        extents = tuple(op.convert(e) for e in a.extents)
        cond = op.convert(a.condition)
        return _Rest(lambda body: Allocate(var, a.dtype, extents, cond, body,
                                           frozen(a.annotations)))

    def _reads(self, d: Reads | Writes, node: ast.AST) -> None:
        frame = self._block_frame(node, "T.reads/T.writes")
        regions = tuple(self.region(r) for r in d.regions)
        if isinstance(d, Reads):
            frame.reads = regions
        else:
            frame.writes = regions

    def _where(self, d: Where, node: ast.AST) -> None:
        self._block_frame(node, "T.where").predicate = op.convert(d.predicate)

    def _block_attr(self, d: BlockAttr, node: ast.AST) -> None:
        self._block_frame(node, "T.block_attr").annotations.update(d.annotations)

    def _func_attr(self, d: FuncAttr, node: ast.AST) -> None:
        self.func_attrs.update(d.attrs)

    # ---- expressions -------------------------------------------------------------------------

    def region(self, r: Any) -> BufferRegion:
        """A buffer region from ``A[i, 0:4]``, ``A[i, j]`` or ``A`` (the whole buffer)."""
        if isinstance(r, BufferRegion):
            return r
        if isinstance(r, Buffer):
            return BufferRegion(r, tuple(Range(IntImm(s.dtype, 0), s) for s in r.shape))
        if isinstance(r, BufferLoad):
            return BufferRegion(r.buffer, tuple(Range(i, IntImm(i.dtype, 1)) for i in r.indices))
        if isinstance(r, Sliced):
            ranges = []
            for i, s in zip(r.indices, r.buffer.shape):
                if isinstance(i, slice):
                    stop = s if i.stop is None else i.stop
                    start, stop = T._pair(0 if i.start is None else i.start, stop)
                    ranges.append(Range(start, extent_of(start, stop)))
                else:
                    i = op.convert(i)
                    ranges.append(Range(i, IntImm(i.dtype, 1)))
            return BufferRegion(r.buffer, tuple(ranges))
        raise TypeError(f"expected a buffer region such as A[i, 0:4], got {r!r}")

    def indices(self, buf: Buffer, index: Any, node: ast.AST) -> list[PrimExpr]:
        idx = index if isinstance(index, tuple) else (index,)
        out = []
        for i in idx:
            if isinstance(i, slice):
                if i.step is not None or i.start is None or i.stop is None:
                    raise self.error(node, "a vector index is written start:stop")
                start, stop = T._pair(i.start, i.stop)
                lanes = extent_of(start, stop)
                if not isinstance(lanes, IntImm):
                    raise self.error(node, "a vector index needs a constant length")
                out.append(Ramp(start, IntImm(start.dtype, 1), lanes.value,
                                dt.with_lanes(start.dtype, lanes.value)))
            else:
                out.append(self.as_expr(i) if isinstance(i, PrimExpr) else op.convert(i))
        if len(out) != len(buf.shape):
            raise self.error(node, f"buffer {buf.name!r} has {len(buf.shape)} dimension(s) but "
                                   f"is indexed with {len(out)}")
        return out

    def as_expr(self, v: Any) -> Any:
        """A sliced buffer read used as a value is a vector load."""
        if isinstance(v, Sliced):
            idx = self.indices(v.buffer, v.indices, None)
            return v.buffer.vload(idx)
        if isinstance(v, list) and any(isinstance(x, Sliced) for x in v):
            return [self.as_expr(x) for x in v]  # T.Shuffle([B[0, 0:64]], ...)
        return v

    def subscript(self, value: Any, index: Any, node: ast.Subscript) -> Any:
        if isinstance(value, Buffer):
            idx = index if isinstance(index, tuple) else (index,)
            if any(isinstance(i, slice) for i in idx):
                return Sliced(value, idx)
            return value.vload(self.indices(value, idx, node))
        return super().subscript(value, index, node)

    def eval_call(self, node: ast.Call) -> Any:
        if self._is_let(node):
            return self._let(node)
        return super().eval_call(node)

    def _is_let(self, node: ast.Call) -> bool:
        return isinstance(node.func, ast.Attribute) and node.func.attr == "Let" and \
            self.eval(node.func) is T.Let

    def _let(self, node: ast.Call) -> PrimExpr:
        """``T.Let(body, where={x: value})``: ``x`` is defined for the body only."""
        where = next((k.value for k in node.keywords if k.arg == "where"), None)
        if len(node.args) != 1 or not isinstance(where, ast.Dict) or len(where.keys) != 1 \
                or not isinstance(where.keys[0], ast.Name):
            raise self.error(node, "write a let expression as T.Let(body, where={x: value})")
        value = op.convert(self.eval(where.values[0]))
        var = Var(where.keys[0].id, value.dtype)
        with self.scope():
            self.define(var.name, var)
            body = op.convert(self.eval(node.args[0]))
        return T.Let(body, {var: value})

    def call(self, func: Callable, args: list, kwargs: dict, node: ast.Call) -> Any:
        if func not in _REGION_TAKERS:
            args = [self.as_expr(a) for a in args]
        return super().call(func, args, kwargs, node)

    def binop(self, opr: ast.operator, a: Any, b: Any, node: ast.AST) -> Any:
        a, b = self.as_expr(a), self.as_expr(b)
        if not isinstance(a, PrimExpr) and not isinstance(b, PrimExpr):
            return super().binop(opr, a, b, node)
        cls = _BINARY.get(type(opr))
        if cls is not None:
            return T.binary(cls, a, b)
        fn = _BITWISE.get(type(opr))
        if fn is None:
            raise self.error(node, f"unsupported operator {type(opr).__name__} on TIR values")
        return fn(a, b)

    def unaryop(self, opr: ast.unaryop, a: Any, node: ast.AST) -> Any:
        a = self.as_expr(a)
        if not isinstance(a, PrimExpr):
            return super().unaryop(opr, a, node)
        if isinstance(opr, ast.Not):
            return Not(a, dt.with_lanes("bool", dt.lanes_of(a.dtype)))
        if isinstance(opr, ast.USub):
            return op.neg(a)
        if isinstance(opr, ast.Invert):
            return op.bitwise_not(a)
        return a

    def compare(self, opr: ast.cmpop, a: Any, b: Any, node: ast.AST) -> Any:
        a, b = self.as_expr(a), self.as_expr(b)
        cls = _COMPARE.get(type(opr))
        if cls is None or (not isinstance(a, PrimExpr) and not isinstance(b, PrimExpr)):
            return super().compare(opr, a, b, node)
        a, b = T._pair(a, b)
        return cls(a, b, dt.with_lanes("bool", dt.lanes_of(a.dtype)))

    def boolop(self, opr: ast.boolop, values: list[Any], node: ast.AST) -> Any:
        if not any(isinstance(v, PrimExpr) for v in values):
            return super().boolop(opr, values, node)
        cls = And if isinstance(opr, ast.And) else Or
        result = op.convert(values[0])
        for v in values[1:]:
            v = op.convert(v)
            result = cls(result, v, result.dtype)
        return result


def _is_scalar_type(p: TIRParser, func: ast.expr) -> bool:
    try:
        return isinstance(p.eval(func), T._ScalarType)
    except Exception:  # noqa: BLE001 - only a probe; the real parse reports the error
        return False


def _target_name(p: TIRParser, target: ast.expr, node: ast.AST) -> str:
    if not isinstance(target, ast.Name):
        raise p.error(node, f"expected a single name on the left, got {ast.unparse(target)}")
    return target.id


def _renamed(buf: Buffer, name: str) -> Buffer:
    data = buf.data
    if data.name == "buffer" and data.dtype == "handle":
        data = Var(name, "handle")
    return buf.replace(name=name, data=data)


_STMT: dict[type, Callable[[TIRParser, Any], Any]] = {
    ast.Assign: TIRParser._assign, ast.AnnAssign: TIRParser._ann_assign,
    ast.AugAssign: TIRParser._aug_assign, ast.Expr: TIRParser._expr_stmt,
    ast.For: TIRParser._for, ast.With: TIRParser._with, ast.If: TIRParser._if,
    ast.While: TIRParser._while, ast.Assert: TIRParser._assert,
    ast.Pass: lambda p, n: None,
}
_BIND: dict[type, Callable[[TIRParser, ast.expr, Any, ast.AST], Any]] = {
    Axis: TIRParser._axis, AxisRemap: TIRParser._remap, AllocBuffer: TIRParser._alloc,
    MatchBuffer: TIRParser._match, DeclBufferSpec: TIRParser._decl,
    AllocateSpec: TIRParser._allocate,
}
_DIRECTIVE: dict[type, Callable[[TIRParser, Any, ast.AST], Any]] = {
    Reads: TIRParser._reads, Writes: TIRParser._reads, Where: TIRParser._where,
    BlockAttr: TIRParser._block_attr, FuncAttr: TIRParser._func_attr,
}
_WITH: dict[type, Callable[[TIRParser, Any, ast.With], Any]] = {
    BlockScope: TIRParser._block, InitScope: TIRParser._init, AttrScope: TIRParser._attr,
}


def parse_prim_func(fdef: ast.FunctionDef, source: Source, env: dict[str, Any],
                    private: bool = False) -> PrimFunc:
    """The PrimFunc of one ``def`` node of ``source``; names not defined in it come from
    ``env``."""
    return TIRParser(source, env).parse_function(fdef, private)


__all__ = ["TIRParser", "parse_prim_func", "extent_of"]
