"""Group 2 (5 x 18 = 90 features): how a store walks through each buffer it touches.

The accessed buffers of a store (TVM's ``group2::Feature``): the stored buffer (``Write``,
with the store's indices) and every loaded buffer (``Read``, one index tuple per load); a
buffer both stored and loaded is ``ReadWrite`` and keeps only the store's indices.

For each buffer (a :class:`BufferAccess`):

- **region**: all loop variables start at their ``min``; relaxing the loops one at a time from
  the innermost outward, the per-dimension bounding box of all index tuples gives the number
  of elements touched under loop ``i`` (``numel[i]``). ``numel * dtype bytes`` summed over
  the store's buffers is ``touched_bytes[i]`` (group 3's memory curve), and ``numel[i]`` is
  appended to the walk-wide table ``touched_under_loop[loop i][buffer]``, which is how a
  later store sees that an earlier statement under the same loop touched the same buffer.
- **stride**: for the innermost loop whose variable moves the indices, the minimum over index
  tuples of ``|coefficient| * row-major stride`` of the rightmost dimension it appears in.
  ``stride`` (exported) is that value only when that loop is the innermost loop, else 0.
- **reuse**, scanning loops inner -> outer: a loop whose variable the indices do not use gives
  ``LoopMultipleRead`` (count = its extent, distance = iterations and bytes of the loops
  inside it); otherwise a loop under which this buffer was touched by >= 2 stores gives
  ``SerialMultipleReadWrite``; else ``NoReuse``.
- **derived**: bytes = dtype bytes x loop product; unique bytes = numel under the outermost
  loop x dtype bytes; cache lines and unique lines; each divided by the reuse count (0.5
  standing in for 0).

Buffers are sorted by lines, then bytes (both descending), then name; the first 5 are
exported, the rest dropped, missing ones zero-padded.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from workbench.tir import expr as E
from workbench.tir.buffer import Buffer
from workbench.tir.stmt import BufferStore

from workbench.tir.analysis import const_interval

from workbench.meta_schedule.feature_extractor.per_store.index_analysis import (
    AffineIndex, affine_index, var_coefficient,
)
from workbench.meta_schedule.feature_extractor.per_store.loop_context import (
    LoopNest, slog, storage_bytes,
)

READ, WRITE, READ_WRITE = 0, 1, 2
LOOP_MULTIPLE_READ, SERIAL_MULTIPLE_READ_WRITE, NO_REUSE = 0, 1, 2
N_PER_BUFFER = 18
BUFFER_FEATURE_NAMES = (
    "acc_type.kRead", "acc_type.kWrite", "acc_type.kReadWrite",
    "bytes", "unique_bytes", "lines", "unique_lines",
    "reuse_type.kLoopMultipleRead", "reuse_type.kSerialMultipleReadWrite",
    "reuse_type.kNoReuse",
    "reuse_dis_iter", "reuse_dis_bytes", "reuse_ct",
    "bytes_d_reuse_ct", "unique_bytes_d_reuse_ct", "lines_d_reuse_ct",
    "unique_lines_d_reuse_ct", "stride",
)

# touched_under_loop[loop uid][buffer data var] -> numel of each store under that loop
TouchedTable = dict[int, dict[E.Var, list[int]]]


class AccessCache:
    """Per-walk memo of index analyses (the same index objects recur across stores)."""

    def __init__(self) -> None:
        self.affine: dict[E.PrimExpr, AffineIndex] = {}
        self.shapes: dict[Buffer, list[int]] = {}
        # buffer data var -> element bytes (the touched table is keyed by data var)
        self.data_bytes: dict[E.Var, int] = {}

    def index(self, e: E.PrimExpr) -> AffineIndex:
        got = self.affine.get(e)
        if got is None:
            got = self.affine[e] = affine_index(e)
        return got

    def shape(self, buf: Buffer) -> list[int]:
        """Constant shape (TVM's GetBufferShape: a symbolic dim counts as its upper bound,
        or 1 when unbounded)."""
        got = self.shapes.get(buf)
        if got is None:
            got = []
            for s in buf.shape:
                if isinstance(s, E.IntImm):
                    got.append(s.value)
                else:
                    b = const_interval(s, {})
                    got.append(b[1] if b is not None and b[1] >= 0 else 1)
            self.shapes[buf] = got
        return got


@dataclass
class BufferAccess:
    """One buffer of one store and its features (TVM's ``SubFeature``)."""

    buffer: Buffer
    access_type: int
    indices: list[tuple[E.PrimExpr, ...]]
    affine: list[list[AffineIndex]] = field(default_factory=list)
    numel: list[int] = field(default_factory=list)        # per loop level, outer -> inner
    access_shape: list[int] = field(default_factory=list)  # with every loop relaxed
    num_continuous_bytes: int = 1
    min_stride: int = 0
    innermost_stride: int = 0
    prod_non_strided: int = 1
    reuse_type: int = NO_REUSE
    reuse_dis_iter: float = 0.0
    reuse_dis_bytes: float = 0.0
    reuse_ct: int = 0
    bytes: float = 0.0
    unique_bytes: float = 0.0
    lines: float = 0.0
    unique_lines: float = 0.0

    @property
    def key(self) -> E.Var:
        return self.buffer.data

    @property
    def dtype_bytes(self) -> int:
        return storage_bytes(self.buffer.dtype)

    def export(self) -> list[float]:
        """The 18 features, in TVM's order."""
        proxy = self.reuse_ct if self.reuse_ct > 0 else 0.5
        return [
            float(self.access_type == READ), float(self.access_type == WRITE),
            float(self.access_type == READ_WRITE),
            slog(self.bytes), slog(self.unique_bytes), slog(self.lines), slog(self.unique_lines),
            float(self.reuse_type == LOOP_MULTIPLE_READ),
            float(self.reuse_type == SERIAL_MULTIPLE_READ_WRITE),
            float(self.reuse_type == NO_REUSE),
            slog(self.reuse_dis_iter), slog(self.reuse_dis_bytes), slog(self.reuse_ct),
            slog(self.bytes / proxy), slog(self.unique_bytes / proxy),
            slog(self.lines / proxy), slog(self.unique_lines / proxy),
            slog(self.innermost_stride),
        ]


def _collect_loads(e: E.PrimExpr, out: list[E.BufferLoad]) -> None:
    """Loads of ``e`` in post-order (a load's index loads before the load), as TVM visits."""
    if isinstance(e, E.BufferLoad):
        for i in e.indices:
            _collect_loads(i, out)
        out.append(e)
    else:
        for c in E.expr_children(e):
            _collect_loads(c, out)


def _accesses(store: BufferStore) -> list[BufferAccess]:
    by_key: dict[E.Var, BufferAccess] = {}
    first = BufferAccess(store.buffer, WRITE, [tuple(store.indices)])
    by_key[store.buffer.data] = first
    loads: list[E.BufferLoad] = []
    _collect_loads(store.value, loads)
    for ld in loads:
        acc = by_key.get(ld.buffer.data)
        if acc is None:
            by_key[ld.buffer.data] = BufferAccess(ld.buffer, READ, [tuple(ld.indices)])
        elif acc.access_type == WRITE:
            acc.access_type = READ_WRITE
        elif acc.access_type == READ:
            acc.indices.append(tuple(ld.indices))
    return list(by_key.values())


class _DimBounds:
    """Bounds of one index expression as loops are relaxed inner -> outer."""

    __slots__ = ("expr", "lo", "hi", "delta", "general", "unknown")

    def __init__(self, expr: E.PrimExpr, aff: AffineIndex, nest: LoopNest,
                 pos_of: dict[E.Var, int]) -> None:
        self.expr = expr
        self.general = not aff.is_affine
        self.unknown = False
        self.delta: dict[int, tuple[int, int]] = {}
        self.lo = self.hi = 0
        if self.general:
            return
        frames = nest.frames
        base = aff.const
        for v, c in aff.coefs.items():
            p = pos_of.get(v)
            if p is None or frames[p].min_value is None or frames[p].extent is None:
                self.unknown = True  # not a loop with known range: bounded by the buffer
                return
            f = frames[p]
            base += c * f.min_value
            span = c * (max(f.extent, 1) - 1)
            dlo, dhi = self.delta.get(p, (0, 0))
            self.delta[p] = (dlo + min(0, span), dhi + max(0, span))
        self.lo = self.hi = base

    def relax(self, p: int, env: dict) -> tuple[int, int] | None:
        """Bounds once loops ``p..`` are relaxed (call with p decreasing by one each time)."""
        if self.unknown:
            return None
        if self.general:
            return const_interval(self.expr, env)
        d = self.delta.get(p)
        if d is not None:
            self.lo += d[0]
            self.hi += d[1]
        return self.lo, self.hi


def _set_region(accesses: list[BufferAccess], nest: LoopNest, cache: AccessCache,
                touched: TouchedTable) -> list[int]:
    """Fill ``numel``/``access_shape`` of every access; return touched bytes per loop level."""
    frames = nest.frames
    n = len(frames)
    touched_bytes = [0] * n
    for acc in accesses:
        acc.affine = [[cache.index(i) for i in idx] for idx in acc.indices]
        acc.numel = [0] * n
    if n == 0:
        for acc in accesses:
            acc.access_shape = [1] * len(acc.buffer.shape)
        return touched_bytes
    pos_of = {f.var: p for p, f in enumerate(frames)}
    env: dict[E.Var, tuple[int, int]] = {}
    for f in frames:
        if f.min_value is not None:
            env[f.var] = (f.min_value, f.min_value)
    dims = []
    for acc in accesses:
        dims.append([[_DimBounds(e, a, nest, pos_of) for e, a in zip(idx, aff)]
                     for idx, aff in zip(acc.indices, acc.affine)])
    for p in range(n - 1, -1, -1):
        f = frames[p]
        if f.min_value is not None and f.extent is not None:
            env[f.var] = (f.min_value, f.min_value + max(f.extent, 1) - 1)
        else:
            env.pop(f.var, None)
        level_bytes = 0
        for acc, acc_dims in zip(accesses, dims):
            shape = cache.shape(acc.buffer)
            lo = [None] * len(shape)
            hi = [None] * len(shape)
            for tuple_dims in acc_dims:
                for d, db in enumerate(tuple_dims):
                    b = db.relax(p, env)
                    if b is None:
                        b = (0, shape[d] - 1)
                    if lo[d] is None or b[0] < lo[d]:
                        lo[d] = b[0]
                    if hi[d] is None or b[1] > hi[d]:
                        hi[d] = b[1]
            access_shape = [h - l + 1 for l, h in zip(lo, hi)]
            numel = 1
            for s in access_shape:
                numel *= s
            numel = max(0, numel)
            acc.numel[p] = numel
            acc.access_shape = access_shape
            level_bytes += numel * acc.dtype_bytes
            touched.setdefault(f.uid, {}).setdefault(acc.key, []).append(numel)
        touched_bytes[p] = level_bytes
    return touched_bytes


def _set_stride(acc: BufferAccess, nest: LoopNest, cache: AccessCache) -> None:
    shape = cache.shape(acc.buffer)
    ndim = len(shape)
    strides = [1] * ndim
    for d in range(ndim - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    acc.num_continuous_bytes = 1
    for d in range(ndim - 1, -1, -1):
        if acc.access_shape[d] == shape[d]:
            acc.num_continuous_bytes = shape[d] * acc.dtype_bytes
            break
    frames = nest.frames
    n = len(frames)
    stride, p = 0, n - 1
    while p >= 0:
        stride = _var_stride(acc.affine, strides, frames[p].var)
        if stride != 0:
            break
        p -= 1
    acc.min_stride = stride
    acc.innermost_stride = stride if p == n - 1 else 0
    prod = 1
    for f in frames[p + 1:]:
        if f.extent is not None:
            prod *= f.extent
    acc.prod_non_strided = prod


def _var_stride(affine: list[list[AffineIndex]], strides: list[int], var: E.Var) -> int:
    best = None
    for idx in affine:
        for d in range(len(idx) - 1, -1, -1):
            coef = var_coefficient(idx[d], var)
            if coef != 0:
                s = abs(coef) * strides[d]
                best = s if best is None else min(best, s)
                break
    return 0 if best is None else best


def _set_reuse(acc: BufferAccess, nest: LoopNest, top_loop_touch_bytes: int,
               touched: TouchedTable, data_bytes: dict[E.Var, int]) -> None:
    region_vars: set[E.Var] = set()
    for idx in acc.affine:
        for a in idx:
            region_vars.update(a.coefs)
            region_vars.update(a.atoms)
    acc.reuse_type, acc.reuse_dis_iter, acc.reuse_dis_bytes, acc.reuse_ct = NO_REUSE, 0.0, 0.0, 0
    frames = nest.frames
    n = len(frames)
    for p in range(n - 1, -1, -1):
        f = frames[p]
        if f.var not in region_vars:
            acc.reuse_type = LOOP_MULTIPLE_READ
            acc.reuse_ct = f.extent if f.extent is not None else 1
            dis_iter = 1
            for g in frames[p + 1:]:
                if g.extent is not None:
                    dis_iter *= g.extent
            acc.reuse_dis_iter = float(dis_iter)
            if p == n - 1:
                acc.reuse_dis_bytes = float(top_loop_touch_bytes)
            else:
                acc.reuse_dis_bytes = float(_bytes_under(touched[frames[p + 1].uid],
                                                         data_bytes))
            return
        numels = touched[f.uid][acc.key]
        if len(numels) >= 2:
            extent = f.extent if f.extent is not None else 1
            acc.reuse_type = SERIAL_MULTIPLE_READ_WRITE
            acc.reuse_ct = len(numels) - 1
            acc.reuse_dis_iter = min(numels) / extent
            acc.reuse_dis_bytes = _bytes_under(touched[f.uid], data_bytes) / extent
            return


def _bytes_under(table: dict[E.Var, list[int]], data_bytes: dict[E.Var, int]) -> int:
    """Bytes touched under one loop by every store so far, all buffers."""
    return sum(sum(numels) * data_bytes[key] for key, numels in table.items())


def _set_feature(acc: BufferAccess, nest: LoopNest, cache_line_bytes: int) -> None:
    nbytes = acc.dtype_bytes
    acc.bytes = float(nbytes * nest.prod)
    if not nest.frames:
        acc.unique_bytes = acc.lines = acc.unique_lines = 1.0
        return
    acc.unique_bytes = float(acc.numel[0] * nbytes)
    lines = nest.prod / acc.prod_non_strided * min(1.0, acc.min_stride * nbytes / cache_line_bytes)
    acc.lines = max(1.0, lines)
    acc.unique_lines = max(1.0, acc.unique_bytes / min(cache_line_bytes, acc.num_continuous_bytes))


def buffer_access_features(store: BufferStore, nest: LoopNest, cache: AccessCache,
                           touched: TouchedTable, cache_line_bytes: int
                           ) -> tuple[list[BufferAccess], list[int]]:
    """The store's buffer accesses, sorted as TVM exports them, and touched bytes per level.

    Appends this store's numels to ``touched`` (shared by all stores of one walk).
    """
    accesses = _accesses(store)
    for acc in accesses:
        cache.data_bytes.setdefault(acc.key, acc.dtype_bytes)
    touched_bytes = _set_region(accesses, nest, cache, touched)
    for acc in accesses:
        _set_stride(acc, nest, cache)
    # TVM's "top loop touch bytes": each buffer's dtype bytes once (its per-loop map has one
    # entry per buffer), used as the reuse distance of an invariant innermost loop.
    top = sum(acc.dtype_bytes for acc in accesses) if nest.frames else 0
    for acc in accesses:
        _set_reuse(acc, nest, top, touched, cache.data_bytes)
    for acc in accesses:
        _set_feature(acc, nest, cache_line_bytes)
    accesses.sort(key=lambda a: (-a.lines, -a.bytes, a.buffer.name))
    return accesses, touched_bytes


def group2_features(accesses: list[BufferAccess], buffers_per_store: int) -> list[float]:
    """``buffers_per_store`` x 18 features, zero-padded."""
    out: list[float] = []
    for acc in accesses[:buffers_per_store]:
        out += acc.export()
    out += [0.0] * (N_PER_BUFFER * buffers_per_store - len(out))
    return out


__all__ = ["AccessCache", "BUFFER_FEATURE_NAMES", "BufferAccess", "N_PER_BUFFER",
           "TouchedTable", "buffer_access_features", "group2_features"]
