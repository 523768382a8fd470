"""Layout primitives: transform_layout (re-lay out a buffer) and transform_block_layout
(re-shape a block's iteration space), with TVM's semantics.

``transform_layout`` gives the buffer the shape of the index map's image and rewrites every
access to it — loads, stores, block read/write regions, allocations and, for a parameter, the
function's ``buffer_map`` (so the signature changes, as in TVM). The map must be injective on the
buffer's domain and may not introduce padding (``pad_value`` is not supported yet).

``transform_block_layout`` replaces the loops above a block by one loop per index of the map's
image and substitutes the inverse map for the old iteration variables.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.tir import op
from workbench.tir.arith import Analyzer
from workbench.tir.buffer import Buffer, BufferRegion, Range
from workbench.tir.expr import BufferLoad, IntImm, PrimExpr, Var
from workbench.tir.function import PrimFunc
from workbench.tir.functor import IRMutator, IRVisitor, substitute
from workbench.tir.schedule.error import ScheduleError
from workbench.tir.schedule.index_map import IndexMap, free_vars_ok
from workbench.tir.schedule.primitive import annotations as A
from workbench.tir.schedule.primitive.cache import alloc_site
from workbench.tir.schedule.state import FuncIndex, replace_stmt
from workbench.tir.schedule.utils import realizes_under
from workbench.tir.stmt import (
    Block, BlockRealize, BufferStore, For, ForKind, IterType, IterVar, Stmt,
)


def resolve_buffer(prim: str, block: Block, buffer: Any) -> tuple[str, int]:
    """``("read"|"write", index)`` for a buffer given as that pair, a name, or a Buffer."""
    subject = f"block {block.name_hint!r}"
    if isinstance(buffer, (tuple, list)) and len(buffer) == 2:
        kind, idx = buffer
        if kind not in ("read", "write") or not isinstance(idx, int):
            raise ScheduleError(prim, subject, f"buffer must be ('read' | 'write', index), got "
                                f"{tuple(buffer)!r}")
        regions = block.reads if kind == "read" else block.writes
        if not 0 <= idx < len(regions):
            raise ScheduleError(prim, subject, f"{kind} buffer index {idx} is out of range: the "
                                f"block has {len(regions)} {kind} region(s)")
        return kind, idx
    if isinstance(buffer, (str, Buffer)):
        hits = [(kind, k) for kind, regions in (("read", block.reads), ("write", block.writes))
                for k, r in enumerate(regions)
                if (r.buffer.name == buffer if isinstance(buffer, str) else r.buffer is buffer)]
        label = buffer if isinstance(buffer, str) else buffer.name
        if not hits:
            raise ScheduleError(prim, subject, f"the block neither reads nor writes a buffer "
                                f"{label!r}; it accesses "
                                f"{[r.buffer.name for r in block.reads + block.writes]}")
        kinds = {block.reads[k].buffer if kind == "read" else block.writes[k].buffer
                 for kind, k in hits}
        if len(kinds) > 1:
            raise ScheduleError(prim, subject, f"more than one buffer is named {label!r}; "
                                "give ('read' | 'write', index)")
        return hits[-1]  # a buffer both read and written is named by its write, as TVM does
    raise ScheduleError(prim, subject, f"buffer must be ('read' | 'write', index), a name or a "
                        f"Buffer, got {buffer!r}")


# ---- transform_layout ------------------------------------------------------------------------

def _const_shape(shape: tuple[PrimExpr, ...]) -> list[int] | None:
    return [s.value for s in shape] if all(isinstance(s, IntImm) for s in shape) else None


def _check_map(prim: str, buf: Buffer, imap: IndexMap, new_shape: list[PrimExpr],
               pad_value: Any, assume_injective: bool) -> None:
    subject = f"buffer {buf.name!r}"
    shape = _const_shape(buf.shape)
    new = _const_shape(tuple(new_shape))
    if shape is None or new is None:
        return  # symbolic shapes: trust the map, as TVM does with assume_injective_transform
    size = int(np.prod(shape)) if shape else 1
    try:
        imap.inverse(shape)        # splits, fusions and permutations: a bijection, cheaply
        if int(np.prod(new)) == size:
            return
    except ValueError:
        pass
    points = imap.image_points(shape)
    if points is None:
        return
    # Checked even with assume_injective_transform: on a constant shape the claim can be
    # verified, and a false one would make two elements share a place (wrong results). The
    # flag still covers the maps we cannot evaluate (symbolic shapes, huge domains).
    if _distinct_rows(points) != size:
        what = " (assume_injective_transform does not make it so)" if assume_injective else ""
        raise ScheduleError(prim, subject, f"the index map {imap.as_python()} is not injective "
                            f"on the shape {shape}: two elements would share a place{what}")
    if int(np.prod(new)) > size:
        why = ("transform_layout does not support pad_value yet" if pad_value is not None else
               "pass a map that tiles the shape exactly")
        raise ScheduleError(prim, subject, f"the index map {imap.as_python()} pads the shape "
                            f"{shape} to {new}; {why}")


def _distinct_rows(points: np.ndarray) -> int:
    """How many distinct rows ``points`` has: rows become flat indices into their bounding
    box (a 1-D unique is far faster than ``np.unique(axis=0)``, which this check ran on every
    replay of a layout-rewriting trace)."""
    pts = np.asarray(points, dtype=np.int64)
    if pts.ndim == 1:
        pts = pts[:, None]
    if pts.size == 0:
        return 0
    lo = pts.min(axis=0)
    ext = pts.max(axis=0) - lo + 1
    if float(np.prod(ext.astype(np.float64))) >= 2.0 ** 62:
        return len(np.unique(pts, axis=0))
    flat = np.ravel_multi_index(tuple((pts - lo).T), tuple(int(e) for e in ext))
    return len(np.unique(flat))


class _Relayout(IRMutator):
    """Rewrite every access to ``old`` through the index map, simplifying indices with the
    ranges of the loops and block iteration variables around them."""

    def __init__(self, old: Buffer, new: Buffer, imap: IndexMap) -> None:
        super().__init__()
        self.old, self.new, self.imap = old, new, imap
        self.ana = Analyzer()

    def visit_For(self, loop: For) -> Stmt:
        self.ana.bind(loop.loop_var, Range(loop.min, loop.extent), allow_override=True)
        return self.generic_visit(loop)

    def visit_Block(self, block: Block) -> Stmt:
        for iv in block.iter_vars:
            self.ana.bind(iv.var, iv.dom, allow_override=True)
        new = self.generic_visit(block)
        # A storage_align of the re-laid-out buffer named an axis of its old shape: drop it
        # (entries follow buffers by identity, and the buffer was replaced).
        return A.carry_dim_align(block, new, lambda buf: True) if new is not block else new

    def visit_Buffer(self, buf: Buffer) -> Buffer:
        return self.new if buf is self.old else buf

    def visit_BufferRegion(self, r: BufferRegion) -> BufferRegion:
        if r.buffer is not self.old:
            return self.generic_visit(r)
        return BufferRegion(self.new, tuple(self.imap.map_ranges(r.region, self.ana)))

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        load = self.generic_visit(load)
        if load.buffer is not self.new:
            return load
        return load.replace(indices=tuple(self.imap.map_indices(load.indices, self.ana)))

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        store = self.generic_visit(store)
        if store.buffer is not self.new:
            return store
        return store.replace(indices=tuple(self.imap.map_indices(store.indices, self.ana)))


def transform_layout(func: PrimFunc, index: FuncIndex, block_name: str, buffer_index: int,
                     buffer_index_type: str, imap: IndexMap, pad_value: Any = None,
                     assume_injective: bool = False) -> PrimFunc:
    prim = "transform_layout"
    block = index.blocks[block_name].block
    regions = block.writes if buffer_index_type == "write" else block.reads
    kind, idx = resolve_buffer(prim, block, (buffer_index_type, buffer_index))
    buf = regions[idx].buffer
    subject = f"buffer {buf.name!r}"
    if imap.ndim != len(buf.shape):
        raise ScheduleError(prim, subject, f"the index map takes {imap.ndim} index(es) but the "
                            f"buffer has {len(buf.shape)} dimension(s)")
    if not free_vars_ok(imap):
        raise ScheduleError(prim, subject, "the index map uses variables other than its indices")
    if buf.strides:
        raise ScheduleError(prim, subject, "the buffer has explicit strides")
    params = [p for p, b in func.buffer_map.items() if b is buf]
    site = alloc_site(index, buf)
    if site is None and not params:
        raise ScheduleError(prim, subject, "the buffer is neither allocated by a block nor a "
                            "parameter (a match buffer cannot be re-laid out)")
    try:
        new_shape = imap.map_shape(buf.shape)
    except ValueError as e:
        raise ScheduleError(prim, subject, str(e)) from None
    _check_map(prim, buf, imap, new_shape, pad_value, assume_injective)
    new_buf = buf.replace(shape=tuple(new_shape))
    mut = _Relayout(buf, new_buf, imap)
    if site is not None:
        site_block, site_anc = site
        return replace_stmt(func, site_anc, site_block, mut.visit(site_block))
    bmap = {p: (new_buf if b is buf else b) for p, b in func.buffer_map.items()}
    return func.replace(body=mut.visit(func.body), buffer_map=type(func.buffer_map)(bmap))


# ---- transform_block_layout -------------------------------------------------------------------

def _iter_type(expr: PrimExpr, types: dict[Var, int]) -> int:
    """The iter type of a new iter var: that of every old one it is made of (mixing spatial and
    reduction iterations is an error, as in TVM)."""
    found: set[int] = set()

    class _V(IRVisitor):
        def visit_Var(self, v: Var) -> None:
            if v in types:
                found.add(types[v])

    _V().visit(expr)
    if len(found) > 1:
        raise ValueError(f"{expr} mixes spatial and reduction iteration variables")
    return found.pop() if found else IterType.DATA_PAR


def transform_block_layout(func: PrimFunc, index: FuncIndex, block_name: str,
                           imap: IndexMap) -> PrimFunc:
    prim = "transform_block_layout"
    subject = f"block {block_name!r}"
    info = index.blocks[block_name]
    block, realize = info.block, info.realize
    loops = info.loops
    if imap.ndim != len(block.iter_vars):
        raise ScheduleError(prim, subject, f"the index map takes {imap.ndim} index(es) but the "
                            f"block has {len(block.iter_vars)} iteration variable(s)")
    if loops and realizes_under(loops[0]) != [realize]:
        raise ScheduleError(prim, subject, "the block is not the only block under its loops")
    for outer, inner in zip(loops, loops[1:] + [realize]):
        if outer.body is not inner:
            raise ScheduleError(prim, subject, f"loop {outer.loop_var.name!r} has more than the "
                                "next loop in its body (the loops must be perfectly nested)")
    loop_vars = [lp.loop_var for lp in loops]
    bound = [v for v in realize.iter_values if isinstance(v, Var) and v in loop_vars]
    if len(bound) != len(realize.iter_values) or len(set(bound)) != len(bound) or \
            not _is_true(realize.predicate):
        raise ScheduleError(prim, subject, "the block's binding is not trivial: each iteration "
                            "variable must be bound to its own loop, with no predicate")
    extents = []
    for iv in block.iter_vars:
        if not (isinstance(iv.dom.min, IntImm) and iv.dom.min.value == 0
                and isinstance(iv.dom.extent, IntImm)):
            raise ScheduleError(prim, subject, f"iteration variable {iv.var.name!r} needs a "
                                "constant domain starting at 0")
        extents.append(iv.dom.extent.value)
    try:
        inverse = imap.inverse(extents)
        new_extents = imap.map_shape([iv.dom.extent for iv in block.iter_vars])
        types = {iv.var: iv.iter_type for iv in block.iter_vars}
        mapped = imap.map_indices([iv.var for iv in block.iter_vars])
        new_types = [IterType.DATA_PAR if isinstance(e, IntImm) and e.value == 1 else
                     _iter_type(m, types) for m, e in zip(mapped, new_extents)]
    except ValueError as e:
        raise ScheduleError(prim, subject, f"the index map {imap.as_python()} cannot be applied "
                            f"to the iteration domain {extents}: {e}") from None
    # The new iteration variables take the block's index dtype (an index map's constant
    # extents are int32; over int64 iteration variables they left int32 ones behind).
    dtypes = {iv.var.dtype for iv in block.iter_vars}
    if len(dtypes) == 1:
        idx = dtypes.pop()
        new_extents = [IntImm(idx, e.value) if isinstance(e, IntImm) else e
                       for e in new_extents]
    new_vars = [Var(f"v{k}", e.dtype) for k, e in enumerate(new_extents)]
    new_ivs = tuple(IterVar(Range(op.const(0, e.dtype), e), v, t)
                    for v, e, t in zip(new_vars, new_extents, new_types))
    old_values = inverse.map_indices(new_vars)
    new_block = substitute(block, dict(zip([iv.var for iv in block.iter_vars], old_values)))
    new_block = _simplify_accesses(new_block.replace(iter_vars=new_ivs))
    ax = [Var(f"ax{k}", v.dtype) for k, v in enumerate(new_vars)]
    stmt: Stmt = BlockRealize(tuple(ax), op.const(True), new_block)
    for a, e in reversed(list(zip(ax, new_extents))):
        stmt = For(a, op.const(0, a.dtype), e, ForKind.SERIAL, stmt)
    if loops:
        return replace_stmt(func, index.loops[loop_vars[0]].ancestors, loops[0], stmt)
    return replace_stmt(func, info.ancestors, realize, stmt)


def _is_true(pred: PrimExpr) -> bool:
    return isinstance(pred, IntImm) and pred.value != 0


class _SimplifyAccesses(IRMutator):
    """Simplify load/store indices and regions knowing the block's iteration domains."""

    def __init__(self, ana: Analyzer) -> None:
        super().__init__()
        self.ana = ana

    def visit_BufferLoad(self, load: BufferLoad) -> PrimExpr:
        load = self.generic_visit(load)
        return load.replace(indices=tuple(self.ana.simplify(i) for i in load.indices))

    def visit_BufferStore(self, store: BufferStore) -> Stmt:
        store = self.generic_visit(store)
        return store.replace(indices=tuple(self.ana.simplify(i) for i in store.indices))

    def visit_Range(self, r: Range) -> Range:
        return r.replace(min=self.ana.simplify(r.min), extent=self.ana.simplify(r.extent))


def _simplify_accesses(block: Block) -> Block:
    ana = Analyzer()
    for iv in block.iter_vars:
        ana.bind(iv.var, iv.dom)
    mut = _SimplifyAccesses(ana)
    return block.replace(
        reads=mut.visit_field(block.reads), writes=mut.visit_field(block.writes),
        body=mut.visit(block.body),
        init=None if block.init is None else mut.visit(block.init))
