"""Instruction kinds and instructions: the records a traced schedule writes.

A kind is declared once, as data: its JSON name, the Schedule method that applies it, which
parameters are inputs (handles or literals; a leading ``*`` marks a variadic input flattened into
the list, as TVM does for Split's factors) and which are attributes, and whether it is pure or
sampling. Applying, printing as Python and JSON conversion are then the same code for every kind.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class InstructionKind:
    name: str
    method: str
    inputs: tuple[str, ...] = ()
    attrs: tuple[str, ...] = ()
    pure: bool = False
    sampling: bool = False
    # The variadic input is the method's ``*args`` (fuse, reorder) rather than a list argument.
    star_args: bool = False

    def __reduce__(self) -> tuple:
        # Kinds are registered singletons: a pickled trace (replay workers) must come back
        # holding the same kind objects.
        return (get_kind, (self.name,))

    @property
    def variadic(self) -> str | None:
        for name in self.inputs:
            if name.startswith("*"):
                return name[1:]
        return None


INSTRUCTION_KINDS: dict[str, InstructionKind] = {}


def register_kind(kind: InstructionKind) -> InstructionKind:
    """Register an instruction kind (a user-defined primitive can register its own)."""
    INSTRUCTION_KINDS[kind.name] = kind
    return kind


def get_kind(name: str) -> InstructionKind:
    try:
        return INSTRUCTION_KINDS[name]
    except KeyError:
        raise ValueError(f"unknown instruction kind {name!r}; known kinds: "
                         f"{sorted(INSTRUCTION_KINDS)}") from None


@dataclass(eq=False)
class Instruction:
    """``kind`` applied to ``inputs`` (handles and literals) with ``attrs``, producing ``outputs``."""

    kind: InstructionKind
    inputs: list[Any]
    attrs: list[Any]
    outputs: list[Any] = field(default_factory=list)

    def __repr__(self) -> str:
        return f"Instruction({self.kind.name}, inputs={self.inputs}, attrs={self.attrs}, " \
               f"outputs={self.outputs})"


_K = InstructionKind
for _kind in (
    _K("GetSBlock", "get_sblock", attrs=("name", "func_name"), pure=True),
    _K("GetLoops", "get_loops", inputs=("block",), pure=True),
    _K("GetChildBlocks", "get_child_blocks", inputs=("block_or_loop",), pure=True),
    _K("GetProducers", "get_producers", inputs=("block",), pure=True),
    _K("GetConsumers", "get_consumers", inputs=("block",), pure=True),
    _K("SamplePerfectTile", "sample_perfect_tile", inputs=("loop",),
       attrs=("n", "max_innermost_factor"), pure=True, sampling=True),
    _K("SampleCategorical", "sample_categorical", attrs=("candidates", "probs"), pure=True,
       sampling=True),
    _K("SampleComputeLocation", "sample_compute_location", inputs=("block",), pure=True,
       sampling=True),
    _K("Split", "split", inputs=("loop", "*factors"),
       attrs=("preserve_unit_iters", "disable_predication")),
    _K("Fuse", "fuse", inputs=("*loops",), attrs=("preserve_unit_iters",), star_args=True),
    _K("Reorder", "reorder", inputs=("*ordered_loops",), star_args=True),
    _K("AddUnitLoop", "add_unit_loop", inputs=("block_or_loop",)),
    _K("Parallel", "parallel", inputs=("loop",)),
    _K("Vectorize", "vectorize", inputs=("loop",)),
    _K("Unroll", "unroll", inputs=("loop",)),
    _K("Annotate", "annotate", inputs=("block_or_loop", "ann_val"), attrs=("ann_key",)),
    _K("Unannotate", "unannotate", inputs=("block_or_loop",), attrs=("ann_key",)),
    _K("EnterPostproc", "enter_postproc"),
):
    register_kind(_kind)
