"""Packing a layout-free matmul weight for the dot-product micro-kernels, inside the design
space.

The int8 and bf16 micro-kernels (AVX-512 VNNI / BF16 register-blocked, AMX tiles) read the
weight packed ``[N/16, K/P, 16, P]`` (P = 4 for int8, 2 for bf16: 16 output columns x P
consecutive k per 64-byte row). The RewriteLayout postproc cannot produce that layout: it lays
a weight out in the order of the tiled loops, which never interleaves P values of ``k`` inside a
column. So the micro-kernel rule packs the weight itself, before tiling, with the same traced
primitives RewriteLayout uses:

1. ``cache_read(block, i, "global")`` -- the *preproc* block copying the weight --, annotated
   ``meta_schedule.layout_rewrite_preproc = 1``;
2. ``transform_layout(block, ("read", i), <(k, j) -> (j // 16, k // P, j % 16, k % P)>)``.

From there everything is as for RewriteLayout's preproc blocks: the builder strips the block
(``RemoveWeightLayoutRewriteBlock``) so the tuner measures the kernel on a pre-packed weight,
a Relax build packs constant weights once (``PrepackConstantWeights``), and
``compile_tir`` without constants packs on each call. RewriteLayout leaves a weight that a
preproc block already reads alone.

Only a 2-d weight that the function marks layout-free, that only this block reads, indexed by
one spatial and one reduction iter var (``W[k, j]`` as in ``matmul``, or ``W[j, k]`` as in
``dense``) with N % 16 == 0 and K % P == 0, is packed.
"""
from __future__ import annotations

from workbench.meta_schedule import analysis as A
from workbench.tir import op
from workbench.tir.expr import Var
from workbench.tir.schedule import BlockRV, Schedule, ScheduleError
from workbench.tir.schedule.index_map import IndexMap
from workbench.tir.stmt import IterType
from workbench.tir.transform.remove_weight_layout_rewrite_block import PREPROC_ANNOTATION

__all__ = ["packed_weight_map", "pack_weight"]


def packed_weight_map(order: str, pack_k: int, dtype: str = "int32") -> IndexMap:
    """The packing map of a 2-d weight indexed ``order`` ("kj" or "jk"):
    ``(j // 16, k // P, j % 16, k % P)``."""
    a, b = Var("i0", dtype), Var("i1", dtype)
    k, j = (a, b) if order == "kj" else (b, a)
    c16, cp = op.const(16, dtype), op.const(pack_k, dtype)
    return IndexMap((a, b), (op.floordiv(j, c16), op.floordiv(k, cp), op.floormod(j, c16),
                             op.floormod(k, cp)))


def _weight_read(sch: Schedule, block: BlockRV, dtype: str, pack_k: int
                 ) -> tuple[int, str] | None:
    """(read index, "kj" | "jk") of the block's layout-free weight that can be packed."""
    from workbench.meta_schedule.postproc.rewrite_layout import layout_free_buffers
    func = sch._func
    free = {id(b) for b in layout_free_buffers(func)}
    info = A.block_info(sch, block)
    blk = info.block
    kinds = {iv.var: (iv.iter_type, A.const_int(iv.dom.extent)) for iv in blk.iter_vars}
    loads = A.loads_in(blk.body)
    for idx, region in enumerate(blk.reads):
        buf = region.buffer
        if id(buf) not in free or buf.dtype != dtype or len(buf.shape) != 2:
            continue
        mine = [ld for ld in loads if ld.buffer is buf]
        if len(mine) != 1 or _readers(sch, buf) != 1:
            continue
        ix = mine[0].indices
        if not all(isinstance(v, Var) and v in kinds for v in ix) or ix[0] is ix[1]:
            continue
        (t0, e0), (t1, e1) = kinds[ix[0]], kinds[ix[1]]
        if (t0, t1) == (IterType.COMM_REDUCE, IterType.DATA_PAR):
            order, n, k = "kj", e1, e0
        elif (t0, t1) == (IterType.DATA_PAR, IterType.COMM_REDUCE):
            order, n, k = "jk", e0, e1
        else:
            continue
        if n is None or k is None or n % 16 or k % pack_k:
            continue
        return idx, order
    return None


def _readers(sch: Schedule, buf) -> int:
    index = sch._index()
    return sum(1 for info in index.blocks.values()
               if any(r.buffer is buf for r in info.block.reads))


def pack_weight(sch: Schedule, block: BlockRV, dtype: str, pack_k: int) -> Schedule | None:
    """A copy of ``sch`` with the block's layout-free ``dtype`` weight packed
    ``[N/16, K/P, 16, P]`` through a preproc block (module docstring); None when the block
    has no such weight. The block's handle stays valid in the copy."""
    found = _weight_read(sch, block, dtype, pack_k)
    if found is None:
        return None
    idx, order = found
    out = sch.copy()
    try:
        preproc = out.cache_read(block, idx, "global")
        out.annotate(preproc, PREPROC_ANNOTATION, 1)
        out.transform_layout(block, ("read", idx), packed_weight_map(order, pack_k),
                             assume_injective_transform=True)
    except ScheduleError:
        return None
    return out
