"""The builder interface (TVM's ``meta_schedule.builder``): IRModules in, artifacts out."""
from __future__ import annotations

from typing import Any, Sequence

from workbench.ir.module import IRModule
from workbench.target import Target

__all__ = ["BuilderInput", "BuilderResult", "Builder", "PyBuilder"]


class BuilderInput:
    """What to build: ``mod`` for ``target``; ``params`` (name -> NDArray) is kept for TVM
    compatibility and must be None or empty with the default build function."""

    def __init__(self, mod: IRModule, target: Target | str,
                 params: dict[str, Any] | None = None) -> None:
        self.mod = mod
        self.target = target if isinstance(target, Target) else Target(target)
        self.params = params

    def __repr__(self) -> str:
        return f"BuilderInput(functions={list(self.mod)}, target={str(self.target)!r})"


class BuilderResult:
    """``artifact_path`` (a file the runner loads) or ``error_msg``; exactly one is set."""

    def __init__(self, artifact_path: str | None, error_msg: str | None) -> None:
        self.artifact_path = artifact_path
        self.error_msg = error_msg

    def __repr__(self) -> str:
        if self.error_msg is not None:
            first = self.error_msg.splitlines()[0] if self.error_msg else ""
            return f"BuilderResult(error_msg={first!r}...)"
        return f"BuilderResult(artifact_path={self.artifact_path!r})"


class Builder:
    """The abstract builder: ``build(inputs) -> results``, one result per input, in order."""

    def build(self, build_inputs: Sequence[BuilderInput]) -> list[BuilderResult]:
        raise NotImplementedError(f"{type(self).__name__}.build")

    @staticmethod
    def create(kind: str = "local", *args: Any, **kwargs: Any) -> "Builder":
        """"local" (:class:`LocalBuilder`) or "dask" (:class:`DaskBuilder`: compile on the
        workers of a Dask cluster; ``rpc_config=RPCConfig(...)``)."""
        if kind == "local":
            from workbench.meta_schedule.builder.local_builder import LocalBuilder
            return LocalBuilder(*args, **kwargs)
        if kind == "dask":
            from workbench.meta_schedule.builder.dask_builder import DaskBuilder
            return DaskBuilder(*args, **kwargs)
        raise ValueError(f"Builder.create: unknown kind {kind!r}; expected 'local' or 'dask'")


class PyBuilder(Builder):
    """Base for builders written in Python: override :meth:`build`."""

    _tvm_metadata = {"cls": Builder, "methods": ["build"]}
