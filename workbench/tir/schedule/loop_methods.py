"""Schedule methods for lookups, loop transformations, loop kinds and annotations."""
from __future__ import annotations

from typing import Any, Sequence

from workbench.tir.schedule.core import ScheduleCore, _check_not_in_init, traced
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.handles import BlockRV, ExprRV, LoopRV
from workbench.tir.schedule.primitive import loops as P
from workbench.tir.stmt import ForKind


class LoopMethods(ScheduleCore):
    # -- lookups -------------------------------------------------------------------------
    def get_sblock(self, name: str, func_name: str | None = None) -> BlockRV:
        """The block called ``name`` (in ``func_name``, default the function worked on)."""
        if func_name is not None and func_name != self._func_name:
            self.work_on(func_name)
        return self._get_sblock(name, self._func_name)

    @traced("GetSBlock")
    def _get_sblock(self, name: str, func_name: str) -> BlockRV:
        index = self._index()
        if name not in index.blocks:
            raise ScheduleError("get_block", f"block {name!r}", "no block has this name; blocks "
                                f"are {index.block_order}")
        _check_not_in_init(index, name, "get_block")
        return self._new_block_rv(name)

    def get_block(self, name: str, func_name: str | None = None) -> BlockRV:
        """Alias of :meth:`get_sblock` (TVM's older name)."""
        return self.get_sblock(name, func_name)

    @traced("GetLoops")
    def get_loops(self, block: BlockRV) -> list[LoopRV]:
        """The loops above ``block`` in its scope, outermost first."""
        name = self._block_name(block, "get_loops")
        return [self._new_loop_rv(lp.loop_var) for lp in self._index().blocks[name].loops]

    @traced("GetChildBlocks")
    def get_child_blocks(self, block_or_loop: BlockRV | LoopRV) -> list[BlockRV]:
        target = self._block_or_loop(block_or_loop, "get_child_blocks")
        return [self._new_block_rv(n) for n in P.get_child_blocks(self._index(), target)]

    @traced("GetProducers")
    def get_producers(self, block: BlockRV) -> list[BlockRV]:
        name = self._block_name(block, "get_producers")
        return [self._new_block_rv(n) for n in P.producers_consumers(self._index(), name)[0]]

    @traced("GetConsumers")
    def get_consumers(self, block: BlockRV) -> list[BlockRV]:
        name = self._block_name(block, "get_consumers")
        return [self._new_block_rv(n) for n in P.producers_consumers(self._index(), name)[1]]

    # -- loop transformations -------------------------------------------------------------
    @traced("Split")
    def split(self, loop: LoopRV, factors: Sequence[int | ExprRV | None],
              preserve_unit_iters: bool = True, disable_predication: bool = False
              ) -> list[LoopRV]:
        """Split ``loop`` into ``len(factors)`` nested loops (one factor may be None, inferred).

        Factors that do not divide the extent add a predicate to the blocks below.
        """
        var = self._loop_var(loop, "split")
        ints = [self._int(f, "split") for f in factors]
        func, new_vars = P.split(self._func, self._index(), var, ints, preserve_unit_iters,
                                 disable_predication)
        self._commit(func)
        return [self._new_loop_rv(v) for v in new_vars]

    @traced("Fuse")
    def fuse(self, *loops: LoopRV, preserve_unit_iters: bool = True) -> LoopRV:
        """Fuse directly nested loops into one."""
        loops = _flatten_args(loops)
        vars_ = [self._loop_var(lp, "fuse") for lp in loops]
        func, fused = P.fuse(self._func, self._index(), vars_, preserve_unit_iters)
        self._commit(func)
        return self._new_loop_rv(fused)

    @traced("Reorder")
    def reorder(self, *ordered_loops: LoopRV) -> None:
        """Put the given loops in this order (they must be in one chain of nested loops)."""
        ordered_loops = _flatten_args(ordered_loops)
        vars_ = [self._loop_var(lp, "reorder") for lp in ordered_loops]
        self._commit(P.reorder(self._func, self._index(), vars_))

    @traced("AddUnitLoop")
    def add_unit_loop(self, block_or_loop: BlockRV | LoopRV) -> LoopRV:
        target = self._block_or_loop(block_or_loop, "add_unit_loop")
        func, var = P.add_unit_loop(self._func, self._index(), target)
        self._commit(func)
        return self._new_loop_rv(var)

    def _set_kind(self, loop: LoopRV, kind: str, name: str) -> None:
        var = self._loop_var(loop, name)
        self._commit(P.set_loop_kind(self._func, self._index(), var, kind,
                                     check_dataflow=self.enable_check))

    @traced("Parallel")
    def parallel(self, loop: LoopRV) -> None:
        """Run the loop's iterations on the thread pool (data-parallel loops only)."""
        self._set_kind(loop, ForKind.PARALLEL, "parallel")

    @traced("Vectorize")
    def vectorize(self, loop: LoopRV) -> None:
        """Turn the loop into SIMD vector code (constant extent, data-parallel)."""
        self._set_kind(loop, ForKind.VECTORIZED, "vectorize")

    @traced("Unroll")
    def unroll(self, loop: LoopRV) -> None:
        self._set_kind(loop, ForKind.UNROLLED, "unroll")

    # -- annotations -----------------------------------------------------------------------
    @traced("Annotate")
    def annotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str, ann_val: Any) -> None:
        """Attach ``ann_key = ann_val`` to a block or loop (an ExprRV value is resolved)."""
        target = self._block_or_loop(block_or_loop, "annotate")
        if not isinstance(ann_key, str):
            raise TypeError(f"annotate: ann_key must be a string, got {ann_key!r}")
        value = self._int(ann_val, "annotate") if isinstance(ann_val, ExprRV) else ann_val
        if not isinstance(value, (int, float, str, bool, list, tuple, type(None))):
            raise TypeError(f"annotate: unsupported annotation value {ann_val!r}")
        self._commit(P.annotate(self._func, self._index(), target, ann_key, value))

    @traced("Unannotate")
    def unannotate(self, block_or_loop: BlockRV | LoopRV, ann_key: str) -> None:
        target = self._block_or_loop(block_or_loop, "unannotate")
        self._commit(P.unannotate(self._func, self._index(), target, ann_key))


def _flatten_args(items: Sequence[Any]) -> tuple[Any, ...]:
    """``fuse(a, b)`` and ``fuse([a, b])`` both work, as in TVM."""
    if len(items) == 1 and isinstance(items[0], (list, tuple)):
        return tuple(items[0])
    return tuple(items)


__all__ = ["LoopMethods"]
