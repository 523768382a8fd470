"""Postproc: a rule applied to a finished schedule before it is measured.

Lifecycle (as TVM): ``_initialize_with_tune_context(ctx)`` once, then ``apply(sch) -> bool``
on each candidate *after* ``sch.enter_postproc()``: the postproc's own primitive calls land in
the trace behind the ``EnterPostproc`` marker. Returning False (or raising) rejects the
candidate; a postproc that returns False may first set ``last_refusal`` to say why (the
tuner reports the first refusal of a task that found no valid candidate). ``clone()``
deep-copies.

``Postproc.create(kind)``: ``"llvm"`` (alias ``"cpu"``) gives the default **list**; a single
postproc name (``"disallow-dynamic-loop"``, ``"rewrite-parallel-vectorize-unroll"``,
``"rewrite-reduction-block"``, ``"rewrite-layout"``, ``"verify-cpu-code"``) gives one postproc.

The llvm list is TVM's ``Postproc::DefaultLLVM()`` in order: DisallowDynamicLoop,
RewriteParallelVectorizeUnroll, RewriteReductionBlock, RewriteLayout (weight pre-packing for
functions with layout-free buffers, see its module). VerifyCPUCode is Workbench's own check
and, like TVM (which has no CPU verifier), not in the default list: add it explicitly to
reject malformed IR early.
"""
from __future__ import annotations

import abc
import copy
from typing import TYPE_CHECKING, Any

from workbench.meta_schedule.utils import KindTable
from workbench.tir.schedule import Schedule

if TYPE_CHECKING:  # pragma: no cover
    from workbench.meta_schedule.tune_context import TuneContext

__all__ = ["Postproc", "PyPostproc", "register_postproc"]

_KINDS = KindTable("Postproc")
#: ``@register_postproc(name)``: a postproc class for ``Postproc.create(name)``.
register_postproc = _KINDS.register


class Postproc(abc.ABC):
    """Rewrites or checks a schedule; ``apply`` returns whether the schedule is acceptable."""

    #: Why the last ``apply`` that returned False refused (None: not said).
    last_refusal: str | None = None

    def _initialize_with_tune_context(self, context: "TuneContext") -> None:
        """Read what the postproc needs from the tuning context (default: nothing)."""

    @abc.abstractmethod
    def apply(self, sch: Schedule) -> bool:
        """Post-process ``sch`` in place; False rejects it."""

    def clone(self) -> "Postproc":
        return copy.deepcopy(self)

    def __str__(self) -> str:
        return type(self).__name__

    @staticmethod
    def create(kind: str) -> Any:
        """The default list for a target kind, or one postproc by name (module docstring)."""
        from workbench.meta_schedule import postproc as _p  # noqa: F401 (registers)
        if kind in ("llvm", "cpu"):
            from workbench.meta_schedule.postproc import (
                DisallowDynamicLoop, RewriteLayout, RewriteParallelVectorizeUnroll,
                RewriteReductionBlock,
            )
            return [DisallowDynamicLoop(), RewriteParallelVectorizeUnroll(),
                    RewriteReductionBlock(), RewriteLayout()]
        if kind in ("vnni", "avx512"):
            # TVM's DefaultCPUTensorization, with RewriteLayout before RewriteTensorize: the
            # packed weight layout then follows the blockized loop nest and the intrinsic binds
            # the packed (contiguous) buffer.
            from workbench.meta_schedule.postproc import (
                DisallowDynamicLoop, RewriteLayout, RewriteParallelVectorizeUnroll,
                RewriteReductionBlock, RewriteTensorize,
            )
            return [DisallowDynamicLoop(), RewriteParallelVectorizeUnroll(),
                    RewriteReductionBlock(), RewriteLayout(),
                    RewriteTensorize(vectorize_init_loop=True)]
        return _KINDS.create(kind)


class PyPostproc(Postproc):
    """Base for user postprocessors (decorate with ``@derived_object``): implement ``apply``."""

    _tvm_metadata = {"cls": Postproc,
                     "methods": ["_initialize_with_tune_context", "apply", "clone", "__str__"]}
