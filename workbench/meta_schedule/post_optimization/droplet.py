"""Droplet search: a coordinate search around the best record, measured in batches.

The idea is TVM's post-optimization (Droplet search, reference wave2 section 5): start from
the best measured trace and walk its knobs (:mod:`.space`) one coordinate at a time. Each batch
holds the incumbent itself and its neighbours ``step`` values away along every knob:

- the incumbent is re-measured in every batch, and a neighbour replaces it only when it is
  faster *in the same batch* by more than ``min_gain`` (a relative margin): on a shared machine
  a neighbour measured in a quiet moment must not win against a stored time taken under load,
  or the other way round;
- after a move the search restarts at step 1 around the new incumbent;
- when every neighbour failed (did not apply, build or run), it looks further out
  (``step + 1``), as TVM's speculation does; when some ran and none was faster, it stops;
- points already measured are never measured again, and the whole search spends at most
  ``max_trials`` measurements (the incumbent's re-measurements included).

The search only decides what to measure; ``measure`` (given by the caller) builds, runs and
records the traces. Unlike TVM, results are matched to their traces one to one (TVM's
shifted-index quirk cannot occur), and a failed point never scores.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Sequence

from workbench.meta_schedule.post_optimization.space import decision_key, knobs_of, neighbours
from workbench.tir.schedule import Trace

__all__ = ["DropletSearch", "DropletResult", "Batch"]

#: ``measure(traces) -> mean seconds per trace (None: failed)``, in the order given.
Measure = Callable[[Sequence[Trace]], Sequence["float | None"]]


@dataclass
class Batch:
    """One measured batch: the incumbent's time in it (None: its re-measurement failed), the
    time the neighbours were compared with (that one, else the incumbent's last known time),
    each neighbour's move and time, and the move accepted (with its time), if any."""

    step: int
    incumbent_secs: float | None
    reference: float | None
    moves: list[tuple[str, float | None]]
    accepted: str | None = None
    accepted_secs: float | None = None


@dataclass
class DropletResult:
    """What the search found. ``best_trace`` is the final incumbent (``start`` when nothing
    won); ``best_secs`` its time in the batch that made it the incumbent (the start's first
    re-measurement otherwise); ``start_secs`` the start's time in the first batch."""

    start: Trace
    best_trace: Trace
    start_secs: float | None
    best_secs: float | None
    trials: int = 0
    batches: list[Batch] = field(default_factory=list)

    @property
    def improved(self) -> bool:
        return self.best_trace is not self.start

    @property
    def speedup(self) -> float:
        """The product over accepted moves of (incumbent / winner), each ratio taken within one
        batch: the gain as measured under equal conditions (1.0 when nothing improved)."""
        gain = 1.0
        for b in self.batches:
            if b.accepted_secs is not None and b.reference:
                gain *= b.reference / b.accepted_secs
        return gain


class DropletSearch:
    """``DropletSearch(max_trials, min_gain).run(start, measure)``; see the module docstring."""

    def __init__(self, max_trials: int, min_gain: float = 0.02) -> None:
        if isinstance(max_trials, bool) or not isinstance(max_trials, int) or max_trials < 2:
            raise ValueError(f"DropletSearch: max_trials must be an int >= 2 (the incumbent "
                             f"and one neighbour), got {max_trials!r}")
        if not 0.0 <= float(min_gain) < 1.0:
            raise ValueError(f"DropletSearch: min_gain must be in [0, 1), got {min_gain!r}")
        self.max_trials = max_trials
        self.min_gain = float(min_gain)

    def run(self, start: Trace, measure: Measure, recorded_secs: float | None = None,
            should_stop: Callable[[], bool] = lambda: False) -> DropletResult:
        """Search around ``start`` (a trace with decisions). ``recorded_secs`` (the start's
        stored time) is the reference only while the incumbent's re-measurement fails;
        ``should_stop()`` is asked before each batch (a Stop button)."""
        knobs = knobs_of(start)
        result = DropletResult(start, start, None, None)
        if not knobs:
            return result
        max_step = max(len(k.values(start.decisions[k.inst])) for k in knobs)
        visited = {decision_key(start)}
        incumbent, incumbent_secs = start, _valid(recorded_secs)
        step = 1
        while step < max_step and self.max_trials - result.trials >= 2 and not should_stop():
            cands = [(t, m) for t, m in neighbours(incumbent, step)
                     if decision_key(t) not in visited]
            if not cands:
                step += 1
                continue
            cands = cands[:self.max_trials - result.trials - 1]
            visited.update(decision_key(t) for t, _ in cands)
            times = list(measure([incumbent] + [t for t, _ in cands]))
            if len(times) != len(cands) + 1:
                raise RuntimeError(f"DropletSearch: measure returned {len(times)} times for "
                                   f"{len(cands) + 1} traces")
            result.trials += len(times)
            ref = _valid(times[0])
            if ref is not None:
                incumbent_secs = ref
            if result.start_secs is None and incumbent is start:
                result.start_secs = ref
            batch = Batch(step, ref, incumbent_secs,
                          [(m, _valid(s)) for (_, m), s in zip(cands, times[1:])])
            result.batches.append(batch)
            scored = [(s, i) for i, s in enumerate(times[1:]) if _valid(s) is not None]
            if not scored:
                step += 1  # every neighbour failed: look further out
                continue
            secs, i = min(scored)
            if incumbent_secs is not None and secs < incumbent_secs * (1.0 - self.min_gain):
                incumbent, incumbent_secs = cands[i][0], secs
                batch.accepted, batch.accepted_secs = cands[i][1], secs
                result.best_trace, result.best_secs = incumbent, secs
                step = 1
                continue
            break
        if result.best_secs is None:
            result.best_secs = result.start_secs
        return result


def _valid(secs: float | None) -> float | None:
    if secs is None or not math.isfinite(secs) or secs <= 0 or secs >= 1e9:
        return None
    return float(secs)
