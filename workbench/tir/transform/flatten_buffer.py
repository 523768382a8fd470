"""``flatten_buffer``: multi-dimensional buffer accesses become one-dimensional.

Each buffer gets a flat twin over the same ``data`` variable (shape ``(prod(shape),)``); loads
and stores use the row-major (or strided) linear index. The PrimFunc's ``buffer_map`` keeps the
original buffers, which is what the kernel ABI describes to the runtime.
"""
from __future__ import annotations

from functools import reduce

from workbench.tir import op
from workbench.tir.buffer import Buffer
from workbench.tir.expr import BufferLoad, PrimExpr
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator
from workbench.tir.stmt import Allocate, BufferStore, DeclBuffer, Stmt


def linear_index(buf: Buffer, indices: tuple[PrimExpr, ...]) -> PrimExpr:
    """The element offset of ``buf[indices]``, honouring strides and elem_offset."""
    if buf.strides:
        terms = [op.mul(i, s) for i, s in zip(indices, buf.strides)]
        idx = reduce(op.add, terms)
    else:
        idx = op.const(0, indices[0].dtype) if indices else op.const(0)
        for i, extent in zip(indices, buf.shape):
            idx = op.add(op.mul(idx, extent), i)
    if buf.elem_offset is not None:
        idx = op.add(idx, buf.elem_offset)
    return idx


def flat_size(buf: Buffer) -> PrimExpr:
    one = op.const(1, buf.shape[0].dtype if buf.shape else "int32")
    if buf.strides:
        # A strided (e.g. storage-aligned) buffer spans up to its last element's offset.
        return reduce(op.add, [op.mul(op.sub(n, 1), st) for n, st in zip(buf.shape, buf.strides)],
                      one)
    return reduce(op.mul, buf.shape, one)


class _Flatten(IRMutator):
    def __init__(self) -> None:
        super().__init__()
        self.flat: dict[Buffer, Buffer] = {}

    def flat_of(self, buf: Buffer) -> Buffer:
        got = self.flat.get(buf)
        if got is None:
            if len(buf.shape) == 1 and not buf.strides and buf.elem_offset is None:
                got = buf
            else:
                got = buf.replace(shape=(flat_size(buf),), strides=(), elem_offset=None)
            self.flat[buf] = got
        return got

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        indices = tuple(self.visit(i) for i in load.indices)
        flat = self.flat_of(load.buffer)
        return BufferLoad(flat, (linear_index(load.buffer, indices),), load.dtype,
                          load.predicate)

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        indices = tuple(self.visit(i) for i in store.indices)
        value = self.visit(store.value)
        flat = self.flat_of(store.buffer)
        return BufferStore(flat, value, (linear_index(store.buffer, indices),), store.predicate)

    def visit_Allocate(self, alloc: Allocate) -> Stmt:
        body = self.visit(alloc.body)
        size = reduce(op.mul, alloc.extents, op.const(1, "int32"))  # 0-d: one element
        return alloc.replace(extents=(size,), body=body)

    def visit_DeclBuffer(self, decl: DeclBuffer) -> Stmt:
        return decl.replace(buffer=self.flat_of(decl.buffer), body=self.visit(decl.body))


def flatten_buffer(func: PrimFunc) -> PrimFunc:
    return func.with_body(_Flatten().visit(func.body))
