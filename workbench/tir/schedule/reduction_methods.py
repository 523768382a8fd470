"""Schedule methods for the reduction and blocking families: decompose_reduction, rfactor,
blockize."""
from __future__ import annotations

from typing import Sequence

from workbench.tir.schedule.core import ScheduleCore, _check_not_in_init, traced
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.handles import BlockRV, LoopRV
from workbench.tir.schedule.instruction import InstructionKind, register_kind
from workbench.tir.schedule.primitive import blockize as PB
from workbench.tir.schedule.primitive import reduction as PR

for _kind in (
    InstructionKind("DecomposeReduction", "decompose_reduction", inputs=("block", "loop")),
    InstructionKind("RFactor", "rfactor", inputs=("loop",), attrs=("factor_axis",)),
    InstructionKind("Blockize", "blockize", inputs=("target",), attrs=("preserve_unit_iters",)),
):
    register_kind(_kind)


class ReductionMethods(ScheduleCore):
    @traced("DecomposeReduction")
    def decompose_reduction(self, block: BlockRV | str, loop: LoopRV) -> BlockRV:
        """Move the init of reduction ``block`` into a new block ``<name>_init`` placed right
        before ``loop``; the block loses its init and is renamed ``<name>_update`` (its handles
        follow it). Returns the init block.

        ``loop`` must be an ancestor of the block, outside every loop feeding a reduction iter
        var. The init block gets copies (``<loop>_init``) of the loops at or below ``loop`` that
        its spatial bindings use. Before / after ``decompose_reduction(C, i)``::

            for i, j, k in T.grid(8, 4, 16):          for i_init, j_init in T.grid(8, 4):
                with T.block("C"):                        with T.block("C_init"):
                    ...                                       C[v_i, v_j] = T.float32(0)
                    with T.init():                    for i, j, k in T.grid(8, 4, 16):
                        C[v_i, v_j] = T.float32(0)        with T.block("C_update"):
                    C[v_i, v_j] = C[v_i, v_j] + ...           C[v_i, v_j] = C[v_i, v_j] + ...
        """
        name = self._block_arg(block, "decompose_reduction")
        var = self._loop_var(loop, "decompose_reduction")
        func, init_name, update_name = PR.decompose_reduction(self._func, self._index(), name,
                                                              var)
        self._commit(func)
        self._rename_block(name, update_name)
        return self._new_block_rv(init_name)

    @traced("RFactor")
    def rfactor(self, loop: LoopRV, factor_axis: int) -> BlockRV:
        """Factor the reduction under reduction loop ``loop``: an rfactor block ``<name>_rf``
        reduces into a new buffer ``<buf>_rf`` with an extra dimension (at ``factor_axis``, of
        the loop's extent) indexed by the loop, and a write-back block (keeping the original
        name, and the loop) reduces that dimension into the original buffer. Returns the rfactor
        block. Recognised reducers: sum, product, min, max (see ``register_reducer``).

        Before / after ``rfactor(k_1, 0)`` on a row sum with ``k`` split into ``k_0, k_1``::

            for i, k_0, k_1 in T.grid(8, 4, 4):      for i, k_0, k_1 in T.grid(8, 4, 4):
                with T.block("B"):                       with T.block("B_rf"):
                    ...                                      vk_1, v_i, vk_0 = ...
                    B[v_i] = B[v_i] + A[v_i, k]              B_rf[vk_1, v_i] += A[v_i, vk_0*4+vk_1]
                                                     for i, k_1 in T.grid(8, 4):
                                                         with T.block("B"):
                                                             vk_1, v_i = T.axis.remap("RS", ...)
                                                             B[v_i] = B[v_i] + B_rf[vk_1, v_i]
        """
        var = self._loop_var(loop, "rfactor")
        axis = self._int(factor_axis, "rfactor")
        func, rf_name = PR.rfactor(self._func, self._index(), var, axis)
        self._commit(func)
        return self._new_block_rv(rf_name)

    @traced("Blockize")
    def blockize(self, target: LoopRV | Sequence[BlockRV], preserve_unit_iters: bool = True
                 ) -> BlockRV:
        """Wrap the subtree under loop ``target`` (or the consecutive sibling subtrees holding
        the blocks ``target``) in a new block whose iter vars cover the outer part of each inner
        binding; the inner block keeps the inner part. Returns the new block ``<name>_o`` (for a
        list of blocks: ``outer_<name>_<name>_``).

        Each inner binding must be a plain var, a constant, an expression of only outer or only
        inner loops, or ``outer * c + inner`` with the inner part a dense affine sum of inner
        loops. Before / after ``blockize(i_1)`` with ``i`` split into ``i_0, i_1`` (16 x 4)::

            for i_0, i_1 in T.grid(16, 4):           for i_0 in range(16):
                with T.block("B"):                       with T.block("B_o"):
                    v_i = T.axis.spatial(                    v_i_o = T.axis.spatial(16, i_0)
                        64, i_0 * 4 + i_1)                   for i_1 in range(4):
                    B[v_i] = A[v_i] * 2                          with T.block("B"):
                                                                     v_i_i = T.axis.spatial(4, i_1)
                                                                     B[v_i_o * 4 + v_i_i] = ...
        """
        if isinstance(target, LoopRV):
            key: object = self._loop_var(target, "blockize")
        elif isinstance(target, (list, tuple)) and target:
            key = [self._block_name(b, "blockize") for b in target]
        else:
            raise TypeError(f"blockize: target must be a LoopRV or a non-empty list of BlockRVs, "
                            f"got {target!r}")
        func, name = PB.blockize(self._func, self._index(), key, bool(preserve_unit_iters))
        self._commit(func)
        return self._new_block_rv(name)

    # -- helpers ---------------------------------------------------------------------------
    def _block_arg(self, block: BlockRV | str, prim: str) -> str:
        """A block given as a BlockRV or by name (TVM accepts both in decompose_reduction)."""
        if isinstance(block, str):
            if block not in self._index().blocks:
                raise ScheduleError(prim, f"block {block!r}", "no block has this name")
            _check_not_in_init(self._index(), block, prim)
            return block
        return self._block_name(block, prim)

    def _rename_block(self, old: str, new: str) -> None:
        """Handles name blocks; a primitive that renames a block moves its handles along."""
        for rv, key in self._symbols.items():
            if isinstance(rv, BlockRV) and key == old:
                self._symbols[rv] = new


__all__ = ["ReductionMethods"]
