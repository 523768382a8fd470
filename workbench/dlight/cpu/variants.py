"""Neighbouring register tiles of a default schedule: what the tuner measures first.

A default rule picks one :class:`~workbench.dlight.cpu.tiling.TilePlan` from a model of the
machine (registers, FMAs per loaded value). The model is right about the shape of a good
kernel and only roughly right about its sizes: on a real core, 4 output-channel blocks x 6
pixels may lose to 2 x 8, a 12-wide row tile to a 14-wide one. :func:`tile_variants` lists the
plans around the chosen one -- other register-tile sizes (``U``, ``W``, and ``V`` where no
packed layout depends on it) within the target's accumulator budget -- the tile with ``U`` and
``W`` swapped first (a tie of the model), then nearest first, so
``tune_relax`` can measure the default kernel's neighbours before its generic search: a
model whose kernels already come from the default rules improves from its first trials
instead of from wherever random tiling lands.
"""
from __future__ import annotations

import math
from dataclasses import replace

from workbench.dlight.analysis import BlockFacts
from workbench.dlight.base import CPUInfo
from workbench.dlight.cpu.tiling import TilePlan, blocked_accumulator_budget

__all__ = ["tile_variants", "nearest_first_key", "swapped_then_nearest_key", "MAX_TILE_U"]

#: The largest register tile along ``u`` a variant may have.
MAX_TILE_U = 12


def _budget(plan: TilePlan, cpu: CPUInfo) -> int:
    """Accumulator registers a variant may use: the rule's own budget (with a blocked third
    dimension :func:`~.tiling.blocked_accumulator_budget`, 24 of 32 on AVX-512 and 8 of 16
    on AVX2; else ``cpu.accumulators``)."""
    if plan.w is not None:
        return blocked_accumulator_budget(cpu)
    return cpu.accumulators


def _u_options(extent: int | None, limit: int) -> list[int]:
    top = min(limit, MAX_TILE_U) if extent is None else min(limit, MAX_TILE_U, extent)
    return list(range(1, top + 1))


def _w_options(extent: int | None) -> list[int]:
    if extent is None:
        return [1]
    return [w for w in (1, 2, 4) if extent % w == 0]


def _v_options(plan: TilePlan, f: BlockFacts, lanes: int) -> list[int]:
    """Vector tiles to try: only when no packed read and no tensor intrinsic depends on ``V``
    (a packed weight's layout is the tile's), whole registers that divide the extent."""
    if plan.pack or plan.intrin is not None or plan.V % lanes:
        return [plan.V]
    ext = f.extent(plan.v)
    out = [r * lanes for r in (1, 2, 4) if ext is None or ext % (r * lanes) == 0]
    return out or [plan.V]


def nearest_first_key(sizes: tuple[int, ...], base: tuple[int, ...]) -> tuple[float, int]:
    """Sort key of a register tile's ``sizes`` around the rule's ``base`` (the same
    dimensions in the same order): nearest first by the log ratios of its sizes, ties to the
    larger tile. The second part of :func:`swapped_then_nearest_key`, which orders
    :func:`tile_variants` and the Winograd rule's variants."""
    return (sum(abs(math.log(a / b)) for a, b in zip(sizes, base)), -math.prod(sizes))


def swapped_then_nearest_key(sizes: tuple[int, ...], base: tuple[int, ...]
                             ) -> tuple[bool, float, int]:
    """Sort key of a register tile whose first two sizes are its ``u`` and ``w`` tiles (in
    either order, as in ``base``): first the tile with those two swapped -- the same
    accumulators, the same FMAs per loaded value, a tie the rule's model of the machine
    breaks by order alone, which only a measurement can settle (ResNet-18's 14x14 Winograd
    products on a Zen 3: 4 tiles x 2 channel blocks, the rule's, 797-814 us; 2 x 4, tenth in
    nearest order and so never measured by the tuner, 690-705) -- then
    :func:`nearest_first_key`."""
    swapped = tuple(sizes[:2]) == tuple(base[1::-1]) and tuple(sizes[2:]) == tuple(base[2:])
    return (not swapped, *nearest_first_key(sizes, base))


def tile_variants(plan: TilePlan, f: BlockFacts, cpu: CPUInfo, limit: int) -> list[TilePlan]:
    """``plan`` first, then up to ``limit - 1`` other register tiles of block ``f``: the one
    with ``U`` and ``W`` swapped, then nearest first (ties: the larger tile)
    (:func:`swapped_then_nearest_key`). Plans that unroll a constant transform (Winograd's) or
    tensorize keep their one tile."""
    if limit <= 1 or plan.unroll_reduction or plan.intrin is not None:
        return [plan]
    lanes = cpu.lanes(f.store.buffer.dtype)
    budget = _budget(plan, cpu)
    u_ext = f.extent(plan.u) if plan.u is not None else None
    w_ext = f.extent(plan.w) if plan.w is not None else None
    seen = {(plan.V, plan.U, plan.W)}
    out: list[TilePlan] = []
    for V in _v_options(plan, f, lanes):
        regs = -(-V // lanes)
        for W in (_w_options(w_ext) if plan.w is not None else [1]):
            us = _u_options(u_ext, budget // (regs * W)) if plan.u is not None else [1]
            for U in us:
                if (V, U, W) in seen or regs * W * U > budget:
                    continue
                seen.add((V, U, W))
                # A plan without a u variable and a 1-register V gains a u only from the rule.
                out.append(replace(plan, V=V, U=U, W=W))
    out.sort(key=lambda p: swapped_then_nearest_key((p.U, p.W, p.V), (plan.U, plan.W, plan.V)))
    return [plan] + out[:limit - 1]
