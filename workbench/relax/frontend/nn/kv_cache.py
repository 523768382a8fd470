"""A fixed-capacity key/value cache for decoders, written in place (``nn.FixedKVCache``).

A decoder generating token by token keeps every earlier position's keys and values. Here the
cache of one attention layer is two tensors allocated once, at the full capacity ``T`` (the
longest context), and passed to every step; a step with ``S`` new tokens at position ``pos``
(an int64 tensor of shape (1,), a run-time value) writes its rows in place
(``R.call_tir_inplace`` of :func:`workbench.topi.nn.kv_cache.kv_cache_write`) and attends over
all ``T`` slots with an additive mask that hides slot ``t`` from query row ``s`` unless
``t <= pos + s``. Every shape is static, so no kernel is symbolic and one build serves every
position; the price is attention over the whole capacity (a few hundred keys: small next to
the step's matrix products).

Layouts (``B`` batch, ``N`` heads, ``H`` head size):

- keys (B, N, H, T): transposed, as the fused attention kernel (``topi.nn.flash_attention``)
  reads them, so no step transposes the whole cache;
- values (B, T, N, H): Relax's BSNH layout.

Unlike TVM's ``nn.KVCache`` (a runtime object that grows, with ``append`` / ``view``
builtins), the cache here is plain tensors and the Relax function returns them: the caller
owns them, and they are the same arrays (same memory) after every step.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workbench.relax.frontend.nn import op
from workbench.relax.frontend.nn import spec as _spec
from workbench.relax.frontend.nn.core import Tensor
from workbench.relax.expr import const


@dataclass(frozen=True)
class FixedKVCache:
    """The cache geometry of one attention layer; methods trace its use (see the module
    docstring)."""

    capacity: int
    heads: int
    head_dim: int
    dtype: str = "float32"
    batch: int = 1

    def __post_init__(self) -> None:
        for name in ("capacity", "heads", "head_dim", "batch"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(f"FixedKVCache: {name} must be a positive int, got {v!r}")

    @property
    def key_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.heads, self.head_dim, self.capacity)

    @property
    def value_shape(self) -> tuple[int, int, int, int]:
        return (self.batch, self.capacity, self.heads, self.head_dim)

    def specs(self) -> tuple[_spec.Tensor, _spec.Tensor]:
        """Input specs of the key and value tensors (for ``Module.export_tvm``)."""
        return _spec.Tensor(self.key_shape, self.dtype), _spec.Tensor(self.value_shape,
                                                                      self.dtype)

    def empty(self) -> tuple[np.ndarray, np.ndarray]:
        """Zeroed host arrays for the key and value tensors."""
        return np.zeros(self.key_shape, self.dtype), np.zeros(self.value_shape, self.dtype)

    def append(self, keys: Tensor, values: Tensor, k: Tensor, v: Tensor, pos: Tensor
               ) -> tuple[Tensor, Tensor]:
        """Write the new rows ``k``, ``v`` (B, S, N, H) at positions ``pos .. pos + S - 1`` of
        the caches, in place; returns the caches (read them, not the inputs, afterwards)."""
        from workbench.topi.nn.kv_cache import kv_cache_write
        self._check_rows(k, "k")
        self._check_rows(v, "v")
        new = tuple(int(d) for d in k.shape)
        kw = kv_cache_write(self.key_shape, new, "BNHT", self.dtype)
        vw = kv_cache_write(self.value_shape, new, "BSNH", self.dtype)
        keys = op.tensor_ir_inplace_op(kw, "kv_cache_write_keys", [keys, k, pos], 0,
                                       _spec.Tensor(self.key_shape, self.dtype))
        values = op.tensor_ir_inplace_op(vw, "kv_cache_write_values", [values, v, pos], 0,
                                         _spec.Tensor(self.value_shape, self.dtype))
        return keys, values

    def attention(self, q: Tensor, keys: Tensor, values: Tensor, pos: Tensor,
                  scale: float | None = None) -> Tensor:
        """Attention of the queries ``q`` (B, S, N, H) at positions ``pos ..`` over the cached
        slots ``0 .. pos + s`` (causal within the new rows); (B, S, N, H)."""
        from workbench.relax.transform.annotate_tir_op_pattern import OpPatternKind
        from workbench.topi.nn.attention import FlashAttentionSpec, flash_attention
        self._check_rows(q, "q")
        s = int(q.shape[1])
        bias = self.mask(pos, s)
        spec = FlashAttentionSpec(self.batch, s, self.heads, self.head_dim, self.capacity,
                                  self.heads, self.head_dim, self.dtype, scale, None,
                                  (1, 1, s, self.capacity), self.dtype)
        # Opaque: fusion must leave the streaming kernel whole (as relax.op.nn.attention's
        # legalization does).
        func = flash_attention(spec).with_attr("op_pattern", int(OpPatternKind.kOpaque))
        return op.tensor_ir_op(func, "attention", [q, keys, values, bias],
                               _spec.Tensor(tuple(int(d) for d in q.shape), self.dtype))

    def mask(self, pos: Tensor, rows: int) -> Tensor:
        """The additive mask (1, 1, rows, T): 0 where slot ``t <= pos + s``, else -inf."""
        slots = const(np.arange(self.capacity, dtype="int64").reshape(1, self.capacity))
        offsets = const(np.arange(rows, dtype="int64").reshape(rows, 1))
        last = op.add(pos, Tensor(offsets), name="last_visible")            # (rows, 1)
        keep = op.less_equal(Tensor(slots), last, name="visible")            # (rows, T)
        bias = op.where(keep, Tensor(const(np.zeros((), self.dtype))),
                        Tensor(const(np.array(-np.inf, self.dtype))), name="mask")
        return op.reshape(bias, [1, 1, rows, self.capacity])

    def _check_rows(self, x: Tensor, what: str) -> None:
        shape = tuple(int(d) for d in x.shape)
        if len(shape) != 4 or shape[0] != self.batch or shape[2:] != (self.heads,
                                                                       self.head_dim):
            raise ValueError(f"FixedKVCache: {what} must be (batch={self.batch}, S, "
                             f"heads={self.heads}, head_dim={self.head_dim}), got {shape}")


__all__ = ["FixedKVCache"]
