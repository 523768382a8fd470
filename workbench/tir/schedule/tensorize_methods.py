"""Schedule method for tensorization: tensorize (with blockize, in reduction_methods)."""
from __future__ import annotations

from workbench.tir.schedule.core import ScheduleCore, traced
from workbench.tir.schedule.handles import BlockRV, LoopRV
from workbench.tir.schedule.instruction import InstructionKind, register_kind
from workbench.tir.schedule.primitive import tensorize as PT

register_kind(InstructionKind("Tensorize", "tensorize", inputs=("block_or_loop",),
                              attrs=("tensor_intrin", "preserve_unit_iters")))


class TensorizeMethods(ScheduleCore):
    @traced("Tensorize")
    def tensorize(self, block_or_loop: BlockRV | LoopRV, tensor_intrin: str,
                  preserve_unit_iters: bool = True) -> None:
        """Replace the computation of ``block_or_loop`` by the tensor intrinsic registered as
        ``tensor_intrin`` (``tir.TensorIntrin.register``). A loop is first blockized (its
        subtree becomes block ``<block>_o``, as ``blockize``); the block must then match the
        intrinsic's description structurally, with its buffers' sub-regions bound to the
        implementation's buffers (see ``primitive/tensorize.py``). Recorded as ``Tensorize``
        with attributes ``[tensor_intrin, preserve_unit_iters]``; BlockRVs of a given block stay
        valid. Typical use, after splitting the ``j`` and ``k`` loops of an int8 dense by 16 and
        4 and reordering them innermost::

            sch.tensorize(j_1, "dot_16x4_vnni")
        """
        if not isinstance(tensor_intrin, str):
            raise TypeError(f"tensorize: tensor_intrin must be the name of a registered "
                            f"intrinsic, got {tensor_intrin!r}")
        if isinstance(block_or_loop, BlockRV):
            key: object = self._block_name(block_or_loop, "tensorize")
        elif isinstance(block_or_loop, LoopRV):
            key = self._loop_var(block_or_loop, "tensorize")
        else:
            raise TypeError(f"tensorize: expected a BlockRV or LoopRV, got {block_or_loop!r}")
        func, _ = PT.tensorize(self._func, self._index(), key, tensor_intrin,
                               bool(preserve_unit_iters))
        self._commit(func)


__all__ = ["TensorizeMethods"]
