"""Trace replay in worker processes: the Python stand-in for TVM's ThreadedTraceApply.

TVM replays and postprocesses candidate traces on ``num_threads`` threads. Our schedule
primitives are Python, so threads would share one GIL; instead a batch of replays is cut into
chunks that a :class:`workbench.workers.WorkerPool` of fresh interpreters runs. A worker returns each finished schedule as
one pickle of ``(mod, trace, handle table)``: handles keep their identity inside one pickle, so
the rebuilt :class:`~workbench.tir.schedule.Schedule` is a full schedule (its handles resolve,
its trace replays), the same object an in-process replay would have produced.

Replays are deterministic given the trace and seed, and seeds are drawn by the caller before
the batch is cut, so results do not depend on the number of workers or on their timing.

Nothing here may take the session down: if a worker dies or a chunk cannot be shipped, that
chunk is replayed in-process (the pool replaces the dead worker); if no worker can start at
all, one warning says why and replays stay in-process. Each such condition is logged once per
pool, not once per batch.
"""
from __future__ import annotations

import atexit
import logging
import pickle
import threading
from typing import TYPE_CHECKING, Any, Sequence

from workbench.workers import WorkerPool, WorkerStartError

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.search_strategy.base import TraceApplier
    from workbench.tir.schedule import Schedule, Trace

__all__ = ["ReplayPool", "get_replay_pool", "shutdown_replay_pool", "ReplayJob",
           "extract_features_ahead"]

ReplayJob = tuple["Trace", int, bool]   # (trace, seed, keep_decisions)

_LOG = logging.getLogger("workbench.meta_schedule")

# A chunk of replays is one message each way; a few chunks per worker balance the load.
_CHUNKS_PER_WORKER = 4


# ---- worker side ------------------------------------------------------------------------------

_WORKER_APPLIERS: dict[str, "TraceApplier"] = {}


def _worker_replay(key: str, setup: bytes, jobs: list[ReplayJob],
                   features: Any = None) -> list[tuple]:
    """Replay ``jobs`` on the workload ``setup`` (pickled ``(mod, postprocs)``, cached by
    ``key``). Each result is ``("ok", pickle of (mod, func_name, trace, symbols, rng),
    shipped feature rows or None)``, ``("replay", message)`` or ``("postproc", index,
    message)``. With a per-store ``features`` config, the rows of each replayed schedule
    are computed here too (the search scores every candidate it replays)."""
    from workbench.ir.structural import structural_hash
    from workbench.meta_schedule.search_strategy.base import TraceApplier

    applier = _WORKER_APPLIERS.get(key)
    if applier is None:
        mod, postprocs = pickle.loads(setup)
        applier = TraceApplier(mod, postprocs)
        _WORKER_APPLIERS.clear()   # one workload at a time; keep memory flat
        _WORKER_APPLIERS[key] = applier
    out: list[tuple] = []
    for trace, seed, keep in jobs:
        n_replay = applier.replay_failures
        n_post = list(applier.postproc_failures)
        applier.failures.first = None  # each failure's own message goes back
        sch = applier.apply(trace, seed, keep_decisions=keep)
        if sch is not None:
            # the structural hash first: its memo travels in the module's pickle, and the
            # search asks for it of every candidate (deduplication, the feature cache), ~4 ms
            # of hashing each that the tuning process no longer does itself
            structural_hash(sch.mod)
            rows = _features_of(sch, features)
            out.append(("ok", pickle.dumps(sch.snapshot(), protocol=pickle.HIGHEST_PROTOCOL),
                        rows))
        elif applier.replay_failures != n_replay:
            out.append(("replay", applier.failures.first))
        else:
            i = next(i for i, (a, b) in enumerate(zip(n_post, applier.postproc_failures))
                     if a != b)
            out.append(("postproc", i, applier.failures.first))
    return out


def _worker_features(features: Any, mods: list) -> list[tuple | None]:
    """The shipped per-store rows of each module of ``mods`` (None where extraction failed)."""
    return [_rows_or_none(mod, features) for mod in mods]


def _features_of(sch: "Schedule", features: Any) -> tuple | None:
    return None if features is None else _rows_or_none(sch.mod, features)


def _rows_or_none(mod: Any, features: Any) -> tuple | None:
    from workbench.meta_schedule.feature_extractor.per_store.extractor import rows_for_shipping
    try:
        return rows_for_shipping(mod, features)
    except Exception:  # noqa: BLE001 - the tuning process extracts it itself, and reports
        return None


# ---- parent side ------------------------------------------------------------------------------

class ReplayPool:
    """A lazily started pool of ``num_workers`` replay processes (see the module docstring)."""

    def __init__(self, num_workers: int) -> None:
        if num_workers < 1:
            raise ValueError(f"ReplayPool: num_workers must be >= 1, got {num_workers}")
        self.num_workers = num_workers
        self._workers = WorkerPool(num_workers, name="wb-replay")
        self._lock = threading.Lock()
        self._unshippable: set[str] = set()   # workload keys workers failed to take
        self.disabled: str | None = None      # why replays stay in-process, if they do
        self._warned: set[str] = set()

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the live replay workers (none before the first heavy batch)."""
        return self._workers.pids

    def shutdown(self) -> None:
        with self._lock:
            self._workers.shutdown()

    def prestart(self) -> None:
        """Start the workers in the background (no-op when they run or replays stay
        in-process): a search whose replays turned out heavy calls it, so that the pool is
        up by its next batch."""
        if self.disabled is None:
            self._workers.prestart()

    @property
    def starting(self) -> bool:
        """Are workers launched but none up yet (a prestart under way)?"""
        return self.disabled is None and bool(self._workers.pids) and not self.ready

    @property
    def ready(self) -> bool:
        """Are workers up (their start-up paid)?"""
        return self.disabled is None and self._workers.ready > 0

    def _warn_once(self, what: str, message: str, *args: object) -> None:
        # A condition the pool handles itself is worth one line per pool, not one per batch.
        if what not in self._warned:
            self._warned.add(what)
            _LOG.warning(message, *args)

    def replay(self, applier: "TraceApplier", jobs: Sequence[ReplayJob]) -> list["Schedule | None"]:
        """``applier.apply`` on every job, in worker processes; failures are counted in
        ``applier`` exactly as in-process replays would count them."""
        jobs = list(jobs)
        if not jobs:
            return []

        def here(part: list[ReplayJob]) -> list["Schedule | None"]:
            return [applier.apply(t, s, keep_decisions=k) for t, s, k in part]

        with self._lock:
            if self.disabled is not None:
                return here(jobs)
            try:
                key, setup = applier.shipping_form()
            except Exception as e:  # noqa: BLE001 - e.g. a postproc holding a lock
                self._warn_once("unshippable", "The workload cannot be sent to replay workers "
                                "(%s: %s); replaying it in this process", type(e).__name__, e)
                return here(jobs)
            if key in self._unshippable:
                return here(jobs)
            n_chunks = max(1, min(len(jobs), self.num_workers * _CHUNKS_PER_WORKER))
            size = -(-len(jobs) // n_chunks)
            chunks = [jobs[i:i + size] for i in range(0, len(jobs), size)]
            try:
                extra = () if applier.features is None else (applier.features,)
                outcomes = self._workers.run(
                    _worker_replay, [(key, setup, c) + extra for c in chunks], timeout=None)
            except WorkerStartError as e:
                self.disabled = e.reason
                _LOG.warning("Replay worker processes cannot start (%s); replaying in this "
                             "process from now on", e.reason)
                return here(jobs)
            results: list["Schedule | None"] = []
            for chunk, out in zip(chunks, outcomes):
                if out.kind == "ok":
                    results.extend(applier.adopt(item) for item in out.value)
                    continue
                if out.kind == "error":
                    # the worker could not take this workload (say, a postproc class that
                    # does not import there): stop offering it
                    self._unshippable.add(key)
                    last = str(out.value).strip().splitlines()[-1:] or [""]
                    self._warn_once("error", "A replay worker could not replay a workload "
                                    "(%s); replaying it in this process", last[0])
                else:
                    self._warn_once("crashed", "A replay worker failed (%s); replaying its "
                                    "chunk in this process", out.value)
                results.extend(here(chunk))
        return results


def extract_features_ahead(pool: ReplayPool, features: Any, mods: Sequence[Any]) -> int:
    """Compute the per-store rows (config ``features``) of ``mods`` in the pool's workers
    and adopt them into this process's feature cache; returns how many were adopted. Any
    failure leaves the rest to the cost model's own extraction. A pool not started yet (the
    workload's replays were too light to ship) is not started for this."""
    from workbench.meta_schedule.feature_extractor.per_store.extractor import (
        adopt_shipped_rows,
    )
    mods = list(mods)
    if not mods or pool.disabled is not None or not pool.worker_pids:
        return 0
    n_chunks = max(1, min(len(mods), pool.num_workers * _CHUNKS_PER_WORKER))
    size = -(-len(mods) // n_chunks)
    chunks = [mods[i:i + size] for i in range(0, len(mods), size)]
    adopted = 0
    with pool._lock:
        try:
            outcomes = pool._workers.run(_worker_features, [(features, c) for c in chunks],
                                         timeout=None)
        except WorkerStartError:
            return 0
        for out in outcomes:
            if out.kind != "ok":
                continue
            for shipped in out.value:
                if shipped is not None:
                    adopt_shipped_rows(features, shipped)
                    adopted += 1
    return adopted


_POOL: ReplayPool | None = None
_POOL_LOCK = threading.Lock()


def get_replay_pool(num_workers: int) -> ReplayPool:
    """The process-wide replay pool, resized (restarted) when ``num_workers`` changes."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL.num_workers != num_workers:
            if _POOL is not None:
                _POOL.shutdown()
            _POOL = ReplayPool(num_workers)
        return _POOL


@atexit.register
def shutdown_replay_pool() -> None:
    """Stop the replay workers (they are also stopped when the interpreter exits)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is not None:
            _POOL.shutdown()
            _POOL = None
