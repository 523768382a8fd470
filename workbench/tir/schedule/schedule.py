"""The public ``Schedule`` class: the core plus every primitive family."""
from __future__ import annotations

from workbench.tir.schedule.loop_methods import LoopMethods
from workbench.tir.schedule.sampling_methods import SamplingMethods


class Schedule(LoopMethods, SamplingMethods):
    """A traced schedule of an IRModule or PrimFunc (TVM's ``tir.Schedule``).

    ``Schedule(mod, seed=None)``; ``sch.mod`` is the scheduled module, ``sch.trace`` the record
    of every primitive called, ``sch.show()`` prints both.
    """
