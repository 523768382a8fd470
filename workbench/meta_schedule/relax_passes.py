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
import os
from typing import Any

from workbench.ir.module import IRModule
from workbench.ir.transform import Pass, PassContext
from workbench.meta_schedule.conv_implementations import WinogradFromRecords
from workbench.meta_schedule.database import Database, JSONDatabase
from workbench.meta_schedule.tir_integration import task_module
from workbench.target import Target
from workbench.tir.function import PrimFunc

__all__ = ["MetaScheduleApplyDatabase", "MetaScheduleTuneTIR", "MetaScheduleTuneIRMod",
           "WinogradFromRecords"]

logger = logging.getLogger("workbench.meta_schedule")


class MetaScheduleApplyDatabase(Pass):
    """The pass object: ``mod = MetaScheduleApplyDatabase(db)(mod)`` (see the module
    docstring). After a call, ``applied`` names the functions that were replaced."""

    name = "MetaScheduleApplyDatabase"

    def __init__(self, database: Any = None, target: Any = None, work_dir: str | None = None,
                 enable_warning: bool = False) -> None:
        if isinstance(database, (str, os.PathLike)):
            # TVM's spelling: MetaScheduleApplyDatabase(work_dir, enable_warning)
            database, work_dir = None, os.fspath(database)
        self.database = database
        # TVM reads the target in scope when the pass is made (``with target:``).
        self.target = target if target is not None else Target.current()
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

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
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


def _scoped_target(target: Any, pass_name: str) -> Target:
    target = target if target is not None else Target.current()
    if target is None:
        raise ValueError(f"{pass_name}: no target; make the pass inside `with Target(...):` "
                         "(as TVM reads it) or pass target=")
    return target if isinstance(target, Target) else Target(target)


class MetaScheduleTuneTIR(Pass):
    """TVM's ``relax.transform.MetaScheduleTuneTIR(work_dir, max_trials_global)``: tune every
    PrimFunc of the module (each with up to ``max_trials_global`` trials, as TVM does) into
    the JSON database in ``work_dir``; the module itself is returned unchanged (apply the
    records with :class:`MetaScheduleApplyDatabase`). PrimFuncs already marked
    ``tir.is_scheduled`` are not tuned. The target is the one in scope when the pass is made
    (``with target:``), or ``target=``."""

    name = "MetaScheduleTuneTIR"

    def __init__(self, work_dir: str, max_trials_global: int, target: Any = None,
                 **tune_options: Any) -> None:
        _check_budget(max_trials_global, self.name)
        self.work_dir = os.fspath(work_dir)
        self.max_trials_global = max_trials_global
        self.target = _scoped_target(target, self.name)
        self.tune_options = tune_options
        self.tuned: list[str] = []

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        from workbench.meta_schedule.tir_integration import tune_tir
        self.tuned = []
        for name, func in list(mod.items()):
            if not isinstance(func, PrimFunc) or func.attrs.get("tir.is_scheduled", False):
                continue
            tune_tir(task_module(func), self.target, self.work_dir, self.max_trials_global,
                     **self.tune_options)
            self.tuned.append(name)
        return mod


class MetaScheduleTuneIRMod(Pass):
    """TVM's ``relax.transform.MetaScheduleTuneIRMod(params, work_dir, max_trials_global,
    max_trials_per_task=None, op_names=None)``: tune the fused kernels of the Relax module
    (:func:`workbench.meta_schedule.tune_relax`) into the JSON database in ``work_dir``; the
    module is returned unchanged. The target is the one in scope when the pass is made, or
    ``target=``."""

    name = "MetaScheduleTuneIRModule"  # TVM's pass name

    def __init__(self, params: Any, work_dir: str, max_trials_global: int,
                 max_trials_per_task: int | None = None, op_names: Any = None,
                 target: Any = None, **tune_options: Any) -> None:
        _check_budget(max_trials_global, "MetaScheduleTuneIRMod")
        self.params = dict(params or {})
        self.work_dir = os.fspath(work_dir)
        self.max_trials_global = max_trials_global
        self.max_trials_per_task = max_trials_per_task
        self.op_names = op_names
        self.target = _scoped_target(target, "MetaScheduleTuneIRMod")
        self.tune_options = tune_options

    def transform_module(self, mod: IRModule, ctx: PassContext | None = None) -> IRModule:
        from workbench.meta_schedule.relax_integration import tune_relax
        tune_relax(mod, self.params, self.target, self.work_dir, self.max_trials_global,
                   max_trials_per_task=self.max_trials_per_task or self.max_trials_global,
                   op_names=self.op_names, **self.tune_options)
        return mod


def _check_budget(trials: Any, pass_name: str) -> None:
    if not isinstance(trials, int) or isinstance(trials, bool) or trials < 0:
        raise ValueError(f"{pass_name}: max_trials_global must be an int >= 0, got {trials!r}")
