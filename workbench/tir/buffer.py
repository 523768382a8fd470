"""Buffers: a typed, shaped view of memory, and the regions of buffers that blocks touch."""
from __future__ import annotations

from typing import Sequence

from workbench.ir import dtype as dt
from workbench.ir.node import Node, node
from workbench.tir import op
from workbench.tir.expr import BufferLoad, PrimExpr, Var


@node
class Buffer(Node):
    """A multi-dimensional view of memory.

    ``data`` is the handle variable holding the base pointer; ``strides`` is empty for a dense
    row-major layout; ``elem_offset`` is counted in elements; ``scope`` is ``"global"`` for
    function arguments and ``"local"``/``"global"`` for allocations. Compared by identity.
    """

    data: Var
    dtype: str
    shape: tuple[PrimExpr, ...]
    name: str
    strides: tuple[PrimExpr, ...] = ()
    elem_offset: PrimExpr | None = None
    scope: str = "global"
    data_alignment: int = 64
    offset_factor: int = 1
    axis_separators: tuple[int, ...] = ()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices) -> PrimExpr:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return self.vload(indices)

    def vload(self, indices: Sequence, dtype: str | None = None) -> PrimExpr:
        """Load ``self[indices]``; checks the number of indices."""
        idx = tuple(op.convert(i) for i in indices)
        if len(idx) != len(self.shape):
            raise IndexError(
                f"buffer {self.name!r} has {len(self.shape)} dimension(s) but was indexed "
                f"with {len(idx)} index(es)")
        lanes = max([dt.lanes_of(i.dtype) for i in idx] + [1])
        return BufferLoad(self, idx, dtype or dt.with_lanes(self.dtype, lanes))

    def elem_offset_or_zero(self) -> PrimExpr:
        return self.elem_offset if self.elem_offset is not None else op.const(0, "int32")

    __hash__ = object.__hash__


def decl_buffer(shape: Sequence, dtype: str = "float32", name: str = "buffer",
                data: Var | None = None, strides: Sequence = (), elem_offset=None,
                scope: str = "global", data_alignment: int = 64,
                offset_factor: int = 1) -> Buffer:
    """Declare a buffer (TVM's ``tir.decl_buffer``); shape entries may be ints or expressions."""
    dtype = dt.normalize(dtype)
    shape_t = tuple(op.convert(s) if not isinstance(s, int) else op.const(s, "int32")
                    for s in shape)
    for s in shape_t:
        if not dt.parse(s.dtype).is_integer:
            raise TypeError(f"buffer {name!r}: shape entries must be integers, got {s!r}")
    if data is None:
        data = Var(name, "handle")
    return Buffer(data, dtype, shape_t, name, tuple(op.convert(s) for s in strides),
                  None if elem_offset is None else op.convert(elem_offset), scope,
                  data_alignment, offset_factor)


@node
class Range(Node):
    """``[min, min + extent)``."""

    min: PrimExpr
    extent: PrimExpr

    @staticmethod
    def from_min_extent(min_value, extent) -> "Range":
        return Range(op.convert(min_value), op.convert(extent))


@node
class BufferRegion(Node):
    """The part of ``buffer`` a block reads or writes: one Range per dimension."""

    buffer: Buffer
    region: tuple[Range, ...]

    @staticmethod
    def full(buffer: Buffer) -> "BufferRegion":
        return BufferRegion(buffer, tuple(Range(op.const(0, s.dtype), s) for s in buffer.shape))


@node
class MatchBufferRegion(Node):
    buffer: Buffer
    source: BufferRegion
