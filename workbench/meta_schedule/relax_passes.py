"""The Relax-side tuning passes: ``MetaScheduleApplyDatabase`` replaces each PrimFunc of a
module by the best schedule a tuning database holds for it (TVM's
``relax.transform.MetaScheduleApplyDatabase``, reference section 12).

They live with the tuner, whose database and task form they use; ``workbench.relax.transform``
re-exports them under TVM's names, loading this module only when the name is first used, so
importing relax does not import the tuner.

For every PrimFunc not already marked ``tir.is_scheduled``, the function is normalised to the
tuner's task form (``IRModule({"main": f})`` with ``global_symbol="main"`` and
``tir.noalias``), looked up with the database's module equality (structural by default), and
on a hit the best record's trace is replayed -- postprocessing included -- on the workload.
The new PrimFunc keeps the scheduled body, parameters and buffers, the **original** attrs, and
gets ``tir.is_scheduled=True``. A miss leaves the function untouched (and warns if
``enable_warning``).

The database is ``database`` if given, else ``Database.current()`` (the innermost
``with database:``), else the JSON database in ``work_dir`` (if given); with none of these the
pass changes nothing. ``relax.build(..., database=db)`` runs this pass right after fusion.
"""
from __future__ import annotations

import logging
from typing import Any

from workbench.ir.module import IRModule
from workbench.meta_schedule.database import Database, JSONDatabase
from workbench.meta_schedule.tir_integration import task_module
from workbench.target import Target
from workbench.tir.function import PrimFunc

__all__ = ["MetaScheduleApplyDatabase"]

logger = logging.getLogger("workbench.meta_schedule")


class MetaScheduleApplyDatabase:
    """The pass object: ``mod = MetaScheduleApplyDatabase(db)(mod)`` (see the module
    docstring). After a call, ``applied`` names the functions that were replaced."""

    name = "MetaScheduleApplyDatabase"

    def __init__(self, database: Any = None, target: Any = None, work_dir: str | None = None,
                 enable_warning: bool = False) -> None:
        self.database = database
        self.target = target
        self.work_dir = work_dir
        self.enable_warning = enable_warning
        self.applied: list[str] = []

    def _database(self) -> Any:
        if self.database is not None:
            return self.database
        db = Database.current()
        if db is None and self.work_dir is not None:
            db = JSONDatabase(work_dir=self.work_dir, allow_missing=True)
        return db

    def __call__(self, mod: IRModule) -> IRModule:
        if not isinstance(mod, IRModule):
            raise TypeError(f"MetaScheduleApplyDatabase expects an IRModule, got "
                            f"{type(mod).__name__}")
        self.applied = []
        db = self._database()
        if db is None:
            if self.enable_warning:
                logger.warning("MetaScheduleApplyDatabase: no database; module unchanged")
            return mod
        target = self.target
        if target is not None and not isinstance(target, Target):
            target = Target(target)
        out = mod.copy()
        for name, func in list(mod.items()):
            if not isinstance(func, PrimFunc) or func.attrs.get("tir.is_scheduled", False):
                continue
            sch = db.query_schedule(task_module(func), target, name)
            if sch is None:
                if self.enable_warning:
                    logger.warning("MetaScheduleApplyDatabase: no tuning record for %s", name)
                continue
            tuned = sch.mod["main"]
            out[name] = tuned.replace(attrs=func.attrs).with_attr("tir.is_scheduled", True)
            self.applied.append(name)
        return out
