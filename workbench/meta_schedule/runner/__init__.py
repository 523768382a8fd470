"""Runners (TVM's ``meta_schedule.runner``): measure built candidates, check their outputs."""
from workbench.meta_schedule.runner.config import EvaluatorConfig
from workbench.meta_schedule.runner.local_runner import LocalRunner
from workbench.meta_schedule.runner.reference import make_reference
from workbench.meta_schedule.runner.runner import (
    LocalRunnerFuture, MeasurementInterrupted, PyRunner, Runner, RunnerFuture, RunnerInput,
    RunnerResult,
)

__all__ = ["EvaluatorConfig", "LocalRunner", "LocalRunnerFuture", "MeasurementInterrupted",
           "PyRunner", "Runner", "RunnerFuture", "RunnerInput", "RunnerResult",
           "make_reference"]
