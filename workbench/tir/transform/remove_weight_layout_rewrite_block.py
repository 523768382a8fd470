"""RemoveWeightLayoutRewriteBlock: make a function take its weights pre-packed (TVM's
``tir.transform.RemoveWeightLayoutRewriteBlock``).

The ``RewriteLayout`` postproc leaves, for each layout-free weight ``W`` it re-lays out, a
*preproc* block annotated ``meta_schedule.layout_rewrite_preproc`` that packs the weight on
every call::

    for ax0, ax1, ax2, ax3 in T.grid(3, 3, 16, 32):
        with T.block("weight_global"):             # the preproc block
            weight_global[v3 // 4, v2 // 2, ...] = weight[v0, v1, v2, v3]
    ... conv2d reads weight_global[...] ...

This pass removes that loop nest and makes the parameter *be* the packed buffer
(``weight_global``, shape ``(8, 8, 2, 3, 3, 2, 2)``): the function now expects its caller to
pass the weight already packed, which is what the tuner measures (packing is a one-time cost
for constant weights). A preproc block is stripped only when it is a plain copy
``dst[f(v)] = src[v]`` from a parameter that nothing else reads into a buffer nothing else
writes; anything else is left in place (the function then keeps packing at run time).

Each stripped parameter is recorded in the function attr ``layout_rewrites`` as
``(param_index, original_shape, IndexMap)``: :func:`layout_rewrites` reads them back as
:class:`LayoutRewrite` objects whose ``pack(array)`` packs a weight with numpy, and
:func:`add_layout_pack_funcs` adds compiled packing functions next to the kernel (the tuner's
output check uses those; see ``workbench.meta_schedule.runner.reference``).

``skip_tensor_rewrite`` is TVM's flag for also rewriting constant tensors (``AllocateConst``)
to the packed layout; Workbench's TIR has no constant allocations, so the flag changes nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from workbench.ir.module import IRModule
from workbench.ir.node import FrozenDict
from workbench.tir import op
from workbench.tir.buffer import Buffer, BufferRegion, Range, decl_buffer
from workbench.tir.expr import BufferLoad, IntImm, Var
from workbench.tir.function import PrimFunc, prim_func
from workbench.tir.functor import IRVisitor, substitute
from workbench.tir.schedule.index_map import IndexMap, free_vars_ok
from workbench.tir.schedule.primitive.cache import alloc_site
from workbench.tir.schedule.state import FuncIndex, replace_stmt
from workbench.tir.analysis import blocks_under
from workbench.tir.stmt import (
    Block, BlockRealize, BufferStore, For, ForKind, IterType, IterVar, Stmt,
)

__all__ = [
    "RemoveWeightLayoutRewriteBlock", "remove_weight_layout_rewrite_block", "LayoutRewrite",
    "layout_rewrites", "layout_pack_func", "add_layout_pack_funcs", "pack_array",
    "PREPROC_ANNOTATION", "LAYOUT_REWRITES_ATTR", "PACK_FUNC_INFIX",
]

#: The block annotation of a preproc block (``meta_schedule.layout_rewrite_preproc``).
PREPROC_ANNOTATION = "meta_schedule.layout_rewrite_preproc"
#: The PrimFunc attr recording the stripped parameters.
LAYOUT_REWRITES_ATTR = "layout_rewrites"
#: A packing function for parameter ``i`` of kernel ``f`` is named ``f__layout_pack_i``.
PACK_FUNC_INFIX = "__layout_pack_"


@dataclass(frozen=True)
class LayoutRewrite:
    """Parameter ``param_index`` now takes ``index_map``'s image of a ``shape`` tensor."""

    param_index: int
    shape: tuple[int, ...]
    dtype: str
    index_map: IndexMap

    @property
    def packed_shape(self) -> tuple[int, ...]:
        return tuple(int(s.value) for s in self.index_map.map_shape(
            [op.const(n, "int32") for n in self.shape]))

    def pack(self, array: np.ndarray) -> np.ndarray:
        """``array`` (of the original shape) in the packed layout."""
        return pack_array(array, self.index_map, self.packed_shape)


def pack_array(array: np.ndarray, index_map: IndexMap,
               packed_shape: Sequence[int] | None = None) -> np.ndarray:
    """``out[index_map(i)] = array[i]`` for every index ``i`` of ``array``, with numpy."""
    array = np.asarray(array)
    cols = index_map.image_columns(array.shape, limit=max(array.size, 1))
    if cols is None:
        raise ValueError(f"pack_array: cannot evaluate {index_map} with numpy")
    if packed_shape is None:
        packed_shape = tuple(int(c.max()) + 1 for c in cols) if array.size else ()
    out = np.zeros(tuple(packed_shape), dtype=array.dtype)
    out[tuple(cols)] = array.reshape(-1)
    return out


def layout_rewrites(func: PrimFunc) -> list[LayoutRewrite]:
    """The parameters this pass made take packed weights (empty when none)."""
    out = []
    for index, shape, imap in func.attrs.get(LAYOUT_REWRITES_ATTR, ()) or ():
        buf = func.buffer_map[func.params[int(index)]]
        out.append(LayoutRewrite(int(index), tuple(int(n) for n in shape), buf.dtype, imap))
    return out


# ---- the pass ------------------------------------------------------------------------------------

class RemoveWeightLayoutRewriteBlock:
    """The pass: ``RemoveWeightLayoutRewriteBlock()(mod)`` strips every PrimFunc of ``mod``
    (or one PrimFunc) and returns a new module; the input is not modified."""

    name = "RemoveWeightLayoutRewriteBlock"

    def __init__(self, skip_tensor_rewrite: bool = False) -> None:
        self.skip_tensor_rewrite = bool(skip_tensor_rewrite)

    def __call__(self, obj: IRModule | PrimFunc) -> IRModule | PrimFunc:
        if isinstance(obj, PrimFunc):
            return remove_weight_layout_rewrite_block(obj)
        if not isinstance(obj, IRModule):
            raise TypeError(f"{self.name} expects an IRModule or a PrimFunc, got "
                            f"{type(obj).__name__}")
        out = obj.copy()
        for name, func in obj.items():
            if isinstance(func, PrimFunc):
                out[name] = remove_weight_layout_rewrite_block(func)
        return out


def remove_weight_layout_rewrite_block(func: PrimFunc) -> PrimFunc:
    """``func`` without its strippable preproc blocks (see the module docstring); the very
    same object when there are none."""
    if not _has_preproc(func.body):
        return func
    recorded = list(func.attrs.get(LAYOUT_REWRITES_ATTR, ()) or ())
    skipped: set[str] = set()
    changed = False
    while True:
        index = FuncIndex(func)
        name = next((n for n in index.block_order
                     if n not in skipped and _is_preproc(index.blocks[n].block)), None)
        if name is None:
            break
        stripped = _strip_one(func, index, name)
        if stripped is None:
            skipped.add(name)
            continue
        func, entry = stripped
        recorded.append(entry)
        changed = True
    if not changed:
        return func
    return func.with_attr(LAYOUT_REWRITES_ATTR, tuple(recorded))


def _has_preproc(stmt: Stmt) -> bool:
    """Any preproc block below ``stmt`` (a walk over statements only: cheap, and it accepts any
    function, as ArgInfo asks about every task)."""
    return any(_is_preproc(b) for b in blocks_under(stmt))


def _is_preproc(block: Block) -> bool:
    value = block.annotations.get(PREPROC_ANNOTATION)
    if isinstance(value, IntImm):
        value = value.value
    return bool(value) and not isinstance(value, str)


def _strip_one(func: PrimFunc, index: FuncIndex, name: str
               ) -> tuple[PrimFunc, tuple[int, tuple[int, ...], IndexMap]] | None:
    info = index.blocks[name]
    block = info.block
    store = block.body
    if (block.init is not None or block.alloc_buffers or block.match_buffers
            or not isinstance(store, BufferStore) or not isinstance(store.value, BufferLoad)):
        return None
    load = store.value
    src, dst = load.buffer, store.buffer
    params = [k for k, p in enumerate(func.params) if func.buffer_map.get(p) is src]
    shape = [int(s.value) for s in src.shape if isinstance(s, IntImm)]
    if len(params) != 1 or len(shape) != len(src.shape) or src.dtype != dst.dtype:
        return None
    if not _copies_whole_buffer(info, load, shape):
        return None
    if _count_accesses(func, src, BufferLoad) != 1 or _count_accesses(func, dst, BufferStore) != 1:
        return None
    site = alloc_site(index, dst)
    if site is None:
        return None
    fresh = tuple(Var(f"i{k}", v.dtype) for k, v in enumerate(load.indices))
    vmap = dict(zip(load.indices, fresh))
    imap = IndexMap(fresh, tuple(substitute(i, vmap) for i in store.indices))
    if not free_vars_ok(imap):
        return None
    # Remove the preproc block with the loops that hold nothing else.
    stmt: Stmt = info.realize
    ancestors = info.ancestors
    while ancestors and isinstance(ancestors[-1], For) and ancestors[-1].body is stmt:
        stmt, ancestors = ancestors[-1], ancestors[:-1]
    try:
        func = replace_stmt(func, ancestors, stmt, None)
    except (KeyError, ValueError):
        return None
    site_block, site_ancestors = alloc_site(FuncIndex(func), dst)
    func = replace_stmt(func, site_ancestors, site_block, site_block.replace(
        alloc_buffers=tuple(b for b in site_block.alloc_buffers if b is not dst)))
    bmap = {p: (dst if b is src else b) for p, b in func.buffer_map.items()}
    func = func.replace(buffer_map=FrozenDict(bmap))
    return func, (params[0], tuple(shape), imap)


def _copies_whole_buffer(info, load: BufferLoad, shape: list[int]) -> bool:
    """The block reads ``src[v0, v1, ...]`` with its own iteration variables, in order, each
    over the whole dimension and bound to a loop of the same extent: it copies every element."""
    block, realize = info.block, info.realize
    if len(block.iter_vars) != len(shape) or \
            not (isinstance(realize.predicate, IntImm) and realize.predicate.value):
        return False
    loops = {a.loop_var: a for a in info.ancestors if isinstance(a, For)}
    bound: set[int] = set()
    for iv, index, value, n in zip(block.iter_vars, load.indices, realize.iter_values, shape):
        loop = loops.get(value) if isinstance(value, Var) else None
        if index is not iv.var or loop is None or id(loop) in bound:
            return False
        bound.add(id(loop))
        for r in (iv.dom, loop):
            lo, ext = r.min, r.extent
            if not (isinstance(lo, IntImm) and lo.value == 0 and isinstance(ext, IntImm)
                    and ext.value == n):
                return False
    return True


def _count_accesses(func: PrimFunc, buf: Buffer, kind: type) -> int:
    count = [0]

    class _V(IRVisitor):
        def visit_BufferLoad(self, node: BufferLoad) -> None:
            if kind is BufferLoad and node.buffer is buf:
                count[0] += 1
            self.generic_visit(node)

        def visit_BufferStore(self, node: BufferStore) -> None:
            if kind is BufferStore and node.buffer is buf:
                count[0] += 1
            self.generic_visit(node)

    _V().visit(func.body)
    return count[0]


# ---- packing functions (what the tuner's output check runs) -----------------------------------

def layout_pack_func(shape: Sequence[int], dtype: str, index_map: IndexMap,
                     name: str = "layout_pack") -> PrimFunc:
    """A PrimFunc ``name(src, dst)`` packing a ``shape`` tensor: ``dst[index_map(i)] = src[i]``
    (the preproc block as a function of its own)."""
    src = decl_buffer(list(shape), dtype, "src")
    dst = decl_buffer([int(s.value) for s in index_map.map_shape(src.shape)], dtype, "dst")
    loop_vars = [Var(f"ax{k}", "int32") for k in range(len(shape))]
    iter_vars = [IterVar(Range(op.const(0, "int32"), op.const(n, "int32")),
                         Var(f"v{k}", "int32"), IterType.DATA_PAR)
                 for k, n in enumerate(shape)]
    v = tuple(iv.var for iv in iter_vars)
    packed = tuple(index_map.map_indices(v))
    block = Block(tuple(iter_vars),
                  (BufferRegion(src, tuple(Range(x, op.const(1, "int32")) for x in v)),),
                  (BufferRegion(dst, tuple(Range(x, op.const(1, x.dtype)) for x in packed)),),
                  "layout_pack", BufferStore(dst, BufferLoad(src, v, dtype), packed))
    body: Stmt = BlockRealize(tuple(loop_vars), op.const(True), block)
    for lv, n in reversed(list(zip(loop_vars, shape))):
        body = For(lv, op.const(0, "int32"), op.const(int(n), "int32"), ForKind.SERIAL, body)
    root = BlockRealize((), op.const(True), Block((), (), (), "root", body))
    return prim_func([src, dst], root, name=name)


def add_layout_pack_funcs(mod: IRModule) -> IRModule:
    """``mod`` plus, for each parameter ``i`` of a PrimFunc ``f`` recorded in its
    ``layout_rewrites``, a packing function ``f__layout_pack_i(src, dst)`` (added after the
    existing functions, so a module's entry function stays first)."""
    out = mod.copy()
    for name, func in mod.items():
        if not isinstance(func, PrimFunc):
            continue
        symbol = func.attrs.get("global_symbol", name)
        for rw in layout_rewrites(func):
            pack_name = f"{symbol}{PACK_FUNC_INFIX}{rw.param_index}"
            out[pack_name] = layout_pack_func(rw.shape, rw.dtype, rw.index_map, pack_name)
    return out
