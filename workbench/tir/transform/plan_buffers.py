"""Where intermediate buffers live and how big they are.

``plan_buffer_allocation`` moves each allocation from where the blocks declared it (usually the
root) down to the innermost loop that contains every access to it, as TVM's
PlanAndUpdateBufferAllocationLocation does: a buffer used only inside one tile is then allocated
per tile (per thread, under a parallel loop). ``compact_buffer_allocation`` then shrinks it to
the region those accesses touch (TVM's CompactBufferAllocation), re-basing the indices. Together
they turn ``cache_write(..., "local")`` + ``reverse_compute_at`` into a small tile that LLVM keeps
in registers.
"""
from __future__ import annotations



from workbench.tir import op
from workbench.tir.arith import NEG_INF, POS_INF, Analyzer
from workbench.tir.buffer import Buffer, Range
from workbench.tir.expr import BufferLoad, IntImm, PrimExpr, Var
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, IRVisitor
from workbench.tir.stmt import Allocate, BufferStore, DeclBuffer, For, Stmt


class _Accesses(IRVisitor):
    """Every access to ``data`` with the loops around it (inside the visited statement)."""

    def __init__(self, data: Var) -> None:
        self.data = data
        self.loops: list[For] = []
        self.found: list[tuple[tuple[PrimExpr, ...], tuple[For, ...]]] = []
        self.opaque = False  # the pointer escapes (a call, an address): leave it alone

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


def _common_prefix(paths: list[tuple[For, ...]]) -> tuple[For, ...]:
    if not paths:
        return ()
    first = paths[0]
    n = len(first)
    for p in paths[1:]:
        n = min(n, len(p))
        for k in range(n):
            if p[k] is not first[k]:
                n = k
                break
    return first[:n]


class _WrapLoopBody(IRMutator):
    def __init__(self, target: For, wrap) -> None:
        super().__init__()
        self.target = target
        self.wrap = wrap

    def visit_For(self, loop: For) -> Stmt:
        if loop is self.target:
            return loop.replace(body=self.wrap(loop.body))
        return self.generic_visit(loop)


class _Plan(IRMutator):
    def visit_Allocate(self, alloc: Allocate) -> Stmt:
        decl = alloc.body
        if not isinstance(decl, DeclBuffer) or decl.buffer.data is not alloc.buffer_var:
            return self.generic_visit(alloc)
        inner = self.visit(decl.body)
        acc = _Accesses(alloc.buffer_var)
        acc.visit(inner)
        lca = _common_prefix([loops for _, loops in acc.found])
        if acc.opaque or not acc.found or not lca:
            return alloc.replace(body=decl.replace(body=inner))
        target = lca[-1]

        def wrap(body: Stmt) -> Stmt:
            return alloc.replace(body=decl.replace(body=body))
        return _WrapLoopBody(target, wrap).visit(inner)


def plan_buffer_allocation(func: PrimFunc) -> PrimFunc:
    """Allocate each buffer inside the innermost loop that holds all its accesses."""
    return func.with_body(_Plan().visit(func.body))


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


def _region(acc: _Accesses, buf: Buffer) -> list[tuple[PrimExpr, int] | None]:
    """Per dimension: (min, constant extent) covering every access, or None to keep it whole."""
    ana = Analyzer()
    dom: dict[Var, Range] = {}
    for _, loops in acc.found:
        for lp in loops:
            dom[lp.loop_var] = Range(lp.min, lp.extent)
    out: list[tuple[PrimExpr, int] | None] = []
    for d, dim in enumerate(buf.shape):
        lo: PrimExpr | None = None
        hi: PrimExpr | None = None
        ok = True
        for indices, _ in acc.found:
            s = ana.int_set(indices[d], dom)
            if s.min_value is NEG_INF or s.max_value is POS_INF:
                ok = False
                break
            lo = s.min_value if lo is None else _pick(ana, lo, s.min_value, min)
            hi = s.max_value if hi is None else _pick(ana, hi, s.max_value, max)
            if lo is None or hi is None:
                ok = False
                break
        extent = ana.simplify(op.add(op.sub(hi, lo), 1)) if ok else None
        if not ok or not isinstance(extent, IntImm) or \
                (isinstance(dim, IntImm) and extent.value >= dim.value) or extent.value <= 0:
            out.append(None)
        else:
            out.append((ana.simplify(lo), extent.value))
    return out


def _pick(ana: Analyzer, a: PrimExpr, b: PrimExpr, choose) -> PrimExpr | None:
    """The smaller/larger of two bounds when they differ by a constant, else None."""
    diff = ana.simplify(op.sub(b, a))
    if not isinstance(diff, IntImm):
        return None
    return a if choose(0, diff.value) == 0 else b


class _Compact(IRMutator):
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
        region = _region(acc, buf)
        if all(r is None for r in region):
            return alloc.replace(body=decl.replace(body=body))
        shape = tuple(dim if r is None else op.const(r[1], dim.dtype)
                      for dim, r in zip(buf.shape, region))
        offsets = [op.const(0, dim.dtype) if r is None else r[0]
                   for dim, r in zip(buf.shape, region)]
        new_buf = buf.replace(shape=shape)
        body = _Rebase(buf, new_buf, offsets).visit(body)
        return alloc.replace(extents=shape, body=decl.replace(buffer=new_buf, body=body))


def compact_buffer_allocation(func: PrimFunc) -> PrimFunc:
    """Shrink each allocated buffer to the region its accesses cover; re-base the indices."""
    return func.with_body(_Compact().visit(func.body))


__all__ = ["plan_buffer_allocation", "compact_buffer_allocation"]
