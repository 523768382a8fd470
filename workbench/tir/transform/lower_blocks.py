"""Blocks to plain loops: ``lower_init_block`` then ``lower_opaque_block``.

After these two passes a PrimFunc has no Block/BlockRealize: reduction inits became guarded
stores, block iteration variables were replaced by their bindings, predicates became
``IfThenElse``, and ``alloc_buffers`` became ``Allocate`` + ``DeclBuffer`` at the block's place.
"""
from __future__ import annotations

from workbench.tir import op
from workbench.tir.expr import IntImm
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, substitute
from workbench.tir.stmt import (
    Allocate, Block, BlockRealize, DeclBuffer, IfThenElse, IterType, Stmt, seq,
)


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


class _LowerOpaque(IRMutator):
    def visit_BlockRealize(self, realize: BlockRealize) -> Stmt:
        block = realize.block
        vmap = {iv.var: value for iv, value in zip(block.iter_vars, realize.iter_values)}
        body = self.visit(substitute(block.body, vmap) if vmap else block.body)
        pred = realize.predicate
        if not (isinstance(pred, IntImm) and pred.value):
            body = IfThenElse(substitute(pred, vmap) if vmap else pred, body)
        for buf in reversed(block.alloc_buffers):
            body = Allocate(buf.data, buf.dtype, buf.shape, op.const(True), DeclBuffer(buf, body))
        return body


def lower_opaque_block(func: PrimFunc) -> PrimFunc:
    """Remove blocks: bind iter vars, guard predicates, allocate the blocks' buffers."""
    return func.with_body(_LowerOpaque().visit(func.body))
