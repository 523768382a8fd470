"""``AnnotateTIROpPattern``: classify each PrimFunc for operator fusion (TVM's rules).

Every PrimFunc of the module gets the attr ``op_pattern`` (an int, :class:`OpPatternKind`),
unless it already has one. The kind comes from the function's blocks, each judged by how its
single store's indices relate to its loads' indices (TVM's ``PatternKindAnalyzer``):

- every load indexed exactly like the store -> ``kElemWise``;
- loads whose indices are an in-order subset of the store's vars (unit dims may be 0) ->
  ``kBroadcast`` (but ``kElemWise`` when some other load is elementwise: ``A[i, j] + B[j]``);
- loads whose indices only use the store's vars (and symbolic shape vars) -> ``kInjective``;
- otherwise, a block with reduction iter vars is ``kOutEWiseFusable`` when its body is a
  multiply-accumulate with reuse (matmul, conv) or reads through non-trivial reduce indices
  (pooling), else ``kCommReduce``; a block without reduction is ``kOpaque``.

The function's kind is the maximum over its blocks, except that an injective output block after a
reduction makes ``kOutEWiseFusable`` (softmax, layer_norm). A block may store to several buffers
at the same indices (a multi-value reduction such as layer_norm's sum and sum of squares); blocks
without a store, with stores at different indices, or with nested blocks are ``kOpaque``.
"""
from __future__ import annotations

from enum import IntEnum
from typing import Any

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.ir.structural import structural_equal
from workbench.tir.expr import Add, BufferLoad, Mul, Var
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRVisitor, post_order_visit, uses_var
from workbench.tir.stmt import Block, BufferStore, IterType


class OpPatternKind(IntEnum):
    kElemWise = 0
    kBroadcast = 1
    kInjective = 2
    kCommReduce = 3
    kOutEWiseFusable = 4
    kTuple = 7
    kOpaque = 8


K = OpPatternKind


class _Accesses(IRVisitor):
    def __init__(self) -> None:
        self.loads: list[BufferLoad] = []
        self.stores: list[BufferStore] = []
        self.nested = False

    def visit_BufferLoad(self, e: BufferLoad) -> None:
        self.loads.append(e)
        self.generic_visit(e)

    def visit_BufferStore(self, s: BufferStore) -> None:
        self.stores.append(s)
        self.generic_visit(s)

    def visit_Block(self, b: Block) -> None:
        self.nested = True


def _same(a: Any, b: Any) -> bool:
    return a is b or structural_equal(a, b)


def _same_indices(a: BufferStore, b: BufferStore) -> bool:
    return len(a.indices) == len(b.indices) and all(
        _same(x, y) for x, y in zip(a.indices, b.indices))


def _is_elemwise(store: BufferStore, load: BufferLoad) -> bool:
    return len(store.indices) == len(load.indices) and all(
        _same(a, b) for a, b in zip(store.indices, load.indices))


def _is_broadcast(store: BufferStore, load: BufferLoad) -> bool:
    j = 0
    for dim, idx in zip(load.buffer.shape, load.indices):
        if getattr(dim, "value", None) == 1 and getattr(idx, "value", None) == 0:
            continue  # a unit dimension read at 0
        while j < len(store.indices) and not _same(store.indices[j], idx):
            j += 1
        if j == len(store.indices):
            return False
    return True


def _store_vars(store: BufferStore) -> set[int] | None:
    if not all(isinstance(i, Var) for i in store.indices):
        return None
    return {id(i) for i in store.indices}


def _is_injective(store: BufferStore, load: BufferLoad, iters: set[int]) -> bool:
    """The load's indices use no iteration variable (of ``iters``, the block's) that the
    store's do not: a symbolic shape variable (``floordiv(i, s)`` in a reshape over a dynamic
    sequence length) is a constant of the call, not an index."""
    vars_ = _store_vars(store)
    if vars_ is None:
        return False
    return not any(uses_var(i, lambda v: id(v) in iters and id(v) not in vars_)
                   for i in load.indices)


def _allows_reuse(store: BufferStore, load: BufferLoad) -> bool:
    vars_ = _store_vars(store)
    if vars_ is None:
        return False
    left = set(vars_)

    def drop(n: Any) -> None:
        if isinstance(n, Var):
            left.discard(id(n))
    for i in load.indices:
        post_order_visit(i, drop)
    return bool(left)


def _is_fma(body: Any) -> bool:
    if not isinstance(body, BufferStore) or not isinstance(body.value, Add):
        return False
    lhs, rhs = body.value.a, body.value.b
    if not (isinstance(lhs, BufferLoad) and isinstance(rhs, Mul)):
        return False
    incremental = lhs.buffer is body.buffer and _is_elemwise(body, lhs)
    a, b = _strip_cast(rhs.a), _strip_cast(rhs.b)
    return (incremental and isinstance(a, BufferLoad) and isinstance(b, BufferLoad)
            and _allows_reuse(body, a) and _allows_reuse(body, b))


def _strip_cast(e: Any) -> Any:
    # Mixed-precision kernels wrap their operands in casts; TVM sees through them too.
    from workbench.tir.expr import Cast
    return e.value if isinstance(e, Cast) else e


def _is_pure_reduce(reduce_vars: list[Var], indices: Any) -> bool:
    ids = {id(v) for v in reduce_vars}
    for e in indices:
        if uses_var(e, lambda v: id(v) in ids) and not (isinstance(e, Var) and id(e) in ids):
            return False
    return True


class _PatternAnalyzer(IRVisitor):
    def __init__(self, func: PrimFunc):
        self.kind = K.kElemWise
        self.params = {id(b) for b in func.buffer_map.values()}
        self.root_seen = False
        # Some reduction reuses its operands (a product, a window): an anchor for epilogues
        # only. Without one, kOutEWiseFusable means "row reduction, then an injective output"
        # (softmax, layer_norm), which elementwise producers may fuse into.
        self.reuse = False

    def visit_Block(self, block: Block) -> None:
        if not self.root_seen and not block.iter_vars and block.name_hint == "root":
            self.root_seen = True
            self.visit(block.body)
            return
        if self.kind == K.kOpaque:
            return
        acc = _Accesses()
        acc.visit(block.body)
        # Several stores are one "store" when they share their indices: a multi-value reduction
        # (layer_norm's sum and sum of squares, argmax's index and value), as in TVM.
        if acc.nested or not acc.stores or any(
                not _same_indices(acc.stores[0], s) for s in acc.stores[1:]):
            self.kind = K.kOpaque
            return
        store = acc.stores[0]
        pattern, has_elemwise = K.kElemWise, False
        for load in acc.loads:
            if _is_elemwise(store, load):
                has_elemwise = True
            elif _is_broadcast(store, load):
                pattern = max(pattern, K.kBroadcast)
            elif _is_injective(store, load, {id(iv.var) for iv in block.iter_vars}):
                pattern = max(pattern, K.kInjective)
            else:
                pattern = K.kOpaque
                break
        if pattern == K.kBroadcast and has_elemwise:
            pattern = K.kElemWise
        if pattern != K.kOpaque:
            writes_param = any(id(s.buffer) in self.params for s in acc.stores)
            if writes_param and self.kind == K.kCommReduce:
                self.kind = K.kOutEWiseFusable  # reduce then injective output: softmax
            else:
                self.kind = max(self.kind, pattern)
            return
        reduce_vars = [iv.var for iv in block.iter_vars if iv.iter_type == IterType.COMM_REDUCE]
        if not reduce_vars:
            self.kind = K.kOpaque
            return
        if _is_fma(block.body) or \
                any(not _is_pure_reduce(reduce_vars, load.indices) for load in acc.loads):
            self.kind = max(self.kind, K.kOutEWiseFusable)
            self.reuse = True
            return
        self.kind = max(self.kind, K.kCommReduce)


def analyze_op_pattern(func: PrimFunc) -> OpPatternKind:
    """The fusion pattern of ``func`` (see the module docstring)."""
    analyzer = _PatternAnalyzer(func)
    analyzer.visit(func.body)
    return analyzer.kind


def is_row_normalization(func: PrimFunc) -> bool:
    """``func`` is kOutEWiseFusable only because an injective output follows a plain row
    reduction (layer_norm, softmax): no block reuses its operands as a product or a window
    does. Such a kernel reads its input in a pass per reduction and once more for the output,
    so an elementwise producer inlined into it is recomputed per pass (a few cheap ops per
    element) instead of written and read back through memory (ORT's SkipLayerNormalization)."""
    analyzer = _PatternAnalyzer(func)
    analyzer.visit(func.body)
    return analyzer.kind == K.kOutEWiseFusable and not analyzer.reuse


class AnnotateTIROpPattern(Pass):
    """The pass object: ``mod = AnnotateTIROpPattern()(mod)``; sets ``op_pattern`` attrs."""

    name = "AnnotateTIROpPattern"

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        out = mod.copy()
        for name, func in mod.items():
            if isinstance(func, PrimFunc) and "op_pattern" not in func.attrs:
                out[name] = func.with_attr("op_pattern", int(analyze_op_pattern(func)))
        return out


__all__ = ["AnnotateTIROpPattern", "OpPatternKind", "analyze_op_pattern",
           "is_row_normalization"]
