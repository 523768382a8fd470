"""Schedule methods for caches, storage and layouts: cache_read, cache_write, set_scope,
storage_align, transform_layout, transform_block_layout.

Instruction kinds follow TVM's split of inputs and attributes (reference section 3.3):
``CacheRead(block, consumer_blocks | read_buffer_index, storage_scope)``,
``TransformLayout(block, index_map | buffer_index, buffer_index_type, pad_value,
assume_injective_transform)`` and so on. Index maps are written into JSON traces as a string
starting with ``{`` and into Python traces as a ``lambda``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from workbench.tir.buffer import Buffer
from workbench.tir.schedule.core import ScheduleCore, traced
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.handles import BlockRV
from workbench.tir.schedule.index_map import IndexMap, as_index_map
from workbench.tir.schedule.instruction import InstructionKind, register_kind
from workbench.tir.schedule.primitive import cache as C
from workbench.tir.schedule.primitive import layout as L

_K = InstructionKind
for _kind in (
    _K("CacheRead", "cache_read", inputs=("block", "consumer_blocks"),
       attrs=("read_buffer_index", "storage_scope")),
    _K("CacheWrite", "cache_write", inputs=("block", "consumer_blocks"),
       attrs=("write_buffer_index", "storage_scope")),
    _K("SetScope", "set_scope", inputs=("block",), attrs=("buffer_index", "storage_scope")),
    _K("StorageAlign", "storage_align", inputs=("block",),
       attrs=("buffer_index", "axis", "factor", "offset")),
    _K("TransformLayout", "transform_layout", inputs=("block", "index_map"),
       attrs=("buffer_index", "buffer_index_type", "pad_value", "assume_injective_transform")),
    _K("TransformBlockLayout", "transform_block_layout", inputs=("block",),
       attrs=("index_map",)),
):
    register_kind(_kind)

# TVM's BufferIndexType codes, as its JSON traces store them.
_INDEX_TYPES = {"read": 0, "write": 1}
_INDEX_TYPE_NAMES = {v: k for k, v in _INDEX_TYPES.items()}


class CacheLayoutMethods(ScheduleCore):
    # -- caches ----------------------------------------------------------------------------
    def cache_read(self, block: BlockRV, read_buffer_index: int, storage_scope: str,
                   consumer_blocks: Sequence[BlockRV | str] | None = None) -> BlockRV:
        """Copy the block's ``read_buffer_index``-th read buffer into a new ``storage_scope``
        buffer before its consumers read it; returns the copy block (named ``<buffer>_<scope>``).

        The copy covers the whole buffer and goes after the buffer's producer (first in the
        scope for an input), right before the first consumer; every consumer (or only
        ``consumer_blocks``) reads the copy::

            for i, j: B[i, j] = A[i, j] * 2        # sch.cache_read(b, 0, "local")
            ->
            for ax0, ax1: A_local[v0, v1] = A[v0, v1]
            for i, j: B[i, j] = A_local[i, j] * 2
        """
        with self._atomic():
            consumers = self._consumer_rvs(consumer_blocks)
            return self._cache_read(block, consumers, read_buffer_index, storage_scope)

    @traced("CacheRead")
    def _cache_read(self, block: BlockRV, consumer_blocks: list[BlockRV],
                    read_buffer_index: int, storage_scope: str) -> BlockRV:
        name = self._block_name(block, "cache_read")
        names = [self._block_name(b, "cache_read") for b in consumer_blocks]
        func, new = C.cache_read(self._func, self._index(), name,
                                 self._int(read_buffer_index, "cache_read"), storage_scope, names)
        self._commit(func)
        return self._new_block_rv(new)

    def cache_write(self, block: BlockRV, write_buffer_index: int, storage_scope: str,
                    consumer_blocks: Sequence[BlockRV | str] | None = None) -> BlockRV:
        """Make the block write a new ``storage_scope`` buffer and copy it back into the
        original right after; returns the write-back block (named ``<buffer>_<scope>``).

        ``consumer_blocks`` read the cache directly; the write-back goes before the first
        other consumer::

            for i, j, k: C[i, j] += A[i, k] * B[k, j]     # sch.cache_write(c, 0, "local")
            ->
            for i, j, k: C_local[i, j] += A[i, k] * B[k, j]
            for ax0, ax1: C[v0, v1] = C_local[v0, v1]
        """
        with self._atomic():
            consumers = self._consumer_rvs(consumer_blocks)
            return self._cache_write(block, consumers, write_buffer_index, storage_scope)

    @traced("CacheWrite")
    def _cache_write(self, block: BlockRV, consumer_blocks: list[BlockRV],
                     write_buffer_index: int, storage_scope: str) -> BlockRV:
        name = self._block_name(block, "cache_write")
        names = [self._block_name(b, "cache_write") for b in consumer_blocks]
        func, new = C.cache_write(self._func, self._index(), name,
                                  self._int(write_buffer_index, "cache_write"), storage_scope,
                                  names)
        self._commit(func)
        return self._new_block_rv(new)

    def _consumer_rvs(self, blocks: Sequence[BlockRV | str] | None) -> list[BlockRV]:
        # Names become handles through get_sblock, which the trace records, as in TVM.
        return [self.get_sblock(b) if isinstance(b, str) else b for b in (blocks or [])]

    # -- storage ---------------------------------------------------------------------------
    @traced("SetScope")
    def set_scope(self, block: BlockRV, buffer_index: int, storage_scope: str) -> None:
        """Move the block's ``buffer_index``-th written buffer (allocated in the function, not
        a parameter) to ``storage_scope``; it is renamed ``<name>_<scope>`` as in TVM::

            B = T.alloc_buffer((128, 128))     # sch.set_scope(b, 0, "local")
            ->
            B_local = T.alloc_buffer((128, 128), scope="local")
        """
        name = self._block_name(block, "set_scope")
        self._commit(C.set_scope(self._func, self._index(), name,
                                 self._int(buffer_index, "set_scope"), storage_scope))

    @traced("StorageAlign")
    def storage_align(self, block: BlockRV, buffer_index: int, axis: int, factor: int,
                      offset: int) -> None:
        """Pad the stride of ``axis`` of the block's ``buffer_index``-th written buffer so that
        ``stride % factor == offset`` (recorded as the block annotation ``buffer_dim_align``;
        lowering allocates the padded strides)::

            with T.block("B"): ...             # sch.storage_align(b, 0, axis=0, factor=128,
            ->                                 #                   offset=1)
            with T.block("B"):
                T.block_attr({"buffer_dim_align": ((0, 0, 128, 1),)})
        """
        name = self._block_name(block, "storage_align")
        ints = [self._int(x, "storage_align") for x in (buffer_index, axis, factor, offset)]
        self._commit(C.storage_align(self._func, self._index(), name, *ints))

    # -- layouts ---------------------------------------------------------------------------
    def transform_layout(self, block: BlockRV,
                         buffer: tuple[str, int] | str | Buffer | None = None,
                         index_map: IndexMap | Callable[..., Any] | None = None,
                         pad_value: int | float | None = None, *,
                         assume_injective_transform: bool = False,
                         buffer_index: int | None = None,
                         buffer_index_type: int | str | None = None) -> None:
        """Re-lay out a buffer the block accesses: its shape becomes ``index_map``'s image and
        every access ``B[idx]`` becomes ``B[index_map(idx)]`` (parameters too, which changes
        the function's signature, as in TVM).

        ``buffer`` is ``("read" | "write", index)``, a buffer name, or the Buffer;
        ``index_map`` an IndexMap or a function such as ``lambda i, j: (i // 4, j, i % 4)``.
        (``buffer_index``/``buffer_index_type`` are the trace's spelling of ``buffer``.)
        The map must be injective and may not pad (``pad_value`` is not supported yet)::

            B = T.alloc_buffer((16, 8))        # transform_layout(b, ("write", 0),
            B[vi, vj] = ...                    #     lambda i, j: (i // 4, j, i % 4))
            ->
            B = T.alloc_buffer((4, 8, 4))
            B[vi // 4, vj, vi % 4] = ...
        """
        prim = "transform_layout"
        name = self._block_name(block, prim)
        blk = self._index().blocks[name].block
        if buffer is None:
            if buffer_index is None or buffer_index_type is None:
                raise TypeError("transform_layout: give buffer=(\"read\"|\"write\", index), a "
                                "buffer name, or buffer_index and buffer_index_type")
            kind = _INDEX_TYPE_NAMES.get(buffer_index_type, buffer_index_type)
            buffer = (kind, buffer_index)
        kind, idx = L.resolve_buffer(prim, blk, buffer)
        if index_map is None:
            raise TypeError("transform_layout: index_map is required")
        buf = (blk.writes if kind == "write" else blk.reads)[idx].buffer
        try:
            imap = as_index_map(index_map, len(buf.shape))
        except (ValueError, TypeError) as e:
            raise ScheduleError(prim, f"buffer {buf.name!r}", str(e)) from None
        self._transform_layout(block, imap, idx, _INDEX_TYPES[kind], pad_value,
                               bool(assume_injective_transform))

    @traced("TransformLayout")
    def _transform_layout(self, block: BlockRV, index_map: IndexMap, buffer_index: int,
                          buffer_index_type: int, pad_value: int | float | None,
                          assume_injective_transform: bool) -> None:
        name = self._block_name(block, "transform_layout")
        self._commit(L.transform_layout(self._func, self._index(), name, buffer_index,
                                        _INDEX_TYPE_NAMES[buffer_index_type], index_map,
                                        pad_value, assume_injective_transform))

    def transform_block_layout(self, block: BlockRV,
                               index_map: IndexMap | Callable[..., Any]) -> None:
        """Remap the block's iteration space through ``index_map`` (one initial index per
        block iter var); the loops above it are rebuilt, one per new iter var. The block
        must be alone under its loops with each iter var bound to one loop, and the map must
        be a bijective split/fuse/permutation of the iteration domain::

            for i, j in T.grid(16, 16):        # transform_block_layout(b,
              vi, vj = T.axis.remap("SS", [i, j])  #  lambda i, j: (i * 16 + j,))
            ->
            for ax0 in range(256):
              v0 = T.axis.spatial(256, ax0); ... vi -> v0 // 16, vj -> v0 % 16
        """
        prim = "transform_block_layout"
        name = self._block_name(block, prim)
        blk = self._index().blocks[name].block
        try:
            imap = as_index_map(index_map, len(blk.iter_vars))
        except (ValueError, TypeError) as e:
            raise ScheduleError(prim, f"block {name!r}", str(e)) from None
        self._transform_block_layout(block, imap)

    @traced("TransformBlockLayout")
    def _transform_block_layout(self, block: BlockRV, index_map: IndexMap) -> None:
        name = self._block_name(block, "transform_block_layout")
        self._commit(L.transform_block_layout(self._func, self._index(), name, index_map))


__all__ = ["CacheLayoutMethods"]
