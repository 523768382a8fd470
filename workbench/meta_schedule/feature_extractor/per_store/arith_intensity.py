"""Group 3 (10 features): the arithmetic-intensity curve of a store (TVM's ``group3::Feature``).

Arithmetic intensity is float ops per byte touched. Taking the loops from the innermost
outward, level ``k`` covers the innermost ``k + 1`` loops: ``compute[k]`` is the float ops of
one iteration times the product of their extents, ``memory[k]`` the bytes all buffers of the
store touch under them (group 2's ``touched_bytes``). The curve ``compute[k] / memory[k]``
against ``compute[k]`` is sampled at ``s / n`` of the total compute, ``s = 1..n``,
interpolating linearly between levels, and each sample goes through ``slog``. All zeros when
the store does no float arithmetic or has no loops.
"""
from __future__ import annotations

from workbench.meta_schedule.feature_extractor.per_store.loop_context import LoopNest, slog


def _ratio(compute: float, memory: float) -> float:
    # A level with nothing touched (numel clamped to 0) contributes no intensity; TVM would
    # divide by zero there.
    return compute / memory if memory > 0 else 0.0


def arith_intensity_curve(n_samples: int, nest: LoopNest, touched_bytes: list[int],
                          float_ops_per_iter: float) -> list[float]:
    """``n_samples`` points; ``touched_bytes[i]`` is for loops ``i..`` relaxed (outer -> inner).

    ``float_ops_per_iter`` is the group-1 float count of one innermost iteration.
    """
    frames = nest.frames
    n = len(frames)
    curve = [0.0] * n_samples
    memory = [float(touched_bytes[n - 1 - k]) for k in range(n)]
    compute: list[float] = []
    total = float(float_ops_per_iter)
    for f in reversed(frames):
        if f.extent is not None:
            total *= f.extent
        compute.append(total)
    if total <= 0 or not compute:
        return curve
    p = 0
    for s in range(n_samples):
        target = (s + 1) / n_samples * total
        while p < n and compute[p] < target - 1e-4:
            p += 1
        p = min(p, n - 1)
        if p == 0:
            curve[s] = slog(_ratio(compute[0], memory[0]))
            continue
        base = _ratio(compute[p - 1], memory[p - 1])
        span = compute[p] - compute[p - 1]
        slope = (_ratio(compute[p], memory[p]) - base) / span if span else 0.0
        curve[s] = slog(base + slope * (target - compute[p - 1]))
    return curve


def group3_names(n_samples: int) -> list[str]:
    return [f"arith_intensity_curve_{i}" for i in range(n_samples)]


__all__ = ["arith_intensity_curve", "group3_names"]
