"""MemoryDatabase: the in-process database (TVM's ``MemoryDatabase``), nothing persisted."""
from __future__ import annotations

import threading

from workbench.ir.module import IRModule
from workbench.meta_schedule.database.database import (
    Database, TuningRecord, Workload, as_module, pool_by_trace,
)
from workbench.meta_schedule.database.module_equality import ModuleEquality, WorkloadTable

__all__ = ["MemoryDatabase"]


class MemoryDatabase(Database):
    """Workloads and records in lists; ``get_top_k`` scans, pools equal traces and sorts by
    mean time."""

    def __init__(self, module_equality: str = "structural") -> None:
        self.module_equality = module_equality
        self._table = WorkloadTable(ModuleEquality(module_equality))
        # (id of the canonical workload, record): the scan in get_top_k never rehashes
        self._records: list[tuple[int, TuningRecord]] = []
        self._lock = threading.RLock()

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
                self._table.add(wl)
            return wl

    def commit_tuning_record(self, record: TuningRecord) -> None:
        with self._lock:
            wl = self._table.canonical(record.workload) or \
                self.commit_workload(record.workload.mod)
            self._records.append((id(wl), record))

    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        if top_k < 0:
            raise ValueError(f"get_top_k: top_k must be >= 0, got {top_k}")
        if top_k == 0:
            return []
        with self._lock:
            wl = self._table.canonical(workload)
            if wl is None:
                return []
            mine = [r for key, r in self._records if key == id(wl)]
        return pool_by_trace(mine)[:top_k]

    def get_all_tuning_records(self) -> list[TuningRecord]:
        """Every record, in commit order."""
        with self._lock:
            return [r for _, r in self._records]

    def __len__(self) -> int:
        return len(self._records)

    def workloads(self) -> list[Workload]:
        """The canonical workloads in commit order (not in TVM; used by displays)."""
        with self._lock:
            return list(self._table)

    def __repr__(self) -> str:
        return f"MemoryDatabase({len(self._table)} workload(s), {len(self)} record(s))"
