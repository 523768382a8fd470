"""The public ``Schedule`` class: the core plus every primitive family."""
from __future__ import annotations

from workbench.tir.schedule.cache_layout_methods import CacheLayoutMethods
from workbench.tir.schedule.compute_location_methods import ComputeLocationMethods
from workbench.tir.schedule.generate_methods import GenerateMethods
from workbench.tir.schedule.loop_methods import LoopMethods
from workbench.tir.schedule.reduction_methods import ReductionMethods
from workbench.tir.schedule.sampling_methods import SamplingMethods
from workbench.tir.schedule.tensorize_methods import TensorizeMethods


class Schedule(LoopMethods, SamplingMethods, ReductionMethods, ComputeLocationMethods,
               CacheLayoutMethods, TensorizeMethods, GenerateMethods):
    """A traced schedule of an IRModule or PrimFunc (TVM's ``tir.Schedule``).

    ``Schedule(mod, seed=None)``; ``sch.mod`` is the scheduled module, ``sch.trace`` the record
    of every primitive called, ``sch.show()`` prints both.
    """
