"""Schedule methods that move blocks: compute_at, reverse_compute_at, compute_inline,
reverse_compute_inline, and sample_compute_location (whose kind is declared with the samplers
in ``instruction.py``)."""
from __future__ import annotations

from workbench.tir.schedule.core import ScheduleCore, traced
from workbench.tir.schedule.handles import BlockRV, LoopRV
from workbench.tir.schedule.instruction import InstructionKind, register_kind
from workbench.tir.schedule.primitive import block_scope as S
from workbench.tir.schedule.primitive import compute_inline as PI
from workbench.tir.schedule.primitive import compute_location as PL
from workbench.tir.schedule.primitive.sampling import pick_compute_location

for _kind in (
    InstructionKind("ComputeAt", "compute_at", inputs=("block", "loop"),
                    attrs=("preserve_unit_loops", "index")),
    InstructionKind("ReverseComputeAt", "reverse_compute_at", inputs=("block", "loop"),
                    attrs=("preserve_unit_loops", "index")),
    InstructionKind("ComputeInline", "compute_inline", inputs=("block",)),
    InstructionKind("ReverseComputeInline", "reverse_compute_inline", inputs=("block",)),
):
    register_kind(_kind)


class ComputeLocationMethods(ScheduleCore):
    def _location_mark(self, loop: LoopRV) -> str | None:
        """"root" / "inline" when ``loop`` is one of the special locations, else None."""
        if not isinstance(loop, LoopRV):
            return None
        value = self._symbols.get(loop, loop.special)
        return value if value in (PL.ROOT, PL.INLINE) else None

    @traced("ComputeAt")
    def compute_at(self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False,
                   index: int = -1) -> None:
        """Move the producer ``block`` under ``loop`` of its consumers, with new loops covering
        just the region the consumers read in one iteration of ``loop``.

        ``index`` picks the position among the loop body's statements: -1 just before the first
        consumer, -2 just after the last producer, or an explicit valid position. Unit loops are
        dropped unless ``preserve_unit_loops``. On the special locations from
        :meth:`sample_compute_location`, root does nothing and inline is :meth:`compute_inline`.
        Raises ScheduleError for an output block, a loop that does not contain every consumer,
        a loop in another scope or above the block, or a block that is neither complete nor a
        reduction. Before/after (``compute_at(B, i)``)::

            for i, j in T.grid(8, 8):              for i in range(8):
                B[i, j] = A[i, j] * 2                  for ax0 in range(8):
            for i, j in T.grid(8, 8):        ->            B[i, ax0] = A[i, ax0] * 2
                C[i, j] = B[i, j] + 1                  for j in range(8):
                                                           C[i, j] = B[i, j] + 1
        """
        mark = self._location_mark(loop)
        name = self._block_name(block, "compute_at")
        if mark == PL.ROOT:
            return
        if mark == PL.INLINE:
            self._commit(PI.compute_inline(self._func, self._index(), name))
            return
        var = self._loop_var(loop, "compute_at")
        pos = self._int(index, "compute_at")
        self._commit(PL.compute_at(self._func, self._index(), name, var,
                                   bool(preserve_unit_loops), pos,
                                   check_dataflow=self.enable_check))

    @traced("ReverseComputeAt")
    def reverse_compute_at(self, block: BlockRV, loop: LoopRV, preserve_unit_loops: bool = False,
                           index: int = -1) -> None:
        """Move the consumer ``block`` under ``loop`` of its producers, with new loops covering
        just the region the producers write in one iteration of ``loop``.

        ``index``: -1 (default) after the last producer, just before the first consumer of the
        block; -2 right after the last producer; or an explicit valid position. On the special
        locations, root does nothing and inline is :meth:`reverse_compute_inline`. Every
        producer must be under ``loop``. Before/after (``reverse_compute_at(C, i)``)::

            for i, j in T.grid(8, 8):              for i in range(8):
                B[i, j] = A[i, j] * 2                  for j in range(8):
            for i, j in T.grid(8, 8):        ->            B[i, j] = A[i, j] * 2
                C[i, j] = B[i, j] + 1                  for ax0 in range(8):
                                                           C[i, ax0] = B[i, ax0] + 1
        """
        mark = self._location_mark(loop)
        name = self._block_name(block, "reverse_compute_at")
        if mark == PL.ROOT:
            return
        if mark == PL.INLINE:
            self._commit(PI.reverse_compute_inline(self._func, self._index(), name))
            return
        var = self._loop_var(loop, "reverse_compute_at")
        pos = self._int(index, "reverse_compute_at")
        self._commit(PL.compute_at(self._func, self._index(), name, var,
                                   bool(preserve_unit_loops), pos, reverse=True,
                                   check_dataflow=self.enable_check))

    @traced("ComputeInline")
    def compute_inline(self, block: BlockRV) -> None:
        """Substitute ``block``'s computation into every load of the buffer it writes, then
        remove the block and the buffer's allocation.

        The block must be complete (data-parallel, sole writer, not reading what it writes),
        not an output block, and be one store whose indices are distinct block variables.
        Before/after (``compute_inline(B)``)::

            B = T.alloc_buffer((8,))
            for i in range(8):                          for i in range(8):
                B[i] = A[i] * 2                  ->         C[i] = A[i] * 2 + 1
            for i in range(8):
                C[i] = B[i] + 1
        """
        name = self._block_name(block, "compute_inline")
        self._commit(PI.compute_inline(self._func, self._index(), name))

    @traced("ReverseComputeInline")
    def reverse_compute_inline(self, block: BlockRV) -> None:
        """Fold the consumer ``block`` into the single producer of the one buffer it reads;
        the producer then writes the consumer's output directly.

        The consumer must be complete, without predicate, read its produced buffer at distinct
        block variables covering its own, and the producer must be complete, not an output,
        and the buffer read by no other block. The producer may gain a predicate when it
        iterates beyond the consumer's domain. Before/after (``reverse_compute_inline(C)``)::

            B = T.alloc_buffer((8,))
            for i in range(8):                          for i in range(8):
                B[i] = A[i] * 2                  ->         C[i] = A[i] * 2 + 1   # block "B"
            for i in range(8):
                C[i] = B[i] + 1
        """
        name = self._block_name(block, "reverse_compute_inline")
        self._commit(PI.reverse_compute_inline(self._func, self._index(), name))

    @traced("SampleComputeLocation", sampling=True)
    def sample_compute_location(self, block: BlockRV, decision: int | None = None):
        """A LoopRV for where ``block`` could be computed: a loop above its first consumer, or
        the root (-1) / inline (-2) marks, drawn uniformly from TVM's candidate list. A stored
        ``decision`` no longer in the list falls back to the largest candidate below it, else
        -1. Pass the result to :meth:`compute_at`."""
        name = self._block_name(block, "sample_compute_location")
        S.scope_of(self._index(), name, "sample_compute_location")
        if decision is not None:
            # A stored decision that is still a candidate is kept (TVM's replay rule), so
            # checking that one location is enough; only a stale one needs the whole list.
            location = PL.decided_compute_location(self._func, self._index(), name,
                                                   int(decision))
            if location is not None:
                rv = LoopRV()
                self._symbols[rv] = location
                return rv, int(decision)
        candidates = PL.collect_compute_location(self._func, self._index(), name)
        chosen = pick_compute_location(self._rand, [c for c, _ in candidates],
                                       None if decision is None else int(decision))
        rv = LoopRV()
        self._symbols[rv] = dict(candidates)[chosen]
        return rv, chosen


__all__ = ["ComputeLocationMethods"]
