"""MeasureCallback: what happens after a batch is measured (TVM's ``measure_callback``).

The task scheduler calls ``callback.apply(task_scheduler, task_id, measure_candidates,
builder_results, runner_results)`` for each callback, in order, after joining a task's
runs. Callbacks reach the task through TVM's field names: ``task_scheduler.tasks_[task_id]``
(a task record with ``.ctx``, the TuneContext with ``.mod`` and ``.target``),
``task_scheduler.database_`` and ``task_scheduler.cost_model_`` (either may be None).
"""
from __future__ import annotations

from typing import Any, Sequence

__all__ = ["MeasureCallback", "PyMeasureCallback"]


class MeasureCallback:
    """The abstract callback.

    ``stores_records`` (Workbench): a callback that saves the batch somewhere lasting (the
    database) sets it True; the task scheduler then holds interrupts back from the start of
    a batch's commit until the last such callback has returned, so an interrupted run keeps
    whole batches. Callbacks after it (the cost model update, a dashboard) stay
    interruptible.

    ``needed_when_stopping`` (Workbench): when an interrupt or an error ends the run, the
    scheduler still joins the batches already measured, so they are stored; it then skips the
    callbacks with this False (``UpdateCostModel``: training a model nobody will use would
    only delay the stop)."""

    stores_records: bool = False
    needed_when_stopping: bool = True

    def apply(self, task_scheduler: Any, task_id: int, measure_candidates: Sequence[Any],
              builder_results: Sequence[Any], runner_results: Sequence[Any]) -> None:
        raise NotImplementedError(f"{type(self).__name__}.apply")

    @staticmethod
    def create(kind: str) -> list["MeasureCallback"]:
        """"default": ``[AddToDatabase(), RemoveBuildArtifact(), UpdateCostModel()]``."""
        if kind == "default":
            from workbench.meta_schedule.measure_callback.add_to_database import AddToDatabase
            from workbench.meta_schedule.measure_callback.remove_build_artifact import (
                RemoveBuildArtifact,
            )
            from workbench.meta_schedule.measure_callback.update_cost_model import (
                UpdateCostModel,
            )
            return [AddToDatabase(), RemoveBuildArtifact(), UpdateCostModel()]
        raise ValueError(f"MeasureCallback.create: unknown kind {kind!r}; expected 'default'")

    def __repr__(self) -> str:
        return f"meta_schedule.{type(self).__name__}"


class PyMeasureCallback(MeasureCallback):
    """Base for callbacks written in Python: override :meth:`apply`."""

    _tvm_metadata = {"cls": MeasureCallback, "methods": ["apply"]}
