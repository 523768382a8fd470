"""A fast ``CompactBufferAllocation`` for feature extraction.

Same contract and same result as ``workbench.tir.transform.plan_buffers.
compact_buffer_allocation`` (each allocated buffer shrinks to the box its accesses touch, and
indices are re-based), which the tests check structurally. The general pass asks the analyzer
for an ``int_set`` per access and dimension; feature extraction runs it on every candidate,
and there the indices are affine in loop variables, so the box is plain integer arithmetic on
:class:`~.index_analysis.AffineIndex` forms. A function with any access this shortcut does not
cover (a non-affine index, a loop with a symbolic range) goes through the general pass.
"""
from __future__ import annotations

from workbench.tir import op
from workbench.tir.arith import Analyzer
from workbench.tir.buffer import Buffer
from workbench.tir.expr import BufferLoad, IntImm, PrimExpr, Var
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, IRVisitor
from workbench.tir.stmt import Allocate, BufferStore, DeclBuffer, For, Stmt
from workbench.tir.transform.plan_buffers import compact_buffer_allocation

from workbench.meta_schedule.feature_extractor.per_store.index_analysis import affine_index


class _Fallback(Exception):
    """Raised when an allocation needs the general pass."""


class _Accesses(IRVisitor):
    """Index tuples of every access to ``data`` below a statement, with their loops."""

    def __init__(self, data: Var) -> None:
        self.data = data
        self.loops: list[For] = []
        self.found: list[tuple[tuple[PrimExpr, ...], tuple[For, ...]]] = []
        self.opaque = False

    def visit_For(self, loop: For) -> None:
        self.visit(loop.min)
        self.visit(loop.extent)
        self.loops.append(loop)
        self.visit(loop.body)
        self.loops.pop()

    def visit_BufferLoad(self, e: BufferLoad) -> None:
        if e.buffer.data is self.data:
            self.found.append((e.indices, tuple(self.loops)))
        for i in e.indices:
            self.visit(i)

    def visit_BufferStore(self, s: BufferStore) -> None:
        if s.buffer.data is self.data:
            self.found.append((s.indices, tuple(self.loops)))
        for i in s.indices:
            self.visit(i)
        self.visit(s.value)

    def visit_Var(self, v: Var) -> None:
        if v is self.data:
            self.opaque = True


def _affine_expr(const: int, coefs: dict[Var, int], dtype: str) -> PrimExpr:
    e: PrimExpr = op.const(const, dtype)
    for v, c in coefs.items():
        e = op.add(e, op.mul(v, op.const(c, v.dtype)) if c != 1 else v)
    return e


def _region(found, buf: Buffer, ana: Analyzer) -> list[tuple[PrimExpr, int] | None]:
    """Per dimension: (offset, constant extent) of the touched box, or None to keep it whole."""
    dom: dict[Var, tuple[int, int]] = {}
    for _, loops in found:
        for lp in loops:
            if not (isinstance(lp.min, IntImm) and isinstance(lp.extent, IntImm)):
                raise _Fallback
            dom[lp.loop_var] = (lp.min.value, lp.min.value + lp.extent.value - 1)
    out: list[tuple[PrimExpr, int] | None] = []
    for d, dim in enumerate(buf.shape):
        sym = None
        lo = hi = 0
        ok = True
        for n, (indices, _) in enumerate(found):
            aff = affine_index(indices[d])
            if not aff.is_affine:
                raise _Fallback
            a_lo = a_hi = aff.const
            a_sym = {}
            for v, c in aff.coefs.items():
                r = dom.get(v)
                if r is None:
                    a_sym[v] = c
                elif c > 0:
                    a_lo += c * r[0]
                    a_hi += c * r[1]
                else:
                    a_lo += c * r[1]
                    a_hi += c * r[0]
            if n == 0:
                sym, lo, hi = a_sym, a_lo, a_hi
            elif a_sym != sym:
                ok = False  # bounds differ by a non-constant: keep the dimension whole
                break
            else:
                lo, hi = min(lo, a_lo), max(hi, a_hi)
        extent = hi - lo + 1
        if not ok or (isinstance(dim, IntImm) and extent >= dim.value) or extent <= 0:
            out.append(None)
        else:
            out.append((ana.simplify(_affine_expr(lo, sym, indices[d].dtype)), extent))
    return out


class _Rebase(IRMutator):
    def __init__(self, old: Buffer, new: Buffer, offsets: list[PrimExpr]) -> None:
        super().__init__()
        self.old, self.new, self.offsets = old, new, offsets

    def _indices(self, indices: tuple[PrimExpr, ...]) -> tuple[PrimExpr, ...]:
        return tuple(op.sub(self.visit(i), o) for i, o in zip(indices, self.offsets))

    def visit_BufferLoad(self, e: BufferLoad) -> PrimExpr:
        if e.buffer.data is not self.old.data:
            return self.generic_visit(e)
        return BufferLoad(self.new, self._indices(e.indices), e.dtype, e.predicate)

    def visit_BufferStore(self, s: BufferStore) -> Stmt:
        if s.buffer.data is not self.old.data:
            return self.generic_visit(s)
        return BufferStore(self.new, self.visit(s.value), self._indices(s.indices), s.predicate)


class _Compact(IRMutator):
    def __init__(self) -> None:
        super().__init__()
        self.ana = Analyzer()

    def visit_Allocate(self, alloc: Allocate) -> Stmt:
        decl = alloc.body
        body = self.visit(decl.body) if isinstance(decl, DeclBuffer) else None
        if body is None or decl.buffer.data is not alloc.buffer_var or decl.buffer.strides:
            return self.generic_visit(alloc)
        buf = decl.buffer
        acc = _Accesses(alloc.buffer_var)
        acc.visit(body)
        if acc.opaque or not acc.found:
            return alloc.replace(body=decl.replace(body=body))
        region = _region(acc.found, buf, self.ana)
        if all(r is None for r in region):
            return alloc.replace(body=decl.replace(body=body))
        shape = tuple(dim if r is None else op.const(r[1], dim.dtype)
                      for dim, r in zip(buf.shape, region))
        offsets = [op.const(0, dim.dtype) if r is None else r[0]
                   for dim, r in zip(buf.shape, region)]
        new_buf = buf.replace(shape=shape)
        body = _Rebase(buf, new_buf, offsets).visit(body)
        return alloc.replace(extents=shape, body=decl.replace(buffer=new_buf, body=body))


def compact_for_features(func: PrimFunc) -> PrimFunc:
    """``compact_buffer_allocation(func)``, computed with affine arithmetic when it can be."""
    try:
        return func.with_body(_Compact().visit(func.body))
    except _Fallback:
        return compact_buffer_allocation(func)


__all__ = ["compact_for_features"]
