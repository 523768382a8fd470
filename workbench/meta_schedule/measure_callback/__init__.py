"""Measure callbacks (TVM's ``meta_schedule.measure_callback``)."""
from workbench.meta_schedule.measure_callback.add_to_database import AddToDatabase
from workbench.meta_schedule.measure_callback.measure_callback import (
    MeasureCallback, PyMeasureCallback,
)
from workbench.meta_schedule.measure_callback.remove_build_artifact import RemoveBuildArtifact
from workbench.meta_schedule.measure_callback.update_cost_model import UpdateCostModel

__all__ = ["MeasureCallback", "PyMeasureCallback", "AddToDatabase", "RemoveBuildArtifact",
           "UpdateCostModel"]
