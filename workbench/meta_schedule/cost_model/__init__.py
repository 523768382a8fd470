"""Cost models (TVM's ``meta_schedule.cost_model``). See :mod:`.cost_model`."""
from workbench.meta_schedule.cost_model.cost_model import CostModel, PyCostModel
from workbench.meta_schedule.cost_model.metric import (
    RankCorrelation, evaluate_rank_correlation, max_curve, rank_correlation,
)
from workbench.meta_schedule.cost_model.mlp_model import MLPModel
from workbench.meta_schedule.cost_model.random_model import RandomModel
from workbench.meta_schedule.cost_model.xgb_model import XGBConfig, XGBModel

__all__ = ["CostModel", "PyCostModel", "RandomModel", "XGBModel", "XGBConfig", "MLPModel",
           "RankCorrelation", "evaluate_rank_correlation", "rank_correlation", "max_curve"]
