"""What the statement-level ``T.*`` builtins return: instructions to the TIR parser.

``T.block("x")``, ``T.reads(...)``, ``T.axis.remap(...)``, ``T.alloc_buffer(...)`` do not make
IR by themselves; the statement holding them does (``with``, an assignment, an expression
statement). Each is a small frozen record; :mod:`workbench.script.parser.tir` has one handler
per record type.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workbench.script.parser.core import Directive
from workbench.tir.buffer import Buffer


@dataclass(frozen=True)
class LoopSpec(Directive):
    """One loop of a ``for``: ``range``/``T.serial``/``T.parallel``/... or a ``T.grid`` axis."""

    start: Any
    stop: Any
    kind: str = "serial"
    thread: str | None = None
    annotations: dict | None = None


@dataclass(frozen=True)
class Grid(Directive):
    loops: tuple[LoopSpec, ...]


@dataclass(frozen=True)
class BlockScope(Directive):
    """``with T.block(name):`` (``no_realize``: a bare Block without its BlockRealize)."""

    name: str
    no_realize: bool = False


@dataclass(frozen=True)
class InitScope(Directive):
    """``with T.init():`` inside a reduction block."""


@dataclass(frozen=True)
class AttrScope(Directive):
    """``with T.attr(node, key, value):``."""

    node: Any
    key: str
    value: Any


@dataclass(frozen=True)
class Axis(Directive):
    """``T.axis.spatial/reduce/scan/opaque(dom, binding)``: one block iteration variable."""

    kind: int
    dom: Any
    binding: Any
    dtype: str | None = None


@dataclass(frozen=True)
class AxisRemap(Directive):
    """``T.axis.remap("SSR", [i, j, k])``: block vars bound to enclosing loop vars."""

    kinds: str
    bindings: tuple[Any, ...]


@dataclass(frozen=True)
class Reads(Directive):
    regions: tuple[Any, ...]


@dataclass(frozen=True)
class Writes(Directive):
    regions: tuple[Any, ...]


@dataclass(frozen=True)
class Where(Directive):
    predicate: Any


@dataclass(frozen=True)
class BlockAttr(Directive):
    annotations: dict


@dataclass(frozen=True)
class FuncAttr(Directive):
    attrs: dict


@dataclass(frozen=True)
class AllocBuffer(Directive):
    """``X = T.alloc_buffer(...)``: the buffer is renamed after the assignment's target."""

    buffer: Buffer


@dataclass(frozen=True)
class MatchBuffer(Directive):
    """``X = T.match_buffer(source, shape, ...)``: a handle parameter or a buffer region."""

    source: Any
    buffer: Buffer


@dataclass(frozen=True)
class DeclBufferSpec(Directive):
    buffer: Buffer
    data: Any = None


@dataclass(frozen=True)
class AllocateSpec(Directive):
    extents: tuple[Any, ...]
    dtype: str
    condition: Any = True
    annotations: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Sliced:
    """``A[0:4, i]``: a buffer indexed with slices; a region in ``T.reads``/``T.writes``/
    ``T.match_buffer``, a vector access (Ramp indices) everywhere else."""

    buffer: Buffer
    indices: tuple[Any, ...]


__all__ = ["LoopSpec", "Grid", "BlockScope", "InitScope", "AttrScope", "Axis", "AxisRemap",
           "Reads", "Writes", "Where", "BlockAttr", "FuncAttr", "AllocBuffer", "MatchBuffer",
           "DeclBufferSpec", "AllocateSpec", "Sliced"]
