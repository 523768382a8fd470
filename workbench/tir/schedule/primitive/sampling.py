"""Sampling primitives: the random choices a schedule (and the tuner) makes.

Each returns its decision, so a trace can store it and replay it; a given decision is validated
(and repaired where TVM repairs it) instead of drawn.
"""
from __future__ import annotations

from typing import Sequence

from workbench.tir.schedule.handles import RandomEngine


def factorize(n: int) -> list[tuple[int, int]]:
    """Prime factorisation as (prime, exponent) pairs."""
    out: list[tuple[int, int]] = []
    p = 2
    while p * p <= n:
        e = 0
        while n % p == 0:
            n //= p
            e += 1
        if e:
            out.append((p, e))
        p += 1
    if n > 1:
        out.append((n, 1))
    return out


def _random_composition(rand: RandomEngine, total: int, parts: int) -> list[int]:
    """A uniformly random way to write ``total`` as ``parts`` non-negative integers
    (stars and bars: choose parts-1 distinct cut points among total+parts-1)."""
    slots = total + parts - 1
    cuts: list[int] = []
    while len(cuts) < parts - 1:
        c = rand.randint(0, slots)
        if c not in cuts:
            cuts.append(c)
    cuts.sort()
    out, prev = [], -1
    for c in cuts + [slots]:
        out.append(c - prev - 1)
        prev = c
    return out


def _draw_perfect_tile(rand: RandomEngine, extent: int, n: int) -> list[int]:
    tiles = [1] * n
    for prime, exp in factorize(extent):
        if n == 2:
            x = rand.randint(0, exp + 1)
            tiles[0] *= prime ** x
            tiles[1] *= prime ** (exp - x)
        elif exp == 1:
            tiles[rand.randint(0, n)] *= prime
        else:
            for slot, e in enumerate(_random_composition(rand, exp, n)):
                tiles[slot] *= prime ** e
    return tiles


def sample_perfect_tile(rand: RandomEngine, extent: int | None, n: int,
                        max_innermost_factor: int, decision: Sequence[int] | None) -> list[int]:
    """``n`` factors whose product is ``extent`` (TVM's algorithm and decision repair)."""
    if extent is None:
        return [-1] + [1] * (n - 1)
    if decision is not None:
        d = [int(x) for x in decision]
        if len(d) != n:
            raise ValueError(f"a perfect-tile decision needs {n} factors, got {d}")
        length = extent
        for i in range(n - 1, 0, -1):
            if d[i] <= 0 or length % d[i] != 0:
                d[i] = length
            length //= d[i]
        d[0] = length
        return d
    while True:
        tiles = _draw_perfect_tile(rand, extent, n)
        if max_innermost_factor == -1 or tiles[-1] <= max_innermost_factor:
            return tiles


def sample_categorical(rand: RandomEngine, candidates: Sequence, probs: Sequence[float],
                       decision: int | None) -> int:
    """The index of the chosen candidate."""
    if len(candidates) != len(probs) or not candidates:
        raise ValueError(f"sample_categorical needs as many probabilities as candidates, got "
                         f"{len(candidates)} candidates and {len(probs)} probabilities")
    if decision is not None:
        idx = int(decision)
        if not 0 <= idx < len(candidates):
            raise ValueError(f"categorical decision {idx} is outside 0..{len(candidates) - 1}")
        return idx
    total = float(sum(probs))
    if total <= 0 or any(p < 0 for p in probs):
        raise ValueError(f"probabilities must be non-negative and not all zero: {list(probs)}")
    x = rand.uniform() * total
    acc = 0.0
    for i, p in enumerate(probs):
        acc += p
        if x < acc:
            return i
    return len(probs) - 1


def pick_compute_location(rand: RandomEngine, candidates: Sequence[int],
                          decision: int | None) -> int:
    """TVM's replay rule: keep a listed decision, else the largest listed one below it, else -1."""
    if decision is not None:
        if decision in candidates:
            return decision
        below = [c for c in candidates if c < decision]
        return max(below) if below else -1
    return candidates[rand.randint(0, len(candidates))]
