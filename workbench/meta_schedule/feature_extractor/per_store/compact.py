"""A fast ``CompactBufferAllocation`` for feature extraction.

Same contract and same result as ``workbench.tir.transform.plan_buffers.
compact_buffer_allocation`` (each allocated buffer shrinks to the box its accesses touch, and
indices are re-based), which the tests check structurally: it is that pass's public
:class:`~workbench.tir.transform.plan_buffers.BufferCompactor` with other answers to
``region`` and ``rebase``. The general pass asks the analyzer for an ``int_set`` per access and dimension;
feature extraction runs it on every candidate, and there the indices are affine in loop
variables, so the box is plain integer arithmetic: an index is split into a sum of terms; terms
over variables outside the accesses' loops stay symbolic (compared by structural key), the
others are bounded by :func:`~workbench.tir.analysis.const_interval`. A function with an access
this shortcut does not cover (a term mixing outer and inner variables, a loop with a symbolic
range) goes through the general pass.
"""
from __future__ import annotations

from workbench.tir import op
from workbench.tir.analysis import collect_vars, const_interval
from workbench.tir.arith import Analyzer
from workbench.tir.buffer import Buffer
from workbench.tir.arith.expr_key import KeyMaker
from workbench.tir.expr import Add, BufferLoad, IntImm, Mul, PrimExpr, Sub, Var, expr_children
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator
from workbench.tir.transform.plan_buffers import (
    BufferAccesses, BufferCompactor, BufferRebase, compact_buffer_allocation,
)


class _Fallback(Exception):
    """Raised when an allocation needs the general pass."""


def _split_terms(e: PrimExpr, sign: int, const: list[int], out: list[tuple[PrimExpr, int]]
                 ) -> None:
    """``e`` as ``const[0] + sum(k * term)``, flattening +, - and multiplication by constants."""
    if isinstance(e, IntImm):
        const[0] += sign * e.value
    elif isinstance(e, Add):
        _split_terms(e.a, sign, const, out)
        _split_terms(e.b, sign, const, out)
    elif isinstance(e, Sub):
        _split_terms(e.a, sign, const, out)
        _split_terms(e.b, -sign, const, out)
    elif isinstance(e, Mul) and isinstance(e.b, IntImm):
        _split_terms(e.a, sign * e.b.value, const, out)
    elif isinstance(e, Mul) and isinstance(e.a, IntImm):
        _split_terms(e.b, sign * e.a.value, const, out)
    else:
        out.append((e, sign))


class _Bounder:
    """Splits an index into terms over outer variables (kept symbolic, compared by structural
    key) and terms over the accesses' loops (bounded to constants)."""

    def __init__(self, dom: dict[Var, tuple[int, int]]) -> None:
        self.dom = dom
        self.keys = KeyMaker()

    def bound(self, index: PrimExpr) -> tuple[dict, list[tuple[PrimExpr, int]], int, int]:
        """(symbolic key -> coefficient, symbolic terms, constant lo, constant hi)."""
        const = [0]
        terms: list[tuple[PrimExpr, int]] = []
        _split_terms(index, 1, const, terms)
        lo = hi = const[0]
        sym: dict = {}
        sym_terms: list[tuple[PrimExpr, int]] = []
        for term, k in terms:
            vars_ = collect_vars(term)
            inner = [v for v in vars_ if v in self.dom]
            if not inner:
                key = self.keys.key(term)
                sym[key] = sym.get(key, 0) + k
                sym_terms.append((term, k))
                continue
            if len(inner) != len(vars_):
                raise _Fallback  # a term mixing outer and inner variables
            b = const_interval(term, self.dom)
            if b is None:
                raise _Fallback
            lo += min(k * b[0], k * b[1])
            hi += max(k * b[0], k * b[1])
        return {key: c for key, c in sym.items() if c}, sym_terms, lo, hi


def _offset(lo: int, sym_terms: list[tuple[PrimExpr, int]], dtype: str) -> PrimExpr:
    e: PrimExpr = op.const(lo, dtype)
    for term, k in sym_terms:
        e = op.add(e, term if k == 1 else op.mul(term, op.const(k, term.dtype)))
    return e


def _region(found, buf: Buffer, ana: Analyzer) -> list[tuple[PrimExpr, int] | None]:
    """Per dimension: (offset, constant extent) of the touched box, or None to keep it whole."""
    dom: dict[Var, tuple[int, int]] = {}
    for _, loops in found:
        for lp in loops:
            if not (isinstance(lp.min, IntImm) and isinstance(lp.extent, IntImm)):
                raise _Fallback
            dom[lp.loop_var] = (lp.min.value, lp.min.value + lp.extent.value - 1)
    bounder = _Bounder(dom)
    out: list[tuple[PrimExpr, int] | None] = []
    for d, dim in enumerate(buf.shape):
        sym = sym_terms = None
        lo = hi = 0
        ok = True
        for n, (indices, _) in enumerate(found):
            a_sym, a_terms, a_lo, a_hi = bounder.bound(indices[d])
            if n == 0:
                sym, sym_terms, lo, hi = a_sym, a_terms, a_lo, a_hi
            elif a_sym != sym:
                ok = False  # bounds differ by a non-constant: keep the dimension whole
                break
            else:
                lo, hi = min(lo, a_lo), max(hi, a_hi)
        extent = hi - lo + 1
        if not ok or (isinstance(dim, IntImm) and extent >= dim.value) or extent <= 0:
            out.append(None)
        else:
            out.append((ana.simplify(_offset(lo, sym_terms, found[0][0][d].dtype)), extent))
    return out


def _loads_of(e: PrimExpr, data: Var) -> bool:
    """Whether ``e`` loads from the buffer over ``data`` (a cheap pre-check before rewriting)."""
    stack = [e]
    while stack:
        n = stack.pop()
        if isinstance(n, BufferLoad):
            if n.buffer.data is data:
                return True
            stack.extend(n.indices)
        elif isinstance(n, (Var, IntImm)):
            continue
        else:
            stack.extend(expr_children(n))
    return False


class _SkippingRebase(BufferRebase):
    """The pipeline's re-basing rewrite, skipping expressions that never touch the buffer."""

    def visit_PrimExpr(self, e: PrimExpr) -> PrimExpr:
        # Most expressions (loop bounds, conditions, other buffers' values) do not touch the
        # buffer: skip the generic rewrite for them.
        return self.generic_visit(e) if _loads_of(e, self.old.data) else e

    def visit_BufferLoad(self, e: BufferLoad) -> PrimExpr:
        if e.buffer.data is not self.old.data:
            return self.visit_PrimExpr(e)
        return super().visit_BufferLoad(e)


class _AffineCompact(BufferCompactor):
    """The pipeline's compaction (and its access collector, so both see the same accesses)
    with the box bounded by affine arithmetic and a re-basing that skips expressions."""

    def __init__(self) -> None:
        super().__init__()
        self.ana = Analyzer()

    def visit_PrimExpr(self, e: PrimExpr) -> PrimExpr:
        return e  # allocations live in statements only

    def visit_Buffer(self, buf: Buffer) -> Buffer:
        return buf

    def region(self, acc: BufferAccesses, buf: Buffer) -> list[tuple[PrimExpr, int] | None]:
        return _region(acc.found, buf, self.ana)

    def rebase(self, old: Buffer, new: Buffer, offsets: list[PrimExpr]) -> IRMutator:
        return _SkippingRebase(old, new, offsets)


def compact_for_features(func: PrimFunc) -> PrimFunc:
    """``compact_buffer_allocation(func)``, computed with affine arithmetic when it can be."""
    try:
        return func.with_body(_AffineCompact().visit(func.body))
    except _Fallback:
        return compact_buffer_allocation(func)


__all__ = ["compact_for_features"]
