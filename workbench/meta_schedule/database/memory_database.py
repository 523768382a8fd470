"""MemoryDatabase: the in-process database (TVM's ``MemoryDatabase``), nothing persisted.

It is also the index under :class:`~workbench.meta_schedule.database.JSONDatabase`, which adds
an append-only log: a subclass that persists overrides :meth:`MemoryDatabase._log_workload`
and :meth:`MemoryDatabase._log_record`, called under the lock before a new workload or record
is indexed (a write that fails leaves the index unchanged).
"""
from __future__ import annotations

import threading

from workbench.ir.module import IRModule
from workbench.meta_schedule.database.database import (
    Database, TuningRecord, Workload, as_module, pool_by_trace,
)
from workbench.meta_schedule.database.module_equality import ModuleEquality, WorkloadTable

__all__ = ["MemoryDatabase"]


class MemoryDatabase(Database):
    """Workloads and records in memory; ``get_top_k`` pools the records of each trace and
    sorts by mean time; ``get_all_tuning_records`` is in commit order."""

    def __init__(self, module_equality: str = "structural") -> None:
        self.module_equality = module_equality
        self._table = WorkloadTable(ModuleEquality(module_equality))
        # id(canonical workload) -> its records in commit order (get_top_k pools and ranks)
        self._by_workload: dict[int, list[TuningRecord]] = {}
        self._records: list[TuningRecord] = []       # all of them, in commit order
        self._lock = threading.RLock()

    # -- the log a subclass keeps --------------------------------------------------------------
    def _log_workload(self, workload: Workload) -> None:
        """Persist a new canonical workload (nothing here)."""

    def _log_record(self, workload: Workload, record: TuningRecord) -> None:
        """Persist a new record of the canonical ``workload`` (nothing here)."""

    def _insert(self, workload: Workload, record: TuningRecord) -> None:
        """Index ``record`` under the canonical ``workload`` (no logging: loading uses it)."""
        self._by_workload.setdefault(id(workload), []).append(record)
        self._records.append(record)

    # -- primitives ----------------------------------------------------------------------------
    def has_workload(self, mod: IRModule) -> bool:
        with self._lock:
            return self._table.find(as_module(mod)) is not None

    def commit_workload(self, mod: IRModule) -> Workload:
        mod = as_module(mod)
        with self._lock:
            shash = self._table.equality.hash(mod)
            wl = self._table.find(mod, shash)
            if wl is None:
                wl = Workload(mod, shash)
                self._log_workload(wl)
                self._table.add(wl)
            return wl

    def commit_tuning_record(self, record: TuningRecord) -> None:
        with self._lock:
            wl = self._table.canonical(record.workload) or \
                self.commit_workload(record.workload.mod)
            self._log_record(wl, record)
            self._insert(wl, record)

    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        if top_k < 0:
            raise ValueError(f"get_top_k: top_k must be >= 0, got {top_k}")
        if top_k == 0:
            return []
        with self._lock:
            wl = self._table.canonical(workload)
            if wl is None:
                return []
            return pool_by_trace(self._by_workload.get(id(wl), ()))[:top_k]

    def get_all_tuning_records(self) -> list[TuningRecord]:
        """Every record, in commit order."""
        with self._lock:
            return list(self._records)

    def __len__(self) -> int:
        return len(self._records)

    # -- extras --------------------------------------------------------------------------------
    def workloads(self) -> list[Workload]:
        """The canonical workloads in commit order (not in TVM; used by displays)."""
        with self._lock:
            return list(self._table)

    def __repr__(self) -> str:
        return f"MemoryDatabase({len(self._table)} workload(s), {len(self)} record(s))"
