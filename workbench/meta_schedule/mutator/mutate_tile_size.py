"""MutateTileSize: move a factor between two positions of one SamplePerfectTile decision,
keeping the product (reference meta_schedule.md section 6)."""
from __future__ import annotations

from workbench.meta_schedule.mutator.mutator import Mutator, register_mutator
from workbench.tir.schedule import Trace

_MAX_REDRAWS = 64  # a redraw loop that cannot succeed must still end


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


@register_mutator("mutate-tile-size")
class MutateTileSize(Mutator):
    def apply(self, trace: Trace) -> Trace | None:
        rand = self._rng()
        cands = []
        for inst in trace.insts:
            if inst.kind.name == "EnterPostproc":
                break
            if inst.kind.name != "SamplePerfectTile":
                continue
            d = trace.decisions.get(inst)
            if d is None or len(d) < 2:
                continue
            prod = 1
            for x in d:
                prod *= int(x)
            if prod >= 2 and all(int(x) >= 1 for x in d):
                cands.append((inst, [int(x) for x in d]))
        if not cands:
            return None
        inst, tiles = cands[rand.randint(0, len(cands))]
        max_innermost = int(inst.attrs[1]) if len(inst.attrs) > 1 else -1
        n = len(tiles)
        for _ in range(_MAX_REDRAWS):
            movable = [i for i, t in enumerate(tiles) if t > 1]
            x = movable[rand.randint(0, len(movable))]
            y = rand.randint(0, n - 1)
            if y >= x:
                y += 1
            divs = _divisors(tiles[x])[1:]
            if y == n - 1 and max_innermost != -1:
                divs = [d for d in divs if d * tiles[y] <= max_innermost]
                if not divs:
                    if n <= 2:
                        return None
                    continue
            d = divs[rand.randint(0, len(divs))]
            new = list(tiles)
            new[x] //= d
            new[y] *= d
            return trace.with_decision(inst, new, remove_postproc=True)
        return None
