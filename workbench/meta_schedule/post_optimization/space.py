"""The coordinates of the post-optimization search: the knobs of one trace and its neighbours.

A *point* is a trace's sampling decisions. Its knobs (one coordinate each, in instruction
order, everything before ``EnterPostproc``):

- **tile factors**: for every ``SamplePerfectTile`` decision ``[f0, f1, ..., fn-1]`` of a loop of
  extent ``E = f0 * ... * fn-1``, one knob per inner position ``i >= 1``. Its ordered values are
  the divisors ``d`` of ``E / prod(f_j, j != 0, i)`` (the innermost capped by the instruction's
  ``max_innermost_factor``); moving to another value keeps the other inner factors and lets the
  outermost factor absorb the change, so every point is a perfect tiling (TVM's Droplet varies
  each factor over powers of two and skips the many products that no longer divide);
- **categorical choices**: every ``SampleCategorical`` decision (the unroll depth of
  ``ParallelizeVectorizeUnroll``), ordered by candidate index.

``neighbours(trace, step)`` lists, for each knob and each direction, the point ``step`` values
away along that knob (no wrap-around: the two ends of a knob are far apart, not neighbours).
``SampleComputeLocation`` decisions and the annotations' literal values are not varied (as
TVM's Droplet leaves compute locations alone).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workbench.tir.schedule import Trace
from workbench.tir.schedule.instruction import Instruction

__all__ = ["Knob", "knobs_of", "neighbours", "decision_key"]


@dataclass(frozen=True)
class Knob:
    """One coordinate: position ``pos`` of a tile decision, or a categorical decision
    (``pos == -1``) of instruction ``inst``."""

    inst: Instruction
    pos: int

    @property
    def kind(self) -> str:
        return "categorical" if self.pos < 0 else "tile"

    def values(self, decision: Any) -> list[Any]:
        """The knob's ordered values given the instruction's current decision."""
        if self.pos < 0:
            return list(range(len(self.inst.attrs[0])))
        tiles = [int(x) for x in decision]
        # the room left for this factor: the extent over the other inner factors
        room = 1
        for t in tiles:
            room *= t
        for j in range(1, len(tiles)):
            if j != self.pos:
                room //= tiles[j]
        cap = _max_innermost(self.inst) if self.pos == len(tiles) - 1 else -1
        return [d for d in _divisors(room) if cap <= 0 or d <= cap]

    def current(self, decision: Any) -> Any:
        return int(decision) if self.pos < 0 else int(decision[self.pos])

    def moved(self, decision: Any, value: Any) -> Any:
        """The instruction's decision with this knob set to ``value``."""
        if self.pos < 0:
            return int(value)
        tiles = [int(x) for x in decision]
        extent = 1
        for t in tiles:
            extent *= t
        tiles[self.pos] = int(value)
        inner = 1
        for t in tiles[1:]:
            inner *= t
        tiles[0] = extent // inner
        return tiles

    def describe(self, decision: Any) -> str:
        if self.pos < 0:
            return f"{self.inst.kind.name}={self.current(decision)}"
        return f"{self.inst.kind.name}[{self.pos}]={self.current(decision)}"


def _divisors(n: int) -> list[int]:
    """The divisors of ``n`` in ascending order (pairs up to the square root)."""
    small, large = [], []
    d = 1
    while d * d <= n:
        if n % d == 0:
            small.append(d)
            if d * d != n:
                large.append(n // d)
        d += 1
    return small + large[::-1]


def _max_innermost(inst: Instruction) -> int:
    return int(inst.attrs[1]) if len(inst.attrs) > 1 else -1


def knobs_of(trace: Trace) -> list[Knob]:
    """The knobs of ``trace`` (see the module docstring), in instruction order."""
    out: list[Knob] = []
    for inst in trace.insts:
        name = inst.kind.name
        if name == "EnterPostproc":
            break
        decision = trace.decisions.get(inst)
        if decision is None:
            continue
        if name == "SamplePerfectTile":
            tiles = [int(x) for x in decision]
            if len(tiles) < 2 or any(t < 1 for t in tiles):
                continue  # a symbolic extent: nothing to move
            out.extend(Knob(inst, i) for i in range(1, len(tiles)))
        elif name == "SampleCategorical" and len(inst.attrs[0]) > 1:
            out.append(Knob(inst, -1))
    return out


def decision_key(trace: Trace) -> tuple:
    """A hashable form of the decisions that define a point (for the visited set)."""
    key = []
    for inst in trace.insts:
        if inst.kind.name == "EnterPostproc":
            break
        d = trace.decisions.get(inst)
        if d is not None:
            key.append(tuple(int(x) for x in d) if isinstance(d, (list, tuple)) else d)
    return tuple(key)


def neighbours(trace: Trace, step: int) -> list[tuple[Trace, str]]:
    """Traces (cut at ``EnterPostproc``) ``step`` values away from ``trace`` along one knob,
    each with a short description of the move; knobs in order, down before up."""
    out: list[tuple[Trace, str]] = []
    for knob in knobs_of(trace):
        decision = trace.decisions[knob.inst]
        values = knob.values(decision)
        here = values.index(knob.current(decision))
        for direction in (-1, 1):
            k = here + direction * step
            if not 0 <= k < len(values):
                continue
            new = knob.moved(decision, values[k])
            move = f"{knob.describe(decision)} -> {values[k]}"
            out.append((trace.with_decision(knob.inst, new, remove_postproc=True), move))
    return out
