"""RewriteParallelVectorizeUnroll: turn the root block's ``meta_schedule.parallel`` /
``vectorize`` / ``unroll_explicit`` / ``unroll_implicit`` annotations into loop kinds and unroll
pragmas (reference meta_schedule.md section 5 item 2).

Per top-level block: fuse the outermost run of data-parallel loops (until their product passes
the parallel limit) and mark it parallel; fuse the innermost run of data-parallel loops whose
accesses stay contiguous (up to the vector limit) and mark it vectorized; put
``pragma_auto_unroll_max_step`` / ``pragma_unroll_explicit`` on the outermost loop of a block
that is not all-spatial. A schedule error rejects the candidate.

Weight-packing *preproc* blocks (``meta_schedule.layout_rewrite_preproc``, made in the design
space by ``schedule_rule/pack_weight.py``) are left alone, as TVM's RewriteLayout preproc
blocks are (that postproc runs after this one): the builder strips them
(RemoveWeightLayoutRewriteBlock needs their plain loop nest) and constant weights are packed
once at compile time.
"""
from __future__ import annotations

from dataclasses import dataclass

from workbench.meta_schedule import analysis as A
from workbench.meta_schedule.postproc.postproc import Postproc, register_postproc
from workbench.tir.schedule import Schedule, ScheduleError
from workbench.tir.stmt import For, ForKind, IterType
from workbench.tir.transform.remove_weight_layout_rewrite_block import PREPROC_ANNOTATION

_KEYS = ("meta_schedule.parallel", "meta_schedule.vectorize", "meta_schedule.unroll_explicit",
         "meta_schedule.unroll_implicit")


@dataclass
class _Parsed:
    max_parallel_extent: int = -1
    max_vectorize_extent: int = -1
    unroll_max_step: int = -1
    unroll_explicit: int = -1


@register_postproc("rewrite-parallel-vectorize-unroll")
class RewriteParallelVectorizeUnroll(Postproc):
    def apply(self, sch: Schedule) -> bool:
        try:
            parsed = self._take_annotations(sch)
            if parsed is None:
                return True
            root = sch.get_sblock(A.root_block_name(sch.func_index()))
            for block in sch.get_child_blocks(root):
                if PREPROC_ANNOTATION not in A.block_info(sch, block).block.annotations:
                    self._rewrite_block(sch, block, parsed)
        except ScheduleError:
            return False
        return True

    @staticmethod
    def _take_annotations(sch: Schedule) -> _Parsed | None:
        root_name = A.root_block_name(sch.func_index())
        anns = sch.func_index().blocks[root_name].block.annotations
        present = [k for k in _KEYS if k in anns]
        if not present:
            return None
        parsed = _Parsed()
        root = sch.get_sblock(root_name)
        for key in present:
            value = int(anns[key])
            if key == "meta_schedule.parallel":
                parsed.max_parallel_extent = value
            elif key == "meta_schedule.vectorize":
                parsed.max_vectorize_extent = value
            else:
                parsed.unroll_max_step = value
                parsed.unroll_explicit = int(key.endswith("explicit"))
            sch.unannotate(root, key)
        return parsed

    def _rewrite_block(self, sch: Schedule, block, parsed: _Parsed) -> None:
        loops = sch.get_loops(block)
        if not loops:
            return
        info = A.block_info(sch, block)
        fors = info.loops
        n = len(fors)
        types = A.loop_iter_types(fors)
        rewritable = [t == IterType.DATA_PAR and _plain(lp) and A.single_child(lp)
                      and A.const_int(lp.extent) is not None for t, lp in zip(types, fors)]
        n_par = self._num_parallel(fors, types, parsed.max_parallel_extent)
        max_fusible = self._max_fusible(info, fors)
        n_vec = self._num_vectorize(fors, types, parsed.max_vectorize_extent, max_fusible)
        tensorized = _tensorized(info.block)
        if tensorized:
            # The intrinsic's implementation is vector code already: loops around it stay
            # scalar (TVM leaves them to the intrinsic too).
            n_vec = 0
        if n_par + n_vec > n:
            n_par = max(0, n - n_vec)
        if all(rewritable) and max_fusible >= n and parsed.max_parallel_extent > 0 \
                and parsed.max_vectorize_extent > 0 and not tensorized:
            fused = sch.fuse(*loops) if n > 1 else loops[0]
            total = 1
            for lp in fors:
                total *= A.const_int(lp.extent)
            # A divisor keeps the vector loop free of a predicate (TVM splits by the limit).
            inner = _largest_divisor_at_most(total, parsed.max_vectorize_extent)
            outer, vec = sch.split(fused, factors=[None, inner])
            sch.parallel(outer)
            sch.vectorize(vec)
        else:
            if n_par > 0:
                par = sch.fuse(*loops[:n_par]) if n_par > 1 else loops[0]
                sch.parallel(par)
            if n_vec > 0:
                tail = loops[n - n_vec:]
                vec = sch.fuse(*tail) if n_vec > 1 else tail[0]
                sch.vectorize(vec)
        if parsed.unroll_max_step > 0 and not A.is_spatial(info.block):
            outermost = sch.get_loops(block)[0]
            sch.annotate(outermost, "pragma_auto_unroll_max_step", parsed.unroll_max_step)
            sch.annotate(outermost, "pragma_unroll_explicit", parsed.unroll_explicit)

    @staticmethod
    def _num_parallel(fors: list[For], types: list[int], limit: int) -> int:
        if limit <= 0:
            return 0
        count, prod = 0, 1
        for lp, t in zip(fors, types):
            ext = A.const_int(lp.extent)
            if t != IterType.DATA_PAR or not _plain(lp) or ext is None:
                break
            count += 1
            prod *= ext
            if prod > limit or not A.single_child(lp):
                break
        return count if prod > 1 else 0

    @staticmethod
    def _num_vectorize(fors: list[For], types: list[int], limit: int, max_fusible: int) -> int:
        if limit <= 0:
            return 0
        count, prod = 0, 1
        for lp, t in zip(reversed(fors), reversed(types)):
            if count >= max_fusible:
                break
            ext = A.const_int(lp.extent)
            if t != IterType.DATA_PAR or not _plain(lp) or not A.single_child(lp) \
                    or ext is None or prod * ext > limit:
                break
            count += 1
            prod *= ext
        return count if prod > 1 else 0

    @staticmethod
    def _max_fusible(info, fors: list[For]) -> int:
        """How many innermost loops keep every access contiguous (see module docstring)."""
        best = len(fors)
        for strides in A.loop_strides(info, fors):
            fusible, prev = 0, None
            for i in range(len(fors) - 1, -1, -1):
                s = strides[i]
                if s == 0:
                    fusible += 1
                    continue
                if prev is None:
                    if s != 1:
                        break
                elif s != strides[prev] * (A.const_int(fors[prev].extent) or 0):
                    break
                fusible += 1
                prev = i
            best = min(best, fusible)
        return best


def _tensorized(block) -> bool:
    """Is the block (to be) replaced by a tensor intrinsic?"""
    return bool(block.match_buffers) or "meta_schedule.auto_tensorize" in block.annotations


def _plain(loop: For) -> bool:
    return loop.kind == ForKind.SERIAL and not loop.annotations and loop.thread_binding is None


def _largest_divisor_at_most(n: int, limit: int) -> int:
    for d in range(min(n, limit), 0, -1):
        if n % d == 0:
            return d
    return 1
