"""Random-variable handles a schedule hands out: BlockRV, LoopRV and ExprRV.

A handle is an opaque object; the :class:`~workbench.tir.schedule.Schedule` that made it maps
it to a block name, a loop variable, or an integer. ``LoopRV.root()`` and ``LoopRV.inline()``
are the two special compute locations that ``sample_compute_location`` may return.
"""
from __future__ import annotations

from workbench.ir.node import node
from workbench.tir.expr import Var


class BlockRV:
    """A handle to a block."""

    __slots__ = ("__weakref__",)

    def __repr__(self) -> str:
        return f"BlockRV({id(self):#x})"


class LoopRV:
    """A handle to a loop (or to one of the special locations root / inline)."""

    __slots__ = ("special", "__weakref__")

    def __init__(self, special: str | None = None) -> None:
        self.special = special

    @staticmethod
    def root() -> "LoopRV":
        return _ROOT

    @staticmethod
    def inline() -> "LoopRV":
        return _INLINE

    def __reduce__(self) -> tuple:
        # The root / inline marks are singletons compared by identity; keep them so in pickles.
        if self.special == "root":
            return (LoopRV.root, ())
        if self.special == "inline":
            return (LoopRV.inline, ())
        return (LoopRV, (None,))

    def __repr__(self) -> str:
        return f"LoopRV({self.special or hex(id(self))})"


_ROOT = LoopRV("root")
_INLINE = LoopRV("inline")


@node
class ExprRV(Var):
    """A handle to an integer chosen by sampling; usable where an integer expression is."""

    name: str = "v"
    dtype: str = "int32"

    def __index__(self) -> int:
        raise TypeError("an ExprRV has no value by itself; use sch.get(rv)")


def _mix64(x: int) -> int:
    """SplitMix64's finaliser: spreads nearby integers over the whole 64-bit range."""
    x = (x + 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return x ^ (x >> 31)


class RandomEngine:
    """A small, seedable linear congruential generator (minstd), so traces replay exactly
    and forked schedules draw independent streams."""

    MOD = 2147483647
    MUL = 48271

    def __init__(self, seed: int | None = None) -> None:
        self.seed(seed)

    def seed(self, seed: int | None) -> None:
        if seed is None or seed == -1:
            import random
            seed = random.SystemRandom().randrange(1, self.MOD)
        # Scramble first: a raw LCG seeded with a small integer yields tiny first draws
        # (seed * 48271 / 2^31), so nearby seeds would all pick the first candidate.
        seed = _mix64(int(seed)) % self.MOD
        self.state = seed if seed != 0 else 1

    def next(self) -> int:
        self.state = (self.state * self.MUL) % self.MOD
        return self.state

    def uniform(self) -> float:
        """A float in [0, 1)."""
        return (self.next() - 1) / (self.MOD - 1)

    def randint(self, lo: int, hi: int) -> int:
        """An int in [lo, hi)."""
        return lo + self.next() % (hi - lo)

    def fork_seed(self) -> int:
        return (self.next() * 32767) % 1999999973
