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

A layout-free weight (the function marks it so: a constant of the model) is packed through a
*preproc* block as above. Any other weight is packed inside the kernel: the same cache_read
and transform_layout without the annotation, so the copy runs on every call and the tuner
measures its cost (for an ``M x N x K`` product the copy is ``N x K`` of ``M x N x K`` work).
A weight is packed when only this block reads it, and each of its dimensions is indexed by a
distinct block iter var: exactly one spatial var ``j`` (the output column / channel,
N % 16 == 0) and reduction vars, the last of which is ``k`` (K % P == 0). The other
dimensions keep their order in front: ``W[k, j]`` (``matmul``) and ``W[j, k]`` (``dense``)
become ``[N/16, K/P, 16, P]``, a conv2d HWIO weight ``W[rh, rw, rc, o]`` becomes
``[KH, KW, O/16, I/P, 16, P]`` (OHWI likewise).
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


def packed_weight_map(ndim: int, j_dim: int, k_dim: int, pack_k: int,
                      dtype: str = "int32") -> IndexMap:
    """The packing map of an ``ndim``-d weight whose dimension ``j_dim`` is the output column
    and ``k_dim`` the packed reduction: the other dimensions in order, then
    ``(j // 16, k // P, j % 16, k % P)``."""
    if ndim < 2 or j_dim == k_dim or not (0 <= j_dim < ndim and 0 <= k_dim < ndim):
        raise ValueError(f"packed_weight_map: j_dim {j_dim} and k_dim {k_dim} must be distinct "
                         f"dimensions of a weight of rank {ndim} >= 2")
    vs = tuple(Var(f"i{d}", dtype) for d in range(ndim))
    j, k = vs[j_dim], vs[k_dim]
    c16, cp = op.const(16, dtype), op.const(pack_k, dtype)
    rest = tuple(v for d, v in enumerate(vs) if d not in (j_dim, k_dim))
    return IndexMap(vs, rest + (op.floordiv(j, c16), op.floordiv(k, cp), op.floormod(j, c16),
                                op.floormod(k, cp)))


def _packable_reads(sch: Schedule, block: BlockRV, dtype: str, pack_k: int
                    ) -> list[tuple[int, int, int, int]]:
    """(read index, rank, j dimension, k dimension) of every read of the block that can be
    packed (module docstring)."""
    blk = A.block_info(sch, block).block
    kinds = {iv.var: (iv.iter_type, A.const_int(iv.dom.extent)) for iv in blk.iter_vars}
    loads = A.loads_in(blk.body)
    out = []
    for idx, region in enumerate(blk.reads):
        buf = region.buffer
        if buf.dtype != dtype or len(buf.shape) < 2:
            continue
        mine = [ld for ld in loads if ld.buffer is buf]
        if len(mine) != 1 or _readers(sch, buf) != 1:
            continue
        ix = mine[0].indices
        if not all(isinstance(v, Var) and v in kinds for v in ix) or \
                len({id(v) for v in ix}) != len(ix):
            continue
        spatial = [d for d, v in enumerate(ix) if kinds[v][0] == IterType.DATA_PAR]
        reduce = [d for d, v in enumerate(ix) if kinds[v][0] == IterType.COMM_REDUCE]
        if len(spatial) != 1 or len(spatial) + len(reduce) != len(ix) or not reduce:
            continue
        j_dim, k_dim = spatial[0], reduce[-1]
        n, k = kinds[ix[j_dim]][1], kinds[ix[k_dim]][1]
        if n is None or k is None or n % 16 or k % pack_k:
            continue
        out.append((idx, len(ix), j_dim, k_dim))
    return out


def _readers(sch: Schedule, buf) -> int:
    index = sch.func_index()
    return sum(1 for info in index.blocks.values()
               if any(r.buffer is buf for r in info.block.reads))


def pack_weight(sch: Schedule, block: BlockRV, dtype: str, pack_k: int) -> list[Schedule]:
    """Copies of ``sch``, one per read of the block that can be packed (module docstring), with
    that ``dtype`` operand packed ``[.., N/16, K/P, 16, P]`` through a copy block: a preproc
    block when the operand is layout-free (those come first), else a copy that runs in the
    kernel. Empty when the block has no such read. The block's handle stays valid in each
    copy. (With two packable reads -- bf16 x bf16 -- only the caller's intrinsic match tells
    which is the weight.)"""
    from workbench.meta_schedule.postproc.rewrite_layout import layout_free_buffers
    free = {id(b) for b in layout_free_buffers(sch.func_index().func)}
    reads = A.block_info(sch, block).block.reads
    hits = sorted(_packable_reads(sch, block, dtype, pack_k),
                  key=lambda hit: id(reads[hit[0]].buffer) not in free)
    out = []
    for idx, ndim, j_dim, k_dim in hits:
        new = sch.copy()
        try:
            copy = new.cache_read(block, idx, "global")
            if id(reads[idx].buffer) in free:
                new.annotate(copy, PREPROC_ANNOTATION, 1)
            new.transform_layout(block, ("read", idx),
                                 packed_weight_map(ndim, j_dim, k_dim, pack_k),
                                 assume_injective_transform=True)
        except ScheduleError:
            continue
        out.append(new)
    return out
