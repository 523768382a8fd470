"""The tuning space of a Winograd convolution's transforms
(:mod:`workbench.topi.nn.conv2d_winograd`): the custom rule ``winograd_transform`` (TVM's
``winograd_data_pack`` / ``winograd_inverse`` rules for llvm).

Each transform block (``data_pack_rows``, ``data_pack``, ``inverse_rows``, ``inverse``) has
loops ``[k, a, P, C/B, B, r]``: two alpha-or-m sized ones (one of them the output of the
constant matrix product), the tiles ``P``, the channel blocks and their lanes ``B``, and the
alpha-term reduction ``r``. Its coefficient is a select over ``(k, r)`` of a constant matrix,
which folds to constants (and its zeros vanish) only once ``k``, ``a`` and ``r`` are unrolled.
So the rule, as TVM's: the tiles split in two by ``sample_perfect_tile`` (the searched
decision), the loops reordered ``P0, C/B, P1, k, a, r, B`` (the lanes innermost, for the
vectorizer), and the three small loops unrolled; one schedule, so a Winograd kernel has the
design spaces of its product (``bgemm``, MultiLevelTiling's three) instead of 3^5.
A block of another shape is left as it is.
"""
from __future__ import annotations

from workbench.meta_schedule.schedule_rule.apply_custom_rule import register_custom_schedule_rule
from workbench.tir.analysis import const_int
from workbench.tir.schedule import BlockRV, Schedule
from workbench.tir.stmt import IterType
from workbench.topi.nn.conv2d_winograd import TRANSFORM_RULE

__all__ = ["winograd_transform_space"]

#: The largest unrolled extent: F(4x4, 3x3)'s alpha.
_SMALL = 6


def winograd_transform_space(sch: Schedule, block: BlockRV) -> list[Schedule]:
    """The custom rule: tiles split (sampled), small loops unrolled, lanes innermost."""
    loops = sch.get_loops(block)
    kinds = [iv.iter_type for iv in sch.get(block).iter_vars]
    extents = [const_int(sch.get(lp).extent) for lp in loops]
    if len(loops) != 6 or kinds != [IterType.DATA_PAR] * 5 + [IterType.COMM_REDUCE] or \
            any(e is None for e in extents) or \
            max(extents[0], extents[1], extents[5]) > _SMALL:
        return [sch]
    k, a, p, c, lanes, r = loops
    p_outer, p_inner = sch.split(p, sch.sample_perfect_tile(p, n=2, max_innermost_factor=64))
    sch.reorder(p_outer, c, p_inner, k, a, r, lanes)
    for loop in (k, a, r):
        sch.unroll(loop)
    return [sch]


register_custom_schedule_rule(TRANSFORM_RULE, winograd_transform_space, override=True)
