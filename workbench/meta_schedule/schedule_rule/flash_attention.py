"""The tuning space of the fused attention kernel (:mod:`workbench.topi.nn.attention`): the
custom rule ``flash_attention`` (``ApplyCustomRule`` hands it the block annotated
``schedule_rule = "flash_attention"``).

Generic rules have nothing to tile in the kernel (one opaque block whose body the generator
wrote), so the space is the generator's own parameters: the query block (rows sharing one
packed key block: reuse against scratch size and parallel grain) and the key block (the
score tile's width: rescaling passes against cache footprint) are sampled with
``sample_categorical`` and applied by ``sch.regenerate``; the loops over (batch, head, query
block) are then fused into one parallel loop, as the default schedule does.
"""
from __future__ import annotations

from workbench.meta_schedule.schedule_rule.apply_custom_rule import register_custom_schedule_rule
from workbench.tir.schedule import BlockRV, Schedule
from workbench.topi.nn.attention import (
    BLOCK_NAME, LANES, SCHEDULE_RULE, block_sizes_of, spec_of,
)

__all__ = ["flash_attention_space", "block_candidates"]

QUERY_BLOCKS = (8, 16, 32, 64)
KEY_BLOCKS = (32, 64, 128)


def block_candidates(seq_q: int | str, seq_kv: int | str, default: tuple[int, int]
                     ) -> tuple[list[int], list[int]]:
    """The query and key block sizes worth trying: those no larger than the (rounded-up)
    sequences (all of them for a symbolic length, a name), and the defaults."""
    rows = -(-seq_q // 4) * 4 if isinstance(seq_q, int) else max(QUERY_BLOCKS)
    keys = -(-seq_kv // LANES) * LANES if isinstance(seq_kv, int) else max(KEY_BLOCKS)
    qs = sorted({b for b in QUERY_BLOCKS if b <= rows} | {default[0]})
    ks = sorted({b for b in KEY_BLOCKS if b <= keys} | {default[1]})
    return qs, ks


def flash_attention_space(sch: Schedule, block: BlockRV) -> list[Schedule]:
    """The custom rule: sampled block sizes, regenerated kernel, parallel outer loops."""
    func = sch.mod[sch.func_working_on]
    spec = spec_of(func)
    qs, ks = block_candidates(spec.seq_q, spec.seq_kv, block_sizes_of(func))
    bq = sch.sample_categorical(qs, [1.0 / len(qs)] * len(qs))
    bk = sch.sample_categorical(ks, [1.0 / len(ks)] * len(ks))
    sch.regenerate(block, [bq, bk])
    block = sch.get_sblock(BLOCK_NAME)
    loops = sch.get_loops(block)
    sch.parallel(sch.fuse(*loops) if len(loops) > 1 else loops[0])
    return [sch]


register_custom_schedule_rule(SCHEDULE_RULE, flash_attention_space, override=True)
