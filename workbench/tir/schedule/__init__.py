"""The traced schedule language: Schedule, handles, primitives, instructions and traces."""
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.handles import BlockRV, ExprRV, LoopRV
from workbench.tir.schedule.index_map import IndexMap
from workbench.tir.schedule.instruction import (
    INSTRUCTION_KINDS, Instruction, InstructionKind, register_kind,
)
from workbench.tir.schedule.generate_methods import register_block_generator
from workbench.tir.schedule.schedule import Schedule
from workbench.tir.schedule.trace import Trace

__all__ = ["ScheduleError", "BlockRV", "ExprRV", "LoopRV", "Instruction", "InstructionKind",
           "INSTRUCTION_KINDS", "register_kind", "Schedule", "Trace", "IndexMap",
           "register_block_generator"]
