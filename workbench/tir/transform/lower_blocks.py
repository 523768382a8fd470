"""Blocks to plain loops: ``lower_init_block`` then ``lower_opaque_block``.

After these two passes a PrimFunc has no Block/BlockRealize: reduction inits became guarded
stores, block iteration variables were replaced by their bindings, predicates became
``IfThenElse``, and ``alloc_buffers`` became ``Allocate`` + ``DeclBuffer`` at the block's place.
With ``keep_match_buffers`` (the lowering pipeline), a block with ``match_buffers`` (a
tensorized block) stays as an *opaque shell*: no iter vars (bound in its regions and body), no
init or allocations, its reads / writes / match buffers kept, so ``CompactBufferAllocation``
sees the regions the views cover and ``LowerMatchBuffer`` -- which removes the shell -- binds
the views' strides to the compacted buffers (TVM's order: compact, then lower match buffers).
A buffer named in a block's ``"buffer_dim_align"`` annotation (``sch.storage_align``) is
allocated with padded strides. The annotation only applies to buffers the function allocates:
a parameter's layout is the caller's (compact row-major, the kernel ABI), so an alignment left
on a block that writes a parameter is ignored, as TVM ignores it.
"""
from __future__ import annotations

from workbench.tir import op
from workbench.tir.buffer import Buffer
from workbench.tir.expr import IntImm, PrimExpr
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, IRVisitor, substitute
from workbench.tir.stmt import (
    Allocate, Block, BlockRealize, DeclBuffer, IfThenElse, IterType, Stmt, seq,
)

DIM_ALIGN_KEY = "buffer_dim_align"


class _LowerInit(IRMutator):
    def visit_Block(self, block: Block) -> Block:
        block = self.generic_visit(block)
        if block.init is None:
            return block
        reduce_vars = [iv for iv in block.iter_vars if iv.iter_type == IterType.COMM_REDUCE]
        # The init runs on the first iteration of every reduction variable.
        cond = op.all(*(op.eq(iv.var, iv.dom.min) for iv in reduce_vars))
        init = block.init if isinstance(cond, IntImm) and cond.value else \
            IfThenElse(cond, block.init)
        return block.replace(init=None, body=seq(init, block.body))


def lower_init_block(func: PrimFunc) -> PrimFunc:
    """Turn each block's ``init`` into ``if (all reduce vars at their min) init`` before the body."""
    return func.with_body(_LowerInit().visit(func.body))


def aligned_strides(shape: tuple[PrimExpr, ...], aligns: dict[int, tuple[int, int]]
                    ) -> tuple[PrimExpr, ...]:
    """Row-major strides where the stride of each axis in ``aligns`` ({axis: (factor,
    offset)}) is padded up to the next value with ``stride % factor == offset`` (TVM's rule)."""
    strides: list[PrimExpr] = []
    stride: PrimExpr = op.const(1, shape[-1].dtype if shape else "int32")
    for axis in range(len(shape) - 1, -1, -1):
        if axis in aligns:
            factor, offset = (op.const(x, stride.dtype) for x in aligns[axis])
            pad = op.floormod(op.sub(op.add(factor, offset), op.floormod(stride, factor)), factor)
            stride = op.add(stride, pad)
        strides.append(stride)
        stride = op.mul(stride, shape[axis])
    return tuple(reversed(strides))


def _collect_dim_aligns(func: PrimFunc) -> dict[Buffer, dict[int, tuple[int, int]]]:
    """{written buffer: {axis: (factor, offset)}} from every block's ``buffer_dim_align``,
    for the buffers the function allocates (never its parameters)."""
    found: dict[Buffer, dict[int, tuple[int, int]]] = {}
    # Padding a parameter's strides made the kernel write past the end of the caller's array
    # (storage_align left on a block that reverse_compute_inline made write the output): a heap
    # overflow that later aborted the process in whatever allocated next, often LLVM.
    params = set(func.buffer_map.values())

    class _V(IRVisitor):
        def visit_Block(self, block: Block) -> None:
            for buffer_index, axis, factor, offset in block.annotations.get(DIM_ALIGN_KEY, ()):
                buf = block.writes[buffer_index].buffer
                if buf not in params:
                    found.setdefault(buf, {})[axis] = (factor, offset)
            self.generic_visit(block)

    _V().visit(func.body)
    return found


class _LowerOpaque(IRMutator):
    def __init__(self, aligns: dict[Buffer, dict[int, tuple[int, int]]],
                 keep_match_buffers: bool = False) -> None:
        super().__init__()
        self.keep_match_buffers = keep_match_buffers
        # An aligned allocation becomes a strided twin of its buffer, used everywhere.
        self.strided = {buf: buf.replace(strides=aligned_strides(buf.shape, a))
                        for buf, a in aligns.items() if not buf.strides}

    def rewrite_buffer(self, buf: Buffer) -> Buffer:
        return self.strided.get(buf) or super().rewrite_buffer(buf)

    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        block = realize.block
        vmap = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
        body = self.visit(substitute(block.body, vmap) if vmap else block.body)
        pred = realize.predicate
        shell = self.keep_match_buffers and bool(block.match_buffers)
        if not shell and not (isinstance(pred, IntImm) and pred.value):
            body = IfThenElse(substitute(pred, vmap) if vmap else pred, body)
        for buf in reversed(block.alloc_buffers):
            buf = self.visit_Buffer(buf)
            body = Allocate(buf.data, buf.dtype, _extents(buf), op.const(True),
                            DeclBuffer(buf, body))
        if shell:
            body = self._shell(block, vmap, body)
            if not (isinstance(pred, IntImm) and pred.value):
                body = IfThenElse(substitute(pred, vmap) if vmap else pred, body)
        return body

    def _shell(self, block: Block, vmap: dict, body: Stmt) -> Stmt:
        """The opaque shell of a block with match buffers around its lowered ``body``."""
        if block.init is not None:
            raise ValueError(f"lower_opaque_block: block {block.name_hint!r} still has an "
                             "init; run lower_init_block first")

        def bound(regions: tuple) -> tuple:
            return self.visit_field(tuple(substitute(r, vmap) for r in regions))
        shell = block.replace(iter_vars=(), reads=bound(block.reads), writes=bound(block.writes),
                              match_buffers=bound(block.match_buffers), body=body,
                              alloc_buffers=())
        return BlockRealize((), op.const(True), shell)

    def visit_Allocate(self, alloc: Allocate) -> Stmt:
        # An allocation already placed by PlanBufferAllocation: its buffer may have become
        # strided (storage_align), and then it needs the padded size.
        alloc = self.generic_visit(alloc)
        decl = alloc.body
        if isinstance(decl, DeclBuffer) and decl.buffer.data is alloc.buffer_var and \
                decl.buffer.strides:
            return alloc.replace(extents=_extents(decl.buffer))
        return alloc


def _extents(buf: Buffer) -> tuple[PrimExpr, ...]:
    """What to allocate for ``buf``: its shape, or the padded span of a strided buffer."""
    return (op.mul(buf.strides[0], buf.shape[0]),) if buf.strides else buf.shape


def lower_opaque_block(func: PrimFunc, keep_match_buffers: bool = False) -> PrimFunc:
    """Remove blocks: bind iter vars, guard predicates, allocate the blocks' buffers. With
    ``keep_match_buffers``, blocks with match buffers stay as opaque shells (module
    docstring)."""
    return func.with_body(_LowerOpaque(_collect_dim_aligns(func), keep_match_buffers)
                          .visit(func.body))
