"""UnionDatabase and OrderedUnionDatabase: query several databases as one (read-only).

``UnionDatabase(*dbs)`` returns the fastest hit over all of them (stable sort by mean run
time, so earlier databases win ties); ``OrderedUnionDatabase(*dbs)`` returns the first hit in
list order (priority), e.g. ``OrderedUnionDatabase(ScheduleFnDatabase(manual), json_db)`` lets
hand-written schedules win. Everything except the queries raises ``NotImplementedError``, as
in TVM.
"""
from __future__ import annotations

from workbench.ir.module import IRModule
from workbench.meta_schedule.database.database import (
    Database, TuningRecord, Workload, as_module, mean_run_secs,
)
from workbench.target import Target

__all__ = ["UnionDatabase", "OrderedUnionDatabase"]


class _ComposedDatabase(Database):
    def __init__(self, *databases: Database) -> None:
        if len(databases) == 1 and isinstance(databases[0], (list, tuple)):
            databases = tuple(databases[0])
        for db in databases:
            if not isinstance(db, Database):
                raise TypeError(f"{type(self).__name__}: expected Databases, got "
                                f"{type(db).__name__}")
        self.databases = list(databases)

    def _unsupported(self, method: str):
        raise NotImplementedError(f"{type(self).__name__}.{method}: a union database only "
                                  "answers queries")

    def has_workload(self, mod: IRModule) -> bool:
        self._unsupported("has_workload")

    def commit_workload(self, mod: IRModule) -> Workload:
        self._unsupported("commit_workload")

    def commit_tuning_record(self, record: TuningRecord) -> None:
        self._unsupported("commit_tuning_record")

    def get_top_k(self, workload: Workload, top_k: int) -> list[TuningRecord]:
        self._unsupported("get_top_k")

    def get_all_tuning_records(self) -> list[TuningRecord]:
        self._unsupported("get_all_tuning_records")

    def __len__(self) -> int:
        self._unsupported("__len__")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(repr(db) for db in self.databases)})"


class UnionDatabase(_ComposedDatabase):
    """The fastest record any member database holds."""

    def query_tuning_record(self, mod: IRModule, target: Target | None = None,
                            workload_name: str = "main") -> TuningRecord | None:
        mod = as_module(mod)
        hits = [r for db in self.databases
                if (r := db.query_tuning_record(mod, target, workload_name)) is not None]
        hits.sort(key=lambda r: mean_run_secs(r.run_secs))
        return hits[0] if hits else None


class OrderedUnionDatabase(_ComposedDatabase):
    """The record of the first member database that has one."""

    def query_tuning_record(self, mod: IRModule, target: Target | None = None,
                            workload_name: str = "main") -> TuningRecord | None:
        mod = as_module(mod)
        for db in self.databases:
            record = db.query_tuning_record(mod, target, workload_name)
            if record is not None:
                return record
        return None
