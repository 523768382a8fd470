"""Mutators (TVM's ``meta_schedule.mutator``). See :mod:`.mutator`."""
from workbench.meta_schedule.mutator.mutate_compute_location import MutateComputeLocation
from workbench.meta_schedule.mutator.mutate_parallel import MutateParallel
from workbench.meta_schedule.mutator.mutate_tile_size import MutateTileSize
from workbench.meta_schedule.mutator.mutate_unroll import MutateUnroll
from workbench.meta_schedule.mutator.mutator import Mutator, PyMutator, register_mutator

__all__ = ["Mutator", "PyMutator", "register_mutator", "MutateTileSize",
           "MutateComputeLocation", "MutateUnroll", "MutateParallel"]
