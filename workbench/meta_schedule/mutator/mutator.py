"""Mutator: changes decisions on a trace to explore the design space (never the IR).

Lifecycle (as TVM): ``_initialize_with_tune_context(ctx)`` once (the mutator forks its random
state from the context there), then ``apply(trace) -> Trace | None`` many times: a new trace
(cut at ``EnterPostproc``) or None when the mutator does not apply. ``clone()`` deep-copies.

``Mutator.create(kind)``: ``"llvm"`` (alias ``"cpu"``) gives the default ``{mutator:
probability}`` dict; a single name (``"mutate-tile-size"``, ``"mutate-compute-location"``,
``"mutate-unroll"``, ``"mutate-parallel"``) one mutator.

The llvm dict is TVM's ``Mutator::DefaultLLVM()`` in its order: MutateTileSize 0.9,
MutateComputeLocation 0.05, MutateUnroll 0.03, MutateParallel(max_jobs_per_core=16) 0.02.
"""
from __future__ import annotations

import abc
import copy
from typing import TYPE_CHECKING, Any

from workbench.meta_schedule.utils import KindTable
from workbench.tir.schedule import Trace
from workbench.tir.schedule.handles import RandomEngine

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.tune_context import TuneContext

__all__ = ["Mutator", "PyMutator", "register_mutator"]

_KINDS = KindTable("Mutator")
#: ``@register_mutator(name)``: a mutator class for ``Mutator.create(name)``.
register_mutator = _KINDS.register


class Mutator(abc.ABC):
    """Proposes a changed trace; ``apply`` returns None when it cannot."""

    rand: RandomEngine | None = None

    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        """Fork this mutator's random state from the context."""
        self.rand = RandomEngine(context.fork_seed())

    def _rng(self) -> RandomEngine:
        if self.rand is None:  # used stand-alone, outside a tuning context
            self.rand = RandomEngine(None)
        return self.rand

    @abc.abstractmethod
    def apply(self, trace: Trace) -> Trace | None:
        """A mutated copy of ``trace`` (postprocessing removed), or None."""

    def clone(self) -> "Mutator":
        return copy.deepcopy(self)

    def __str__(self) -> str:
        return type(self).__name__

    @staticmethod
    def create(kind: str) -> Any:
        """The default ``{mutator: prob}`` of a target kind, or one mutator by name."""
        from workbench.meta_schedule import mutator as _m  # noqa: F401 (registers)
        if kind in ("llvm", "cpu", "vnni", "avx512"):
            from workbench.meta_schedule.mutator import (
                MutateComputeLocation, MutateParallel, MutateTileSize, MutateUnroll,
            )
            return {MutateTileSize(): 0.9, MutateComputeLocation(): 0.05, MutateUnroll(): 0.03,
                    MutateParallel(max_jobs_per_core=16): 0.02}
        return _KINDS.create(kind)


class PyMutator(Mutator):
    """Base for user mutators (decorate with ``@derived_object``): implement ``apply``."""

    _tvm_metadata = {"cls": Mutator,
                     "methods": ["_initialize_with_tune_context", "apply", "clone", "__str__"]}
