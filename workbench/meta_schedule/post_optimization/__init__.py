"""Post-optimization: TVM's Droplet search after tuning (``post_optimization=True``)."""
from workbench.meta_schedule.post_optimization.droplet import Batch, DropletResult, DropletSearch
from workbench.meta_schedule.post_optimization.post_opt import PostOptResult, post_optimize
from workbench.meta_schedule.post_optimization.space import Knob, knobs_of, neighbours

__all__ = ["Batch", "DropletResult", "DropletSearch", "Knob", "PostOptResult", "knobs_of",
           "neighbours", "post_optimize"]
