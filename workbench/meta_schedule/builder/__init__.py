"""Builders (TVM's ``meta_schedule.builder``): compile candidates into loadable artifacts."""
from workbench.meta_schedule.builder.builder import (
    Builder, BuilderInput, BuilderResult, PyBuilder,
)
from workbench.meta_schedule.builder.dask_builder import DaskBuilder
from workbench.meta_schedule.builder.local_builder import LocalBuilder

__all__ = ["Builder", "BuilderInput", "BuilderResult", "PyBuilder", "LocalBuilder",
           "DaskBuilder"]
