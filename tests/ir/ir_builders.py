"""Hand-built PrimFuncs for the IR tests, made with the node constructors only.

Every builder makes fresh Vars and Buffers on each call; ``suffix`` renames all of them, so two
calls with different suffixes give a renamed copy of the same IR.
"""
from __future__ import annotations

from workbench import tir
from workbench.ir.node import FrozenDict
from workbench.tir import (
    Allocate, AssertStmt, Block, BlockRealize, BufferRegion, BufferStore, Evaluate, For,
    IfThenElse, IterType, IterVar, LetStmt, Range, SeqStmt, StringImm, Var, While, const,
    decl_buffer,
)
from workbench.tir.functor import IRMutator


def rng(lo, extent) -> Range:
    return Range(tir.op.convert(lo), tir.op.convert(extent))


def point(buf, *idx) -> BufferRegion:
    return BufferRegion(buf, tuple(rng(i, 1) for i in idx))


def _stage(name, bufs_out, value_fn, extents, kinds, reads, init=None, suffix=""):
    """One te-like stage: loops over ``extents`` and a block binding its vars to them."""
    loops = [Var(f"{c}{suffix}") for c in "ijk"[:len(extents)]]
    bvars = [Var(f"v{c}{suffix}") for c in "ijk"[:len(extents)]]
    ivs = tuple(IterVar(rng(0, e), v, k) for e, v, k in zip(extents, bvars, kinds))
    out = bufs_out
    spatial = [v for v, k in zip(bvars, kinds) if k == IterType.DATA_PAR]
    body = BufferStore(out, value_fn(*bvars), tuple(spatial))
    init_stmt = None if init is None else BufferStore(out, init, tuple(spatial))
    block = Block(ivs, tuple(r(*bvars) for r in reads), (point(out, *spatial),), name, body,
                  init_stmt)
    stmt = BlockRealize(tuple(loops), const(True), block)
    for v, e in reversed(list(zip(loops, extents))):
        stmt = For(v, const(0), const(e), "serial", stmt)
    return stmt


def matmul(n: int = 128, suffix: str = "") -> tir.PrimFunc:
    """C = A @ B in block form, as te.create_prim_func would give it."""
    A, B, C = (decl_buffer((n, n), "float32", f"{x}{suffix}") for x in "ABC")
    S, R = IterType.DATA_PAR, IterType.COMM_REDUCE
    nest = _stage("C", C, lambda i, j, k: C[i, j] + A[i, k] * B[k, j], (n, n, n), (S, S, R),
                  (lambda i, j, k: point(C, i, j), lambda i, j, k: point(A, i, k),
                   lambda i, j, k: point(B, k, j)), init=const(0.0), suffix=suffix)
    root = BlockRealize((), const(True), Block((), (), (), "root", nest))
    return tir.prim_func([A, B, C], root)


def matmul_bias_relu(n: int = 128, suffix: str = "") -> tir.PrimFunc:
    """Three stages: C = A @ B, D = C + bias, E = max(D, 0); C and D allocated in the root."""
    A, B, E = (decl_buffer((n, n), "float32", f"{x}{suffix}") for x in "ABE")
    bias = decl_buffer((n,), "float32", f"bias{suffix}")
    C, D = (decl_buffer((n, n), "float32", f"{x}{suffix}") for x in "CD")
    S, R = IterType.DATA_PAR, IterType.COMM_REDUCE
    s1 = _stage("C", C, lambda i, j, k: C[i, j] + A[i, k] * B[k, j], (n, n, n), (S, S, R),
                (lambda i, j, k: point(C, i, j), lambda i, j, k: point(A, i, k),
                 lambda i, j, k: point(B, k, j)), init=const(0.0), suffix=suffix)
    s2 = _stage("D", D, lambda i, j: C[i, j] + bias[j], (n, n), (S, S),
                (lambda i, j: point(C, i, j), lambda i, j: point(bias, j)), suffix=suffix)
    s3 = _stage("E", E, lambda i, j: tir.max(D[i, j], const(0.0)), (n, n), (S, S),
                (lambda i, j: point(D, i, j),), suffix=suffix)
    root = BlockRealize((), const(True), Block((), (), (), "root", SeqStmt((s1, s2, s3)),
                                               alloc_buffers=(C, D)))
    return tir.prim_func([A, B, bias, E], root)


def elementwise(n: int = 1024, suffix: str = "") -> tir.PrimFunc:
    """B[i] = exp(A[i]) * 2 over a parallel outer loop and a vectorized inner loop of 8."""
    A, B = (decl_buffer((n,), "float32", f"{x}{suffix}") for x in "AB")
    io, ii = Var(f"i_outer{suffix}"), Var(f"i_inner{suffix}")
    idx = io * 8 + ii
    store = BufferStore(B, tir.exp(A[idx]) * const(2.0), (idx,))
    inner = For(ii, const(0), const(8), "vectorized", store)
    outer = For(io, const(0), const(n // 8), "parallel", inner)
    tail = For(Var(f"u{suffix}"), const(0), const(4), "unroll",
               Evaluate(const(0)), annotations=FrozenDict({"pragma_unroll_explicit": 1}))
    return tir.prim_func([A, B], SeqStmt((outer, tail)))


def misc(suffix: str = "") -> tir.PrimFunc:
    """Allocate / LetStmt / IfThenElse / While / AssertStmt / Ramp / Broadcast / Select / Call /
    Cast, over a scalar parameter n and a symbolic-shape buffer."""
    n = Var(f"n{suffix}")
    X = decl_buffer((n,), "float32", f"X{suffix}")
    ptr = Var(f"tmp{suffix}", "handle")
    T_ = decl_buffer((8,), "float32", f"tmp_buf{suffix}", data=ptr)
    x = Var(f"x{suffix}")
    ramp = tir.Ramp(x * 8, const(1), 8, "int32x8")
    vec = tir.BufferLoad(X, (ramp,), "float32x8")
    vstore = BufferStore(T_, vec + tir.Broadcast(const(1.0), 8, "float32x8"),
                         (tir.Ramp(const(0), const(1), 8, "int32x8"),))
    sel = tir.Select(x < n, tir.Cast("float32", x), const(-1.5), "float32")
    body = SeqStmt((
        vstore,
        IfThenElse(x > 2, BufferStore(X, sel, (x,)),
                   BufferStore(X, tir.if_then_else(x == 0, tir.sqrt(X[x]), const(0.0)), (x,))),
        While(x < 4, Evaluate(tir.call("exp", const(1.0)))),
    ))
    alloc = Allocate(ptr, "float32", (const(8),), const(True),
                     tir.DeclBuffer(T_, body))
    let = LetStmt(x, tir.floordiv(n, 2) - 1, alloc)
    assert_ = AssertStmt(n > 0, StringImm("n must be positive"), let)
    return tir.prim_func([X, n], assert_)


class _Renamer(IRMutator):
    """A deep copy with every Var and Buffer replaced by a fresh one with another name."""

    def __init__(self, suffix: str):
        super().__init__()
        self.suffix = suffix
        self.vars: dict[Var, Var] = {}

    def visit_Var(self, v: Var) -> Var:
        if v not in self.vars:
            self.vars[v] = type(v)(v.name + self.suffix, v.dtype)
        return self.vars[v]

    def rewrite_buffer(self, buf):
        new = self.generic_visit(buf)
        return new.replace(name=buf.name + self.suffix)

    def visit_PrimFunc(self, f):
        params = tuple(self.visit(p) for p in f.params)
        bmap = FrozenDict({self.visit(k): self.visit(b) for k, b in f.buffer_map.items()})
        return f.replace(params=params, buffer_map=bmap, body=self.visit(f.body))


def renamed(node, suffix: str = "_r"):
    return _Renamer(suffix).visit(node)


class _Edit(IRMutator):
    """Apply ``fn`` to nodes of type ``cls``; ``fn`` returns a replacement or None to skip.

    Results are memoised per node so a shared node (a Buffer) is replaced consistently; with
    ``first=True`` only the first accepted replacement is made.
    """

    def __init__(self, cls, fn, first):
        super().__init__()
        self.cls, self.fn, self.first, self.done = cls, fn, first, False
        self.memo: dict[int, object] = {}

    def visit(self, node):
        if isinstance(node, self.cls):
            if id(node) in self.memo:
                return self.memo[id(node)]
            if not (self.first and self.done):
                new = self.fn(node)
                if new is not None:
                    self.done = True
                    self.memo[id(node)] = new
                    return new
        return super().visit(node)


def edit(root, cls, fn, first: bool = False):
    """``root`` with nodes of type ``cls`` rewritten by ``fn`` (see :class:`_Edit`)."""
    out = _Edit(cls, fn, first).visit(root)
    assert out is not root, "the edit changed nothing"
    return out
