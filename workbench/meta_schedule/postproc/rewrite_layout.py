"""RewriteLayout: TVM's layout-rewrite postproc (reference meta_schedule.md section 5 item 4).

For every *layout-free* buffer of the scheduled function -- the parameters listed (by index) in
the PrimFunc attr ``layout_free_buffers`` (topi's conv2d and dense mark their weights so, and
``te.create_prim_func`` moves the mark to that attr), plus buffers named in a block annotation
``layout_free_placeholders`` -- the postproc

1. finds the block that reads it (or, when the buffer first goes through a chain of
   cache-read-like copies, the block reading the end of the chain);
2. asks :func:`workbench.tir.schedule.analysis.suggest_index_map` for a layout that follows the
   reading block's tiled loop nest (skipping the buffer when the access is not analysable);
3. inserts ``cache_read(block, i, "global")`` -- the *preproc* block, a copy of the weight --,
   annotates it ``meta_schedule.layout_rewrite_preproc = 1`` (TVM: True) and applies
   ``transform_layout`` with the suggested map to the copy, so the kernel reads a buffer
   packed in its loop order. The map tiles the buffer exactly (SuggestIndexMap checks that),
   so it is a bijection and transform_layout is told so (``assume_injective_transform``):
   enumerating every element to prove it cost ~7 ms per candidate.

A weight that a preproc block already reads -- packed by a schedule rule in the design space
(``schedule_rule/pack_weight.py``: the layouts the int8 / bf16 micro-kernels need) -- is left
as it is.

Everything goes through traced Schedule methods (GetSBlock, CacheRead, Annotate,
TransformLayout), so the candidate's trace replays it. Any failure rejects the candidate
(``apply`` returns False), as in TVM; a function without layout-free buffers is untouched.

What happens next:

- the tuner's builder (``LocalBuilder``'s default build) runs
  :class:`workbench.tir.transform.RemoveWeightLayoutRewriteBlock`: the preproc block is
  removed and the weight parameter *becomes* the packed buffer, so the measured kernel reads
  pre-packed weights and does not pay for packing. ``ArgInfo.from_entry_func(mod,
  remove_preproc=True)`` reports the packed shape, so the runner allocates packed inputs, and
  the output check packs the reference's original-layout weight with the packing function the
  builder compiles next to the kernel (see :mod:`workbench.meta_schedule.runner.reference`);
- ``compile_tir`` / ``compile_relax`` replay the trace as is: the compiled function keeps the
  preproc block, takes the weight in its original layout and packs it on every call -- except
  where a Relax build passes a constant (a bound parameter) as that weight:
  :class:`workbench.relax.transform.PrepackConstantWeights` then strips the block and packs
  the constant once at compile time (TVM's SplitLayoutRewritePreproc + constant folding).
"""
from __future__ import annotations

from workbench.meta_schedule.postproc.postproc import Postproc, register_postproc
from workbench.tir.buffer import Buffer
from workbench.tir.function import PrimFunc
from workbench.tir.schedule import Schedule
from workbench.tir.schedule.analysis import suggest_read_layout
from workbench.tir.analysis import blocks_under
from workbench.tir.transform.remove_weight_layout_rewrite_block import PREPROC_ANNOTATION

__all__ = ["RewriteLayout", "LAYOUT_REWRITE_PREPROC", "layout_free_buffers",
           "cache_read_chain"]

#: The annotation marking a preproc (weight packing) block, as TVM spells it (defined by the
#: pass that strips those blocks).
LAYOUT_REWRITE_PREPROC = PREPROC_ANNOTATION


@register_postproc("rewrite-layout")
class RewriteLayout(Postproc):
    def apply(self, sch: Schedule) -> bool:
        try:
            return _rewrite_layout(sch)
        except Exception:  # noqa: BLE001 - TVM: any failure rejects the candidate
            return False


def layout_free_buffers(func: PrimFunc) -> list[Buffer]:
    """The parameters named by ``layout_free_buffers`` and the buffers of every block's
    ``layout_free_placeholders`` annotation, without repeats, in that order."""
    out: list[Buffer] = []
    for i in func.attrs.get("layout_free_buffers", ()) or ():
        i = int(i)
        if not 0 <= i < len(func.params) or func.params[i] not in func.buffer_map:
            raise ValueError(f"layout_free_buffers names parameter {i}, which is not a buffer "
                             f"parameter of a function with {len(func.params)} parameter(s)")
        out.append(func.buffer_map[func.params[i]])

    for block in blocks_under(func.body, post_order=True):
        value = block.annotations.get("layout_free_placeholders", ())
        for buf in (value if isinstance(value, (tuple, list)) else (value,)):
            if isinstance(buf, Buffer):
                out.append(buf)
    seen: set[int] = set()
    return [b for b in out if not (id(b) in seen or seen.add(id(b)))]


def cache_read_chain(func: PrimFunc, buffer: Buffer) -> list[str]:
    """Names of the blocks copying ``buffer`` onward (TVM's ``GetCacheReadChain``): each one
    has no init, reads only the previous buffer and writes one allocated buffer of the same
    shape, so one index map fits every buffer of the chain."""
    params = {id(b) for b in func.buffer_map.values()}
    chain: list[str] = []
    cur = [buffer]

    for block in blocks_under(func.body):
        if (block.init is None and len(block.reads) == 1 and len(block.writes) == 1
                and block.reads[0].buffer is cur[0]):
            dst = block.writes[0].buffer
            if id(dst) not in params and _same_shape(dst, cur[0]):
                chain.append(block.name_hint)
                cur[0] = dst
    return chain


def _same_shape(a: Buffer, b: Buffer) -> bool:
    from workbench.ir.structural import structural_equal
    return len(a.shape) == len(b.shape) and all(
        structural_equal(x, y) for x, y in zip(a.shape, b.shape))


def _packed_already(func: PrimFunc, buffer: Buffer) -> bool:
    """Does a preproc block read ``buffer`` directly (a schedule rule packed it, e.g. for a
    micro-kernel: ``schedule_rule/pack_weight.py``)?"""
    return any(PREPROC_ANNOTATION in blk.annotations and
               any(r.buffer is buffer for r in blk.reads) for blk in blocks_under(func.body))


def _rewrite_layout(sch: Schedule) -> bool:
    for buffer in layout_free_buffers(sch.func_index().func):
        if _packed_already(sch.func_index().func, buffer):
            continue
        chain = cache_read_chain(sch.func_index().func, buffer)
        if not chain:
            # The common case: an anchor block (conv2d, dense) reads the weight directly.
            found = suggest_read_layout(sch.func_index().func, buffer)
            if found is None:
                continue
            name, read_index, index_map = found
            anchor = sch.get_sblock(name)
            _add_preproc(sch, anchor, read_index)
            sch.transform_layout(anchor, ("read", read_index), index_map,
                                 assume_injective_transform=True)
            continue
        # The weight goes through copies first: lay out the copy the anchor reads, then carry
        # the same layout back along the chain, the preproc block going before its start.
        last = sch.func_index().blocks[chain[-1]].block
        found = suggest_read_layout(sch.func_index().func, last.writes[0].buffer)
        if found is None:
            continue
        name, read_index, index_map = found
        sch.transform_layout(sch.get_sblock(name), ("read", read_index), index_map,
                             assume_injective_transform=True)
        for k in range(len(chain) - 1, -1, -1):
            block = sch.get_sblock(chain[k])
            if k == 0:
                _add_preproc(sch, block, 0)
            sch.transform_layout(block, ("read", 0), index_map,
                                 assume_injective_transform=True)
    return True


def _add_preproc(sch: Schedule, block, read_index: int) -> None:
    preproc = sch.cache_read(block, read_index, "global")
    # 1, not True: trace JSON stores booleans as ints, and a replay must give the same IR.
    sch.annotate(preproc, LAYOUT_REWRITE_PREPROC, 1)
