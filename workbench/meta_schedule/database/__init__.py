"""Tuning databases (TVM's ``meta_schedule.database``): workloads, records, and the JSON,
memory, union, ordered-union and schedule-function databases."""
from workbench.meta_schedule.database.database import (
    Database, PyDatabase, TuningRecord, Workload,
)
from workbench.meta_schedule.database.json_database import DatabaseWarning, JSONDatabase
from workbench.meta_schedule.database.memory_database import MemoryDatabase
from workbench.meta_schedule.database.schedule_fn_database import ScheduleFnDatabase
from workbench.meta_schedule.database.union_database import OrderedUnionDatabase, UnionDatabase

__all__ = ["Database", "PyDatabase", "TuningRecord", "Workload", "JSONDatabase",
           "DatabaseWarning", "MemoryDatabase", "ScheduleFnDatabase", "UnionDatabase",
           "OrderedUnionDatabase"]
