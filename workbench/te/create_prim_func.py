"""``create_prim_func``: te tensors -> a block-form PrimFunc (docs/internals.md, "Block form").

One loop nest per compute stage, in producer-before-consumer order, under a root block that
allocates every intermediate tensor. Loops run over the spatial axes then the reduce axes and
are named after the compute's axes; each stage's block binds fresh iteration variables named
``v_<axis>`` to the loop variables.

Reductions: the block's ``init`` stores the reducer's identity (or the ``init=`` values), and the
body applies the combiner to the old value and the new source::

    C[v_i, v_j] = C[v_i, v_j] + A[v_i, v_k] * B[v_k, v_j]

A ``where=`` condition guards the *source*: ``C[v] = C[v] + if_then_else(cond, src, identity)``.
``if_then_else`` evaluates only the taken branch, so a condition that keeps a load in bounds
still protects it, and the body keeps the ``combiner(old, rhs)`` shape that reduction-aware
schedule primitives match; ``combine(old, identity) == old`` makes it equal to skipping.

Multi-value reducers (argmax) write all their buffers in one block: each combined value is
bound to a temporary first (``LetStmt v_<buffer> = ...``), then stored, so every combination
reads the old values.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from workbench.ir import dtype as dt
from workbench.ir.node import FrozenDict, frozen
from workbench.tir import op
from workbench.tir.buffer import Buffer, Range, decl_buffer
from workbench.tir.expr import (
    Add, BinaryOp, BufferLoad, Cast, CmpOp, Div, FloorDiv, FloorMod, IntImm, Max, Min, Mod, Mul,
    PrimExpr, Reduce, Select, Sub, Var,
)
from workbench.tir.function import PrimFunc, prim_func
from workbench.tir.functor import IRMutator, IRVisitor, collect_vars
from workbench.tir.stmt import (
    Block, BlockRealize, BufferStore, For, ForKind, IterType, IterVar, LetStmt, Stmt, seq,
)
from workbench.tir.analysis.regions import block_regions
from workbench.te.tensor import ComputeOp, Operation, PlaceholderOp, Tensor, tensor_of_buffer

# Block annotations TVM drops when making TensorIR (they only matter to the old te schedules).
_DROPPED_ATTRS = ("const_matrix", "auto_scheduler_simplify_const_tensor_indices", "workload")
_LAYOUT_FREE = "layout_free_placeholders"


def create_prim_func(tensors: Sequence[Tensor | Var] | Tensor,
                     index_dtype_override: str | None = None) -> PrimFunc:
    """The PrimFunc computing ``tensors``; its parameters are ``tensors`` in the given order.

    Every placeholder the outputs depend on must be listed; compute tensors not listed become
    intermediate buffers allocated by the root block. Vars in the list become scalar params.
    ``index_dtype_override`` (e.g. ``"int64"``) retypes loop/block variables, buffer shapes and
    indices (and the shape variables used in them) to that integer dtype.
    """
    args = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    _check_args(args)
    if index_dtype_override is not None:
        index_dtype_override = dt.normalize(index_dtype_override)
        if not dt.parse(index_dtype_override).is_int:
            raise TypeError("create_prim_func: index_dtype_override must be a signed integer "
                            f"dtype such as 'int64', got {index_dtype_override!r}")
    arg_tensors = [a for a in args if isinstance(a, Tensor)]
    order = _post_dfs([t.op for t in arg_tensors])
    _check_placeholders(order, arg_tensors)

    ctx = _Context(args, index_dtype_override)
    stages = [_lower_compute(o, ctx) for o in order if isinstance(o, ComputeOp)]
    root = Block((), (), (), "root", seq(*stages), None, tuple(ctx.root_alloc))
    body = BlockRealize((), op.const(True), root)
    params = [ctx.buffer(a) if isinstance(a, Tensor) else ctx.shape_var(a) for a in args]
    _check_free_vars(body, params)
    func = prim_func(params, body)
    if ctx.layout_free:
        func = func.with_attr("layout_free_buffers", tuple(sorted(ctx.layout_free)))
    return func


# ---- argument checks and stage order --------------------------------------------------------

def _check_args(args: list) -> None:
    if not args:
        raise ValueError("create_prim_func: give the tensors (inputs and outputs) of the function")
    seen: set[int] = set()
    for k, a in enumerate(args):
        if not isinstance(a, (Tensor, Var)):
            raise TypeError(f"create_prim_func: argument {k} must be a te Tensor or a Var, got "
                            f"{a!r} ({type(a).__name__})")
        if id(a) in seen:
            raise ValueError(f"create_prim_func: argument {k} ({a.name!r}) is listed twice")
        seen.add(id(a))


def _post_dfs(roots: list[Operation]) -> list[Operation]:
    """Operations in producer-before-consumer order (post-order DFS from the outputs)."""
    order: list[Operation] = []
    seen: set[int] = set()
    for root in roots:
        stack: list[tuple[Operation, int]] = [(root, 0)]
        while stack:
            o, k = stack.pop()
            if k == 0:
                if id(o) in seen:
                    continue
                seen.add(id(o))
            inputs = o.input_tensors
            if k < len(inputs):
                stack.append((o, k + 1))
                if id(inputs[k].op) not in seen:
                    stack.append((inputs[k].op, 0))
            else:
                order.append(o)
    return order


def _check_placeholders(order: list[Operation], arg_tensors: list[Tensor]) -> None:
    listed = {id(t) for t in arg_tensors}
    missing = [o.outputs[0].name for o in order
               if isinstance(o, PlaceholderOp) and id(o.outputs[0]) not in listed]
    if missing:
        raise ValueError(
            f"create_prim_func: placeholder(s) {', '.join(repr(m) for m in missing)} are used "
            "by the computation but not listed as arguments; pass every input tensor, e.g. "
            "create_prim_func([A, B, C])")


class _FreeVars(IRVisitor):
    """Variables used but not defined by a loop, a block or a let, with where they are used."""

    def __init__(self) -> None:
        self.defined: set[Var] = set()
        self.free: dict[Var, str] = {}
        self.where = "root"

    def visit_Var(self, v: Var) -> None:
        if v not in self.defined:
            self.free.setdefault(v, self.where)

    def visit_For(self, s: For) -> None:
        self.defined.add(s.loop_var)
        self.generic_visit(s)

    def visit_LetStmt(self, s: LetStmt) -> None:
        self.defined.add(s.var)
        self.generic_visit(s)

    def visit_Block(self, b: Block) -> None:
        self.defined.update(iv.var for iv in b.iter_vars)
        self.where = f"block {b.name_hint!r}"
        for buf in b.alloc_buffers:
            self.visit_field(buf.shape)
        self.generic_visit(b)


def _check_free_vars(body: Stmt, params: list) -> None:
    """Every symbolic variable must be a scalar parameter or appear in a parameter's shape."""
    allowed: set[Var] = set()
    for p in params:
        if isinstance(p, Buffer):
            for s in p.shape:
                allowed |= collect_vars(s)
        else:
            allowed.add(p)
    v = _FreeVars()
    v.visit(body)
    bad = {var: where for var, where in v.free.items() if var not in allowed}
    if bad:
        desc = ", ".join(f"{var.name!r} (in {where})" for var, where in bad.items())
        raise ValueError(
            f"create_prim_func: variable(s) {desc} are neither axes of their compute nor "
            "parameters: pass scalar variables in the argument list, make sure every "
            "reduce_axis used in a reduction is in its axis=, and that symbolic shapes appear "
            "in some argument's shape")


# ---- context: buffers, shape variables, names ----------------------------------------------

class _Context:
    def __init__(self, args: list[Tensor | Var], index_dtype: str | None):
        self.args = args  # parameter order, for layout_free_buffers indices
        self.arg_ids = {id(a) for a in args if isinstance(a, Tensor)}
        self.index_dtype = index_dtype
        self.root_alloc: list[Buffer] = []
        self.layout_free: set[int] = set()
        self._buffers: dict[int, Buffer] = {}
        self._shape_vars: dict[Var, Var] = {}
        self._names: dict[str, int] = {}

    def fresh_name(self, base: str) -> str:
        n = self._names.get(base, 0)
        self._names[base] = n + 1
        return base if n == 0 else f"{base}_{n}"

    def shape_var(self, v: Var) -> Var:
        """``v``, or its copy in the index dtype when overriding index dtypes."""
        t = self.index_dtype
        if t is None or v.dtype == t or not dt.parse(v.dtype).is_integer:
            return v
        got = self._shape_vars.get(v)
        if got is None:
            got = self._shape_vars[v] = type(v)(v.name, t)
        return got

    def buffer(self, tensor: Tensor) -> Buffer:
        got = self._buffers.get(id(tensor))
        if got is None:
            got = tensor.buffer
            if self.index_dtype is not None:
                shape = tuple(self.index(s, {}) for s in got.shape)
                got = decl_buffer(shape, got.dtype, got.name)
            self._buffers[id(tensor)] = got
        return got

    def rewrite(self, e: PrimExpr, vmap: dict[Var, Var]) -> PrimExpr:
        return _Rewriter(self, vmap).visit(e)

    def index(self, e: PrimExpr, vmap: dict[Var, Var]) -> PrimExpr:
        e = self.rewrite(e, vmap)
        return e if self.index_dtype is None else retype_index(e, self.index_dtype)


class _Rewriter(IRMutator):
    """te axis vars -> block vars, te tensor buffers -> the function's buffers."""

    def __init__(self, ctx: _Context, vmap: dict[Var, Var]):
        super().__init__()
        self.ctx, self.vmap = ctx, vmap

    def visit_Var(self, v: Var) -> PrimExpr:
        nv = self.vmap.get(v)
        if nv is None:
            nv = self.ctx.shape_var(v)
        return nv if nv.dtype == v.dtype else op.cast(v.dtype, nv)

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        t = tensor_of_buffer(load.buffer)
        buf = self.ctx.buffer(t) if t is not None else load.buffer
        idx = tuple(self.ctx.index(i, self.vmap) for i in load.indices)
        return BufferLoad(buf, idx, load.dtype)

    def visit_Reduce(self, r: Reduce) -> PrimExpr:
        raise ValueError("create_prim_func: a reduction must be the whole body of its compute")


_REBUILD: dict[type, Callable[[PrimExpr, PrimExpr], PrimExpr]] = {
    Add: op.add, Sub: op.sub, Mul: op.mul, FloorDiv: op.floordiv, FloorMod: op.floormod,
    Div: op.truncdiv, Mod: op.truncmod, Min: op.min, Max: op.max,
}


def retype_index(e: PrimExpr, dtype: str) -> PrimExpr:
    """An integer index expression recomputed in ``dtype`` (e.g. int32 arithmetic -> int64).

    Casts to narrower index types that the rewriter put around wide variables are dropped;
    anything else integer-valued (loads, calls) is cast.
    """
    if e.dtype == dtype:
        return e
    if not dt.parse(e.dtype).is_integer:
        return e
    if isinstance(e, IntImm):
        return op.const(e.value, dtype)
    if isinstance(e, Cast) and dt.parse(e.value.dtype).is_integer:
        return retype_index(e.value, dtype)
    if isinstance(e, BinaryOp) and not isinstance(e, CmpOp) and type(e) in _REBUILD:
        return _REBUILD[type(e)](retype_index(e.a, dtype), retype_index(e.b, dtype))
    if isinstance(e, Select):
        return op.select(e.condition, retype_index(e.true_value, dtype),
                         retype_index(e.false_value, dtype))
    return op.cast(dtype, e)


# ---- one compute stage ----------------------------------------------------------------------

def _lower_compute(cop: ComputeOp, ctx: _Context) -> Stmt:
    axes = tuple(cop.axis) + tuple(cop.reduce_axis)
    _check_axis_domains(cop, axes)
    loop_vars, iter_vars, vmap = [], [], {}
    for iv in axes:
        t = ctx.index_dtype or iv.var.dtype
        lo, ext = ctx.index(iv.dom.min, {}), ctx.index(iv.dom.extent, {})
        lv, bv = Var(iv.var.name, t), Var("v_" + iv.var.name, t)
        loop_vars.append((lv, lo, ext))
        iter_vars.append(IterVar(Range(lo, ext), bv, iv.iter_type))
        vmap[iv.var] = bv
    bindings: list[PrimExpr] = [lv for lv, _, _ in loop_vars]
    if not iter_vars:  # a 0-d result still needs one block instance
        iter_vars.append(IterVar(Range(op.const(0), op.const(1)), Var("vi"), IterType.DATA_PAR))
        bindings.append(op.const(0))
    spatial = [vmap[iv.var] for iv in cop.axis]
    buffers = [ctx.buffer(t) for t in cop.outputs]
    for t, b in zip(cop.outputs, buffers):
        if id(t) not in ctx.arg_ids:
            ctx.root_alloc.append(b)
    annotations = _annotations(cop, ctx)

    def block(name: str, body: Stmt, init: Stmt | None, ivs: list[IterVar]) -> BlockRealize:
        reads, writes = block_regions(body, init, ivs)
        blk = Block(tuple(ivs), reads, writes, ctx.fresh_name(name), body, init,
                    annotations=annotations)
        return BlockRealize(tuple(bindings), op.const(True), blk)

    if isinstance(cop.body[0], Reduce):
        body, init = _reduction_body(cop.body[0], buffers, spatial, vmap, ctx)
        stmts = [block(cop.name, body, init, iter_vars)]
    else:
        stmts = []
        for k, (expr, buf) in enumerate(zip(cop.body, buffers)):
            ivs = iter_vars
            if k > 0:  # each block defines its own iteration variables
                ivs = [iv.replace(var=Var(iv.var.name, iv.var.dtype)) for iv in iter_vars]
                vmap = {a.var: iv.var for a, iv in zip(axes, ivs)}
                spatial = [vmap[a.var] for a in cop.axis]
            store = BufferStore(buf, ctx.rewrite(expr, vmap), tuple(spatial))
            stmts.append(block(cop.name if len(buffers) == 1 else buf.name, store, None, ivs))
    nest = seq(*stmts)
    for lv, lo, ext in reversed(loop_vars):
        nest = For(lv, lo, ext, ForKind.SERIAL, nest)
    return nest


def _check_axis_domains(cop: ComputeOp, axes: Sequence[IterVar]) -> None:
    axis_vars = {iv.var for iv in axes}
    for iv in axes:
        used = collect_vars(iv.dom.min) | collect_vars(iv.dom.extent)
        if used & axis_vars:
            raise NotImplementedError(
                f"compute {cop.name!r}: the domain of axis {iv.var.name!r} depends on another "
                "axis; axis domains may only use constants and shape variables")


def _reduction_body(r: Reduce, buffers: list[Buffer], spatial: list[Var],
                    vmap: dict[Var, Var], ctx: _Context) -> tuple[Stmt, Stmt]:
    idx = tuple(spatial)
    comb = r.combiner
    old = [BufferLoad(b, idx, b.dtype) for b in buffers]
    src = [ctx.rewrite(s, vmap) for s in r.source]
    cond = ctx.rewrite(r.condition, vmap)
    if not (isinstance(cond, IntImm) and cond.value):
        src = [op.if_then_else(cond, s, ident) for s, ident in zip(src, comb.identity_element)]
    new = comb.combine(old, src)
    first = [ctx.rewrite(v, vmap) for v in r.init] if r.init else list(comb.identity_element)
    init = seq(*(BufferStore(b, v, idx) for b, v in zip(buffers, first)))
    if len(buffers) == 1:
        return BufferStore(buffers[0], new[0], idx), init
    temps = [Var("v_" + b.name, b.dtype) for b in buffers]
    body: Stmt = seq(*(BufferStore(b, t, idx) for b, t in zip(buffers, temps)))
    for t, v in reversed(list(zip(temps, new))):
        body = LetStmt(t, v, body)
    return body, init


def _annotations(cop: ComputeOp, ctx: _Context) -> FrozenDict:
    """Compute attrs as block annotations: tensors become buffers; layout-free inputs that are
    parameters move to the function attr ``layout_free_buffers`` (by parameter index)."""
    out: dict[str, Any] = {}
    for key, value in cop.attrs.items():
        if key in _DROPPED_ATTRS:
            continue
        if key == _LAYOUT_FREE:
            rest = []
            for t in (value if isinstance(value, (list, tuple)) else [value]):
                if isinstance(t, Tensor) and id(t) in ctx.arg_ids:
                    ctx.layout_free.add(next(i for i, a in enumerate(ctx.args) if a is t))
                else:
                    rest.append(ctx.buffer(t) if isinstance(t, Tensor) else t)
            if rest:
                out[key] = tuple(rest)
            continue
        out[key] = _attr_value(value, ctx)
    return frozen(out)


def _attr_value(value: Any, ctx: _Context) -> Any:
    if isinstance(value, Tensor):
        return ctx.buffer(value)
    if isinstance(value, (list, tuple)):
        return tuple(_attr_value(v, ctx) for v in value)
    return value
