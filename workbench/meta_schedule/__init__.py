"""The tuner (TVM's ``tvm.meta_schedule``): design spaces, search, build, measure, database.

Subpackages follow TVM's layout: ``arg_info``, ``builder``, ``runner``, ``database``,
``measure_callback``, ``profiler``, ``logging``, ``tune_context``, ``space_generator``,
``schedule_rule``, ``postproc``, ``mutator``, ``search_strategy``, ``cost_model``,
``feature_extractor``, ``task_scheduler``; ``tune_tir`` / ``tune_tasks`` drive them.
``post_optimization`` (TVM's too) holds the Droplet search run after tuning, ``confirm`` the
re-measurement of each task's leaders that ends every run (Workbench).
"""
from workbench.meta_schedule import (  # noqa: F401 - the subpackages, as in TVM
    arg_info, builder, confirm, cost_model, database, feature_extractor, logging,
    measure_callback, mutator, post_optimization, postproc, profiler, relax_integration, runner,
    schedule_rule, search_strategy, space_generator, task_scheduler, tune_context, utils,
)
from workbench.meta_schedule.builder import Builder
from workbench.meta_schedule.cost_model import CostModel
from workbench.meta_schedule.database import Database
from workbench.meta_schedule.extracted_task import ExtractedTask
from workbench.meta_schedule.feature_extractor import FeatureExtractor
from workbench.meta_schedule.measure_callback import MeasureCallback
from workbench.meta_schedule.mutator import Mutator
from workbench.meta_schedule.postproc import Postproc
from workbench.meta_schedule.profiler import Profiler
from workbench.meta_schedule.runner import Runner
from workbench.meta_schedule.schedule_rule import ScheduleRule
from workbench.meta_schedule.search_strategy import MeasureCandidate, SearchStrategy
from workbench.meta_schedule.space_generator import SpaceGenerator
from workbench.meta_schedule.task_scheduler import NoValidCandidateWarning, TaskScheduler
from workbench.meta_schedule.tir_integration import NoValidRecordError, compile_tir, tune_tir
from workbench.meta_schedule.tune import tune_tasks
from workbench.meta_schedule.tune_context import TuneContext
from workbench.meta_schedule.utils import derived_object

__all__ = ["Builder", "CostModel", "Database", "ExtractedTask", "FeatureExtractor",
           "MeasureCallback", "Mutator", "Postproc", "Profiler", "Runner", "ScheduleRule",
           "MeasureCandidate", "SearchStrategy", "SpaceGenerator", "TaskScheduler",
           "TuneContext", "tune_tir", "tune_tasks", "compile_tir", "derived_object",
           "NoValidCandidateWarning", "NoValidRecordError"]
