"""Runners (TVM's ``meta_schedule.runner``): measure built candidates, check their outputs."""
from workbench.meta_schedule.runner.config import EvaluatorConfig, RPCConfig
from workbench.meta_schedule.runner.local_runner import LocalRunner
from workbench.meta_schedule.runner.reference import make_reference
from workbench.meta_schedule.runner.rpc_runner import RPCRunner, RPCRunnerFuture
from workbench.meta_schedule.runner.runner import (
    LocalRunnerFuture, MeasurementInterrupted, PyRunner, Runner, RunnerFuture, RunnerInput,
    RunnerResult,
)

__all__ = ["EvaluatorConfig", "RPCConfig", "LocalRunner", "LocalRunnerFuture",
           "MeasurementInterrupted", "PyRunner", "Runner", "RunnerFuture", "RunnerInput",
           "RunnerResult", "RPCRunner", "RPCRunnerFuture", "make_reference"]
