"""Writing new keys / values into a fixed-capacity key/value cache in place (decoding).

A decoder that generates token by token keeps the keys and values of every earlier position
in a cache of ``capacity`` positions allocated once; each step writes its ``S`` new rows at
the current position ``pos`` and attends over the first ``pos + S``. The writes here are
hand-built TIR because a ``te.compute`` defines every element of its output: written that
way, an "update" copies the whole cache each step. These kernels touch only the new rows and
are meant for ``R.call_tir_inplace`` with the cache as input 0 (the call's output *is* the
cache).

``kv_cache_write(cache_shape, new_shape, layout)``: the PrimFunc ``(cache, new, pos)``:

- ``new`` is (B, S, N, H) in Relax's BSNH layout, ``pos`` an int64 tensor of shape (1,)
  holding the first position to write;
- ``layout="BSNH"``: ``cache`` (B, T, N, H), ``cache[b, pos + s, n, h] = new[b, s, n, h]``
  (the values, as ``relax.op.nn.attention`` reads them);
- ``layout="BNHT"``: ``cache`` (B, N, H, T), ``cache[b, n, h, pos + s] = new[b, s, n, h]``
  (the keys transposed, as the fused attention kernel reads them: keeping the cache in that
  layout spares a transpose of the whole cache every step).

Rows that would land at or past the capacity ``T`` (or before 0) are not written: a bad
``pos`` must not write outside the cache; the caller checks the position and says so.
"""
from __future__ import annotations

from typing import Sequence

from workbench.tir import op
from workbench.tir.buffer import BufferRegion, decl_buffer
from workbench.tir.expr import BufferLoad, Var
from workbench.tir.function import PrimFunc, prim_func
from workbench.tir.stmt import Block, BlockRealize, BufferStore, For, ForKind, IfThenElse

__all__ = ["kv_cache_write", "LAYOUTS"]

LAYOUTS = ("BSNH", "BNHT")
_I64 = "int64"


def kv_cache_write(cache_shape: Sequence[int], new_shape: Sequence[int], layout: str = "BSNH",
                   dtype: str = "float32") -> PrimFunc:
    """The in-place write PrimFunc ``(cache, new, pos)`` (see the module docstring)."""
    if layout not in LAYOUTS:
        raise ValueError(f"kv_cache_write: layout must be one of {LAYOUTS}, got {layout!r}")
    cache_shape, new_shape = tuple(int(d) for d in cache_shape), tuple(int(d) for d in new_shape)
    if len(cache_shape) != 4 or len(new_shape) != 4:
        raise ValueError(f"kv_cache_write: cache {cache_shape} and new rows {new_shape} must "
                         "both be 4-d")
    b, s, n, h = new_shape
    t = cache_shape[1] if layout == "BSNH" else cache_shape[3]
    expected = (b, t, n, h) if layout == "BSNH" else (b, n, h, t)
    if cache_shape != expected:
        raise ValueError(f"kv_cache_write: a {layout} cache for new rows {new_shape} must be "
                         f"{expected}, got {cache_shape}")
    cache = decl_buffer(cache_shape, dtype, "cache")
    new = decl_buffer(new_shape, dtype, "new")
    pos = decl_buffer((1,), _I64, "pos")
    loops = [Var(name, _I64) for name in ("b", "s", "n", "h")]
    vb, vs, vn, vh = loops
    row = op.add(BufferLoad(pos, (op.const(0, _I64),), _I64), vs)
    at = (vb, row, vn, vh) if layout == "BSNH" else (vb, vn, vh, row)
    store = BufferStore(cache, BufferLoad(new, tuple(loops), dtype), at)
    inside = op.logical_and(op.ge(row, op.const(0, _I64)),
                            op.lt(row, op.const(t, _I64)))
    body = IfThenElse(inside, store)
    for lv, ext in reversed(list(zip(loops, new_shape))):
        body = For(lv, op.const(0, _I64), op.const(ext, _I64), ForKind.SERIAL, body)
    # The rows written depend on ``pos`` at run time: the block states the whole cache as
    # written (and read: the rows it leaves are the cache's own).
    root = Block((), (BufferRegion.full(cache), BufferRegion.full(new), BufferRegion.full(pos)),
                 (BufferRegion.full(cache),), "root", body)
    func = prim_func([cache, new, pos], BlockRealize((), op.const(True), root))
    # A few hundred stores: no schedule helps, and none must move the data-dependent row.
    return func.with_attr("tir.is_scheduled", True)
