"""``verify_prim_func``: check a PrimFunc is well formed before it is compiled.

It finds variables used outside their definition, operands whose dtypes disagree, loads and
stores of buffers nothing declared, malformed blocks, and accesses through a view of a parameter
that spans more elements than the caller's array holds (strides or a flat shape larger than the
parameter's compact layout). Errors name the function and the offending node, so a
hand-written or transformed IR fails here rather than in LLVM or, worse, at run time.
"""
from __future__ import annotations

from workbench.ir import dtype as dt
from workbench.tir.buffer import Buffer
from workbench.tir.expr import BinaryOp, BufferLoad, CmpOp, IntImm, Let, PrimExpr, Select, Var
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRVisitor
from workbench.tir.stmt import (
    Allocate, Block, BlockRealize, BufferStore, DeclBuffer, For, LetStmt,
)


class IRVerifyError(ValueError):
    """A PrimFunc is malformed; the message names the function and the node."""


class _Verifier(IRVisitor):
    def __init__(self, func: PrimFunc, name: str) -> None:
        self.name = name
        self.errors: list[str] = []
        self.defined: set[Var] = set(func.params)
        self.buffers: set[Buffer] = set(func.buffer_map.values())
        self.data_vars: set[Var] = {b.data for b in self.buffers}
        for buf in func.buffer_map.values():
            for s in buf.shape:
                if isinstance(s, Var):
                    self.defined.add(s)
        # The caller passes each parameter as a compact array of prod(shape) elements.
        self.param_sizes: dict[Var, tuple[str, int]] = {}
        for buf in func.buffer_map.values():
            size = _const_product(buf.shape)
            if size is not None:
                self.param_sizes[buf.data] = (buf.name, size)
        self.spans_checked: set[Buffer] = set()

    def error(self, what: str) -> None:
        self.errors.append(f"in PrimFunc {self.name!r}: {what}")

    def scoped(self, var: Var, body) -> None:
        added = var not in self.defined
        self.defined.add(var)
        self.visit(body)
        if added:
            self.defined.discard(var)

    # -- definitions ---------------------------------------------------------------------
    def visit_For(self, s: For) -> None:
        self.visit(s.min)
        self.visit(s.extent)
        if not dt.parse(s.loop_var.dtype).is_integer:
            self.error(f"loop variable {s.loop_var.name!r} has non-integer dtype "
                       f"{s.loop_var.dtype}")
        self.scoped(s.loop_var, s.body)

    def visit_LetStmt(self, s: LetStmt) -> None:
        self.visit(s.value)
        self.scoped(s.var, s.body)

    def visit_Let(self, e: Let) -> None:
        self.visit(e.value)
        self.scoped(e.var, e.body)

    def visit_Allocate(self, s: Allocate) -> None:
        for e in s.extents:
            self.visit(e)
        self.data_vars.add(s.buffer_var)
        self.visit(s.body)

    def visit_DeclBuffer(self, s: DeclBuffer) -> None:
        self.buffers.add(s.buffer)
        self.visit(s.body)

    def visit_BlockRealize(self, s: BlockRealize) -> None:
        blk = s.block
        if len(s.iter_values) != len(blk.iter_vars):
            self.error(f"block {blk.name_hint!r} binds {len(s.iter_values)} value(s) to "
                       f"{len(blk.iter_vars)} iteration variable(s)")
        for v in s.iter_values:
            self.visit(v)
        self.visit(s.predicate)
        self.visit(blk)

    def visit_Block(self, blk: Block) -> None:
        self.buffers.update(blk.alloc_buffers)
        for mb in blk.match_buffers:
            # A match buffer is declared by the block; its symbolic shape, strides and offset
            # are bound to the source region (tensorize), so they count as defined inside.
            self.buffers.add(mb.buffer)
            for e in mb.buffer.shape + mb.buffer.strides + (mb.buffer.elem_offset,):
                if isinstance(e, Var):
                    self.defined.add(e)
            if mb.source.buffer not in self.buffers:
                self.error(f"block {blk.name_hint!r} matches a region of buffer "
                           f"{mb.source.buffer.name!r}, which is not declared")
        for iv in blk.iter_vars:
            self.defined.add(iv.var)
        for region in blk.reads + blk.writes:
            if region.buffer not in self.buffers:
                self.error(f"block {blk.name_hint!r} declares an access to buffer "
                           f"{region.buffer.name!r}, which is not declared")
            for r in region.region:
                self.visit(r.min)
                self.visit(r.extent)
        if blk.init is not None:
            self.visit(blk.init)
        self.visit(blk.body)

    # -- uses ----------------------------------------------------------------------------
    def visit_Var(self, v: Var) -> None:
        if v not in self.defined and v not in self.data_vars:
            self.error(f"variable {v.name!r} is used but not defined")

    def visit_BinaryOp(self, e: BinaryOp) -> None:
        self.visit(e.a)
        self.visit(e.b)
        if e.a.dtype != e.b.dtype:
            self.error(f"operands of {type(e).__name__} have dtypes {e.a.dtype} and "
                       f"{e.b.dtype}: {e!r}")
        elif not isinstance(e, CmpOp) and e.dtype != e.a.dtype and \
                not dt.parse(e.dtype).is_bool:
            self.error(f"{type(e).__name__} of {e.a.dtype} operands claims dtype {e.dtype}")

    def visit_Select(self, e: Select) -> None:
        self.generic_visit(e)
        if e.true_value.dtype != e.false_value.dtype:
            self.error(f"Select branches have dtypes {e.true_value.dtype} and "
                       f"{e.false_value.dtype}")

    def _check_access(self, kind: str, buf: Buffer, indices: tuple[PrimExpr, ...]) -> None:
        # A flattened view shares its declared buffer's data pointer, which declares it.
        if buf not in self.buffers and buf.data not in self.data_vars:
            self.error(f"{kind} of buffer {buf.name!r}, which is not declared "
                       "(not a parameter, an alloc_buffer, or a DeclBuffer)")
        if len(indices) != len(buf.shape):
            self.error(f"{kind} of buffer {buf.name!r} with {len(indices)} index(es) for "
                       f"{len(buf.shape)} dimension(s)")
        param = self.param_sizes.get(buf.data)
        if param is not None and buf not in self.spans_checked:
            self.spans_checked.add(buf)
            span = _const_span(buf)
            if span is not None and span > param[1]:
                self.error(f"{kind} of buffer {buf.name!r}, a view of parameter {param[0]!r}, "
                           f"spans {span} elements but the caller's array has {param[1]}: a "
                           "parameter's layout is the caller's (compact), so padded strides "
                           "or a larger shape would read or write past its end")
        for i in indices:
            if not isinstance(i, PrimExpr):
                self.error(f"{kind} of buffer {buf.name!r} with index {i!r}, which is not an "
                           "expression (use tir.const)")
                continue
            if not dt.parse(i.dtype).is_integer:
                self.error(f"{kind} of buffer {buf.name!r} with a non-integer index {i!r}")
            self.visit(i)

    def visit_BufferLoad(self, e: BufferLoad) -> None:
        self._check_access("load", e.buffer, e.indices)

    def visit_BufferStore(self, s: BufferStore) -> None:
        self._check_access("store", s.buffer, s.indices)
        self.visit(s.value)
        if dt.element_of(s.value.dtype) != dt.element_of(s.buffer.dtype):
            self.error(f"store of a {s.value.dtype} value into {s.buffer.dtype} buffer "
                       f"{s.buffer.name!r}")


def _const_product(shape: tuple[PrimExpr, ...]) -> int | None:
    size = 1
    for extent in shape:
        if not isinstance(extent, IntImm):
            return None
        size *= extent.value
    return size


def _const_span(buf: Buffer) -> int | None:
    """How many elements from ``data`` an access of ``buf`` may reach, if constant."""
    if not buf.strides:
        span = _const_product(buf.shape)
    elif all(isinstance(x, IntImm) for x in (*buf.shape, *buf.strides)):
        span = 1 + sum((n.value - 1) * s.value for n, s in zip(buf.shape, buf.strides))
        if any(n.value == 0 for n in buf.shape):
            span = 0
    else:
        span = None
    if span is None or buf.elem_offset is None:
        return span
    return span + buf.elem_offset.value if isinstance(buf.elem_offset, IntImm) else None


def verify_prim_func(func: PrimFunc, name: str | None = None) -> PrimFunc:
    """Return ``func`` unchanged, or raise :class:`IRVerifyError` listing every problem found."""
    name = name or func.attrs.get("global_symbol", "main")
    v = _Verifier(func, name)
    v.visit(func.body)
    if v.errors:
        shown = v.errors[:20]
        more = f"\n... and {len(v.errors) - 20} more" if len(v.errors) > 20 else ""
        raise IRVerifyError("malformed TIR:\n  " + "\n  ".join(shown) + more)
    return func
