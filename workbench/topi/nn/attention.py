"""Fused, streaming scaled dot-product attention (FlashAttention's online softmax) as one
hand-built TIR kernel.

``softmax(Q K^T * scale + bias, masked) V`` for Q (B, S, N, H), V (B, T, N_kv, H_v) ->
(B, S, N, H_v) (Relax's BSNH layout), ``N % N_kv == 0`` (grouped-query attention: query head
``n`` reads kv head ``n // (N / N_kv)``). The keys come transposed, K^T (B, N_kv, H, T) (the
legalizer transposes BSNH keys in a kernel of their own): the score tile is then outer
products of a query element with unit-stride vectors of keys, read in place. (Packing each
key block transposed inside the kernel instead repeated the transpose once per query block:
~14% of the kernel's time at BERT's and GPT-2's sizes.)

Why a hand-built kernel rather than ``te.compute`` stages: the streaming softmax is a
recurrence over key blocks (each block rescales the running sum and accumulator by
``exp(m_old - m_new)``), which a te reduction cannot state without recomputing the scores
once per output column. The kernel is still block-form TIR: one opaque block
``flash_attention`` per (batch, head, query block) under three plain loops, so schedules
(the default rule in ``workbench.dlight.cpu.attention``, the tuner's custom rule) fuse and
parallelize those loops, and ``sch.regenerate`` (through :func:`retile_flash_attention`)
rebuilds the function for other block sizes: the tuner's decisions.

Per block instance (``block_q`` query rows ``s0 ..``): the scaled query rows are copied once;
then for every key block of ``block_k`` keys, the ``block_q x block_k`` score tile is
computed, biased and masked (-inf), each row's running
max ``m`` / sum ``l`` / accumulator ``acc`` (``block_q x H_v``) are rescaled by
``exp(m_old - m_new)`` and the tile's ``exp(score - m_new) @ V`` is added. The S x T score
matrix is never written: the scratch is ``O(block_q * (block_k + H + H_v))``.
With a causal mask, key blocks wholly after the query block's last visible key are skipped.

Rows past S in the last query block read the last row (clamped) and are not stored; keys past
T are masked. A row whose keys are all masked (-inf bias or a causal mask with S > T) gives
zeros, as PyTorch's ``scaled_dot_product_attention`` does (>= 2.5; its safe softmax), not
NaN. Arithmetic is float32 whatever the input dtype.
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from typing import Callable, Sequence

from workbench.ir.node import FrozenDict
from workbench.tir import op
from workbench.tir.buffer import Buffer, BufferRegion, Range, decl_buffer
from workbench.tir.expr import IntImm, PrimExpr, SizeVar, Var
from workbench.tir.function import PrimFunc, prim_func
from workbench.tir.schedule import register_block_generator
from workbench.tir.stmt import (
    Block, BlockRealize, BufferStore, For, ForKind, IfThenElse, IterVar, IterType, SeqStmt,
    Stmt,
)

__all__ = ["FlashAttentionSpec", "flash_attention", "retile_flash_attention", "spec_of",
           "block_sizes_of", "default_block_sizes", "BLOCK_NAME", "SCHEDULE_RULE", "GENERATOR"]

#: The name of the per-(batch, head, query block) block, and the ``schedule_rule`` annotation
#: it carries (the tuner hands the block to the custom rule of that name).
BLOCK_NAME = "flash_attention"
SCHEDULE_RULE = "flash_attention"
#: A symbolic tail block computes its scores key by key (scalar dot products) instead of by
#: gathers when keys x rows of a tile is at most this.
FEW_KEY_ROWS = 8

#: The block generator (``sch.regenerate``) that rebuilds the kernel for other block sizes.
GENERATOR = "flash_attention"
#: The PrimFunc attribute holding the spec (JSON text: it survives databases and pickling).
SPEC_ATTR = "flash_attention"
#: float32 lanes the inner loops are vectorized by (one AVX-512 register; LLVM splits it on
#: narrower targets).
LANES = 16
_F32 = "float32"
_I32 = "int32"


@dataclass(frozen=True)
class FlashAttentionSpec:
    """Everything the kernel depends on besides its block sizes.

    ``batch``, ``seq_q`` / ``seq_kv`` are ints, or the name of a symbolic size (a dynamic
    batch or sequence length: the kernel's buffers then have that variable in their shape,
    one variable per name, and it is bound from the arguments when the kernel is called).
    ``bias_shape`` is None without a bias, else the bias shape (right-aligned broadcast to
    (B, N, S, T); ints, or those names); ``causal`` is None, "TopLeft" or "BottomRight"."""

    batch: int | str
    seq_q: int | str
    heads: int
    head_dim: int
    seq_kv: int | str
    kv_heads: int
    head_dim_v: int
    dtype: str = _F32
    scale: float | None = None
    causal: str | None = None
    bias_shape: tuple[int, ...] | None = None
    bias_dtype: str = _F32

    def __post_init__(self) -> None:
        dims = (self.heads, self.head_dim, self.kv_heads, self.head_dim_v)
        if not all(isinstance(d, int) and d > 0 for d in dims + self.lengths):
            lengths_ok = all((isinstance(d, int) and d > 0) or (isinstance(d, str) and d)
                             for d in self.lengths)
            if not (lengths_ok and all(isinstance(d, int) and d > 0 for d in dims)):
                raise ValueError(f"flash_attention: shapes must be positive ints (the sequence "
                                 f"lengths may be names of symbolic ones), got "
                                 f"{dims + self.lengths}")
        if self.heads % self.kv_heads:
            raise ValueError(f"flash_attention: query heads ({self.heads}) must be a multiple "
                             f"of key heads ({self.kv_heads})")
        if self.causal not in (None, "TopLeft", "BottomRight"):
            raise ValueError(f"flash_attention: causal must be None, 'TopLeft' or "
                             f"'BottomRight', got {self.causal!r}")
        if self.bias_shape is not None:
            full = (self.batch, self.heads, self.seq_q, self.seq_kv)
            if len(self.bias_shape) > 4 or any(
                    d != 1 and d != f
                    for d, f in zip(reversed(self.bias_shape), reversed(full))):
                raise ValueError(f"flash_attention: bias {self.bias_shape} does not broadcast "
                                 f"to (B, N, S, T) = {full}")

    @property
    def lengths(self) -> tuple[int | str, int | str, int | str]:
        """The sizes that may be symbolic: batch, S and T."""
        return (self.batch, self.seq_q, self.seq_kv)

    @property
    def symbolic(self) -> bool:
        """Whether a sequence length is symbolic (a name) rather than an int."""
        return any(isinstance(d, str) for d in (self.seq_q, self.seq_kv))

    @property
    def softmax_scale(self) -> float:
        return self.scale if self.scale is not None else 1.0 / math.sqrt(self.head_dim)


def default_block_sizes(spec: FlashAttentionSpec) -> tuple[int, int]:
    """``(block_q, block_k)``: 64 query rows (fewer when S is shorter) per block instance, 64
    keys per key block: the score tile (16 KB) and the key block (16 KB at H = 64) stay in L1.
    On one Zen 4 core (thread time, best of 9) 64 x 64 ran BERT-base's attention in 0.72 ms
    against 0.80 ms for 32 x 64 and 1.0 ms for 16 x 64, and GPT-2's causal seq-512 one in
    7.2 ms against 8.1 ms for 32 x 64 or 128 x 64 (with the keys packed in the kernel).
    (A variant with key-major scores and packed queries, which vectorizes the softmax
    statistics over rows, was 10-20% slower.)"""
    if spec.symbolic:
        # The length is known only at run time: a block of 64 queries whose loops stop at the
        # last row (the kernel trims a short block), and whole blocks of 64 keys followed by
        # 16-key blocks for the rest.
        return 64, 64
    return min(64, spec.seq_q), min(64, _round_up(spec.seq_kv, LANES))


def flash_attention(spec: FlashAttentionSpec, block_q: int | None = None,
                    block_k: int | None = None,
                    buffers: Sequence[Buffer] | None = None) -> PrimFunc:
    """The fused attention PrimFunc ``(q, k_t, v[, bias], out)`` (``k_t``: the keys as
    (B, N_kv, H, T)) for ``spec`` with query blocks
    of ``block_q`` rows and key blocks of ``block_k`` keys (a multiple of 16; defaults:
    :func:`default_block_sizes`). ``buffers``: the parameter buffers to use (a retiled
    function keeps its original ones)."""
    dq, dk = default_block_sizes(spec)
    block_q = dq if block_q is None else block_q
    block_k = dk if block_k is None else block_k
    if not (isinstance(block_q, int) and block_q > 0):
        raise ValueError(f"flash_attention: block_q must be a positive int, got {block_q!r}")
    if not (isinstance(block_k, int) and block_k > 0 and block_k % LANES == 0):
        raise ValueError(f"flash_attention: block_k must be a positive multiple of {LANES}, "
                         f"got {block_k!r}")
    s = spec
    if buffers is None:
        sym = {name: SizeVar(name, "int64") for name in s.lengths + tuple(s.bias_shape or ())
               if isinstance(name, str)}
        nb, sq, skv = (sym.get(d, d) for d in s.lengths)
        q = decl_buffer((nb, sq, s.heads, s.head_dim), s.dtype, "q")
        k = decl_buffer((nb, s.kv_heads, s.head_dim, skv), s.dtype, "k_t")
        v = decl_buffer((nb, skv, s.kv_heads, s.head_dim_v), s.dtype, "v")
        bias = None if s.bias_shape is None else decl_buffer(
            tuple(sym.get(d, d) for d in s.bias_shape), s.bias_dtype, "bias")
        out = decl_buffer((nb, sq, s.heads, s.head_dim_v), s.dtype, "T_attention")
    else:
        q, k, v, *rest = buffers
        bias, out = (rest[0], rest[1]) if s.bias_shape is not None else (None, rest[0])
    inputs = [q, k, v] + ([bias] if bias is not None else [])
    # The lengths as int32 index expressions: constants, or the buffers' own variables.
    lengths = _Lengths(_length(s.seq_q, q.shape[1]), _length(s.seq_kv, v.shape[1]),
                       _length(s.batch, q.shape[0]))
    block = _block(spec, block_q, block_k, q, k, v, bias, out, lengths)
    loops = [Var(n, _I32) for n in ("b", "n", "qo")]
    extents = (lengths.batch, _i(s.heads), _ceil_div_expr(lengths.q, block_q))
    body: Stmt = BlockRealize(tuple(loops), op.const(True), block)
    for lv, ext in reversed(list(zip(loops, extents))):
        body = For(lv, _i(0), ext, ForKind.SERIAL, body)
    root = Block((), tuple(BufferRegion.full(b) for b in inputs),
                 (BufferRegion.full(out),), "root", body)
    func = prim_func(inputs + [out], BlockRealize((), op.const(True), root))
    return func.with_attr(SPEC_ATTR, json.dumps(dataclasses.asdict(spec)))


def spec_of(func: PrimFunc) -> FlashAttentionSpec:
    """The spec a :func:`flash_attention` function was made for (from its attribute)."""
    text = func.attrs.get(SPEC_ATTR)
    if text is None:
        raise ValueError("the function was not made by flash_attention (no "
                         f"{SPEC_ATTR!r} attribute)")
    fields = json.loads(str(text))
    if fields.get("bias_shape") is not None:
        fields["bias_shape"] = tuple(fields["bias_shape"])
    return FlashAttentionSpec(**fields)


def block_sizes_of(func: PrimFunc) -> tuple[int, int]:
    """``(block_q, block_k)`` of a :func:`flash_attention` function."""
    from workbench.tir.functor import post_order_visit
    found: list[Block] = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, Block) and
                     n.name_hint == BLOCK_NAME else None)
    if len(found) != 1:
        raise ValueError(f"expected one {BLOCK_NAME!r} block, found {len(found)}")
    ann = found[0].annotations
    return int(ann["flash_attention.block_q"]), int(ann["flash_attention.block_k"])


def retile_flash_attention(func: PrimFunc, block_q: int, block_k: int) -> PrimFunc:
    """``func`` (made by :func:`flash_attention` and not transformed since) rebuilt with other
    block sizes and the same buffers and attributes: the ``tir.generator`` behind
    ``sch.regenerate(block, [block_q, block_k])``, which the tuner's space samples."""
    from workbench.ir.structural import structural_equal
    spec = spec_of(func)
    buffers = func.buffers
    if not structural_equal(func.body, flash_attention(spec, *block_sizes_of(func),
                                                       buffers=buffers).body):
        raise ValueError("the function was changed since flash_attention made it (regenerate "
                         "it before other primitives)")
    return flash_attention(spec, block_q, block_k, buffers=buffers).replace(attrs=func.attrs)


register_block_generator(GENERATOR, lambda func, params: retile_flash_attention(func, *params))


# ---- the block ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Lengths:
    """The sequence lengths S and T and the batch as int32 expressions: IntImm when
    static."""

    q: PrimExpr
    kv: PrimExpr
    batch: PrimExpr


def _length(declared: int | str, dim: PrimExpr) -> PrimExpr:
    # Index arithmetic is int32 in this kernel; a symbolic length is the buffer's int64 var.
    return _i(declared) if isinstance(declared, int) else op.cast(_I32, dim)


def _block(s: FlashAttentionSpec, bq: int, bk: int, q: Buffer, k: Buffer, v: Buffer,
           bias: Buffer | None, out: Buffer, lengths: _Lengths) -> Block:
    S, T = lengths.q, lengths.kv
    ivs = [IterVar(Range(_i(0), ext), Var(name, _I32), IterType.DATA_PAR)
           for name, ext in (("vb", lengths.batch), ("vn", _i(s.heads)),
                             ("vqo", _ceil_div_expr(S, bq)))]
    vb, vn, vqo = (iv.var for iv in ivs)
    H, Hv = s.head_dim, s.head_dim_v
    qs = decl_buffer((bq, H), _F32, "q_scaled")       # the block's query rows times scale
    sc = decl_buffer((bq, bk), _F32, "score_tile")    # scores, then probabilities
    acc = decl_buffer((bq, Hv), _F32, "acc")
    m = decl_buffer((bq,), _F32, "row_max")
    l_ = decl_buffer((bq,), _F32, "row_sum")
    red = decl_buffer((LANES,), _F32, "lanes")        # a vector of partial max / sums
    tmp = decl_buffer((2,), _F32, "row_scalars")      # m_new (safe), rescale factor
    rt = next(r for r in (4, 2, 1) if bq % r == 0)
    g = _i(s.heads // s.kv_heads)
    kvh = op.floordiv(vn, g)
    s0 = op.mul(vqo, _i(bq))
    neg_inf = op.neg(op.infinity(_F32))
    if s.symbolic:
        # A block's loops stop at its last query row, so a short sequence does not compute a
        # whole block of clamped rows: whole register tiles of ``rt`` rows, then the rest one
        # row at a time (rounding the rows up to a tile made a 1-row sequence compute 4 rows:
        # the kernel took 1.8x a static build's time at length 1).
        rows: int | PrimExpr = op.min(_i(bq), op.sub(S, s0))
        row_tiles: int | PrimExpr = op.floordiv(rows, _i(rt)) if rt > 1 else rows
        spare_rows: int | PrimExpr = op.floormod(rows, _i(rt)) if rt > 1 else 0
    else:
        row_tiles, rows, spare_rows = bq // rt, bq, 0

    def tiled(tile: Callable[[PrimExpr, int], Stmt]) -> Stmt:
        """``tile(first_row, n_rows)`` over the block's rows: ``row_tiles`` tiles of ``rt``
        rows, then ``spare_rows`` tiles of one row."""
        whole = _for("io", row_tiles, lambda io: tile(op.mul(io, _i(rt)), rt))
        if isinstance(spare_rows, int):
            return whole
        return _seq(whole, _for("ir", spare_rows, lambda ir: tile(
            op.add(op.mul(row_tiles, _i(rt)), ir), 1)))

    def row(i: PrimExpr) -> PrimExpr:                 # clamped query row of tile row i
        return op.min(op.add(s0, i), _plus(S, -1))

    def f32(x: PrimExpr) -> PrimExpr:
        return x if x.dtype == _F32 else op.cast(_F32, x)

    init = _seq(
        _for("i", rows, lambda i: _seq(
            BufferStore(m, neg_inf, (i,)), BufferStore(l_, op.const(0.0, _F32), (i,)),
            _for("h", Hv, lambda h: BufferStore(acc, op.const(0.0, _F32), (i, h)),
                 ForKind.VECTORIZED),
            _for("h", H, lambda h: BufferStore(
                qs, op.mul(f32(q[vb, row(i), vn, h]), op.const(s.softmax_scale, _F32)), (i, h)),
                ForKind.VECTORIZED))))

    def key_block(t0: PrimExpr, width: int, tail: bool) -> Stmt:
        """One block of ``width`` keys from ``t0``; only a ``tail`` one (past the last whole
        block) clamps its key index and masks keys past T: in a whole block ``t0 + j`` stays a
        unit-stride index, so a bias row is one vector load instead of a gather."""

        def key(j: PrimExpr) -> PrimExpr:
            t = op.add(t0, j)
            return op.min(t, _plus(T, -1)) if tail else t

        # Register tile: ``rt`` rows x the key block, accumulated over h (LLVM keeps the
        # tile in vector registers: the scratch is a private alloca).
        def tile(i0: PrimExpr, r: int) -> Stmt:
            return _seq(
                _for("ii", r, lambda ii: _for("j", width, lambda j: BufferStore(
                    sc, op.const(0.0, _F32), (op.add(i0, ii), j)),
                    ForKind.VECTORIZED), ForKind.UNROLLED),
                _for("h", H, lambda h: _for("ii", r, lambda ii: _for("j", width, lambda j: (
                    lambda i: BufferStore(sc, op.add(sc[i, j], op.mul(
                        qs[i, h], f32(k[vb, kvh, h, key(j)]))), (i, j)))(
                    op.add(i0, ii)), ForKind.VECTORIZED), ForKind.UNROLLED)))

        if not (tail and s.symbolic):
            scores = tiled(tile)
        else:
            # The clamped keys of a tail block are a gather per h (H gathers of a vector,
            # shared by the tile's rows). With only a few keys and rows (a short sequence:
            # 1 query x 1 key took 1.7x the static build's time, whose tail folds to one key)
            # each key's dot product over h, one scalar at a time, costs less.
            n_keys = op.min(_i(width), op.sub(T, t0))

            def key_by_key(i0: PrimExpr, r: int) -> Stmt:
                return _for("ii", r, lambda ii: (lambda i: _seq(
                    _for("j", width, lambda j: BufferStore(sc, op.const(0.0, _F32), (i, j)),
                         ForKind.VECTORIZED),
                    _for("j", n_keys, lambda j: _for("h", H, lambda h: BufferStore(
                        sc, op.add(sc[i, j], op.mul(qs[i, h], f32(k[vb, kvh, h, op.add(t0, j)]))),
                        (i, j))))))(op.add(i0, ii)))

            scores = tiled(lambda i0, r: IfThenElse(
                op.le(op.mul(n_keys, _i(r)), _i(FEW_KEY_ROWS)), key_by_key(i0, r), tile(i0, r)))

        def masked(i: PrimExpr, j: PrimExpr) -> PrimExpr:
            x = sc[i, j]
            if bias is not None:
                x = op.add(x, f32(bias[_bias_index(s, bias, vb, vn, row(i), key(j))]))
            keep = _visible(s, lengths, op.add(s0, i), op.add(t0, j), tail)
            # A select, not if_then_else: both sides are safe to evaluate (the indices are
            # clamped), and a select of a per-lane condition stays a vector operation.
            return x if keep is None else op.select(keep, x, neg_inf)

        def stats(i: PrimExpr) -> Stmt:
            mnew, alpha = (_i(0),), (_i(1),)
            return _seq(
                _for("j", width, lambda j: BufferStore(sc, masked(i, j), (i, j)),
                     ForKind.VECTORIZED),
                _lane_reduce(red, sc, i, width, op.max, neg_inf),
                BufferStore(tmp, op.max(m[i], _sum_lanes(red, op.max)), mnew),
                # A row with nothing visible so far keeps m = -inf: exponents are taken
                # against 0 instead, so they are exp(-inf) = 0, never exp(nan).
                BufferStore(tmp, op.exp(op.sub(m[i], _safe(tmp[mnew]))), alpha),
                BufferStore(m, tmp[mnew], (i,)),
                _for("j", width, lambda j: BufferStore(
                    sc, op.exp(op.sub(sc[i, j], _safe(tmp[mnew]))), (i, j)),
                    ForKind.VECTORIZED),
                _lane_reduce(red, sc, i, width, op.add, op.const(0.0, _F32)),
                BufferStore(l_, op.add(op.mul(l_[i], tmp[alpha]), _sum_lanes(red, op.add)),
                            (i,)),
                _for("h", Hv, lambda h: BufferStore(acc, op.mul(acc[i, h], tmp[alpha]),
                                                    (i, h)), ForKind.VECTORIZED))

        # ``rt`` rows of the accumulator per pass over the key block: each V row loaded once
        # per tile.
        pv = tiled(lambda i0, r: _for("j", width, lambda j: _for(
            "ii", r, lambda ii: _for("h", Hv, lambda h: (lambda i: BufferStore(
                acc, op.add(acc[i, h], op.mul(sc[i, j], f32(v[vb, key(j), kvh, h]))), (i, h)))(
                op.add(i0, ii)), ForKind.VECTORIZED), ForKind.UNROLLED)))
        work = _seq(scores, _for("i", rows, stats), pv)
        first_hidden = _first_hidden_key(s, lengths, op.add(s0, _i(bq - 1)))
        if first_hidden is None:
            return work
        # Causal: a key block wholly after the tile's last row's last visible key is skipped.
        return IfThenElse(op.lt(t0, first_hidden), work)

    if s.symbolic:
        # Whole blocks of ``bk`` keys, then the rest in blocks of one vector each (at most
        # bk / LANES - 1 of them, masked past T): a short sequence computes few wasted keys.
        whole_keys = op.mul(op.floordiv(T, _i(bk)), _i(bk))
        stream = _seq(
            _for("ko", op.floordiv(T, _i(bk)),
                 lambda ko: key_block(op.mul(ko, _i(bk)), bk, False)),
            _for("kt", _ceil_div_expr(op.sub(T, whole_keys), LANES),
                 lambda kt: key_block(op.add(whole_keys, op.mul(kt, _i(LANES))), LANES, True)))
    else:
        whole, rest = divmod(s.seq_kv, bk)
        stream = _seq(*([_for("ko", whole, lambda ko: key_block(op.mul(ko, _i(bk)), bk,
                                                                 False))] if whole else []) +
                      ([key_block(op.mul(_i(whole), _i(bk)), bk, True)] if rest else []))

    def store(i: PrimExpr) -> Stmt:
        inv = op.if_then_else(op.gt(l_[i], op.const(0.0, _F32)),
                              op.div(op.const(1.0, _F32), l_[i]), op.const(0.0, _F32))
        write = _for("h", Hv, lambda h: BufferStore(
            out, _cast(s.dtype, op.mul(acc[i, h], inv)), (vb, op.add(s0, i), vn, h)),
            ForKind.VECTORIZED)
        if not s.symbolic and s.seq_q % bq == 0:
            return write
        return IfThenElse(op.lt(op.add(s0, i), S), write)

    body = _seq(init, stream, _for("i", rows, store))
    reads = [BufferRegion.full(b) for b in (q, k, v) + ((bias,) if bias is not None else ())]
    return Block(tuple(ivs), tuple(reads), (BufferRegion.full(out),), BLOCK_NAME, body,
                 alloc_buffers=(qs, sc, acc, m, l_, red, tmp),
                 annotations=FrozenDict({"schedule_rule": SCHEDULE_RULE,
                                         "tir.generator": GENERATOR,
                                         "flash_attention.block_q": bq,
                                         "flash_attention.block_k": bk}))


def _visible(s: FlashAttentionSpec, lengths: _Lengths, row: PrimExpr, col: PrimExpr,
             tail: bool) -> PrimExpr | None:
    """Key ``col`` exists (checked in ``tail`` blocks only) and the causal mask (if any)
    lets query ``row`` see it; None: always."""
    exists = op.lt(col, lengths.kv) if tail else None
    if s.causal is None:
        return exists
    seen = op.le(col, op.add(row, _causal_offset(s, lengths, 0)))
    return seen if exists is None else op.logical_and(exists, seen)


def _first_hidden_key(s: FlashAttentionSpec, lengths: _Lengths,
                      last_row: PrimExpr) -> PrimExpr | None:
    if s.causal is None:
        return None
    return op.add(last_row, _causal_offset(s, lengths, 1))


def _causal_offset(s: FlashAttentionSpec, lengths: _Lengths, extra: int) -> PrimExpr:
    """How far past its own row a query sees (0, or T - S bottom-right aligned), plus
    ``extra``."""
    if s.causal == "TopLeft":
        return _i(extra)
    if isinstance(lengths.kv, IntImm) and isinstance(lengths.q, IntImm):
        return _i(lengths.kv.value - lengths.q.value + extra)
    return _plus(op.sub(lengths.kv, lengths.q), extra)


def _plus(x: PrimExpr, k: int) -> PrimExpr:
    return _i(x.value + k) if isinstance(x, IntImm) else (op.add(x, _i(k)) if k else x)


def _ceil_div_expr(x: PrimExpr, b: int) -> PrimExpr:
    if isinstance(x, IntImm):
        return _i(_ceil_div(x.value, b))
    return op.floordiv(op.add(x, _i(b - 1)), _i(b))


def _bias_index(s: FlashAttentionSpec, bias: Buffer, b: PrimExpr, n: PrimExpr,
                row: PrimExpr, col: PrimExpr) -> tuple:
    """Right-aligned broadcast of ``bias`` against (B, N, S, T)."""
    full = (b, n, row, col)[4 - len(bias.shape):]
    return tuple(_i(0) if getattr(d, "value", None) == 1 else x
                 for d, x in zip(bias.shape, full))


def _lane_reduce(red: Buffer, sc: Buffer, i: PrimExpr, bk: int,
                 combine: Callable[[PrimExpr, PrimExpr], PrimExpr], init: PrimExpr) -> Stmt:
    """``red[l] = combine over jo of sc[i, jo*LANES + l]``: the row reduced to one vector (a
    scalar loop over the row would cost more than the exponentials)."""
    return _seq(
        _for("l", LANES, lambda l: BufferStore(red, init, (l,)), ForKind.VECTORIZED),
        _for("jo", bk // LANES, lambda jo: _for("l", LANES, lambda l: BufferStore(
            red, combine(red[l], sc[i, op.add(op.mul(jo, _i(LANES)), l)]), (l,)),
            ForKind.VECTORIZED)))


def _sum_lanes(red: Buffer, combine: Callable[[PrimExpr, PrimExpr], PrimExpr]) -> PrimExpr:
    """The LANES entries of ``red`` combined pairwise (a tree: 4 levels, no loop)."""
    vals = [red[_i(l)] for l in range(LANES)]
    while len(vals) > 1:
        vals = [combine(vals[a], vals[a + 1]) for a in range(0, len(vals), 2)]
    return vals[0]


def _safe(m: PrimExpr) -> PrimExpr:
    return op.if_then_else(op.eq(m, op.neg(op.infinity(_F32))), op.const(0.0, _F32), m)


# ---- small builders ----------------------------------------------------------------------------

def _i(v: int) -> PrimExpr:
    return op.const(v, _I32)


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _ceil_div(a, b) * b


def _cast(dtype: str, x: PrimExpr) -> PrimExpr:
    return x if dtype == _F32 else op.cast(dtype, x)


def _seq(*stmts: Stmt) -> Stmt:
    return SeqStmt(tuple(stmts)) if len(stmts) > 1 else stmts[0]


def _for(name: str, extent: int | PrimExpr, body: Callable[[Var], Stmt],
         kind: str = ForKind.SERIAL) -> Stmt:
    lv = Var(name, _I32)
    return For(lv, _i(0), _i(extent) if isinstance(extent, int) else extent, kind, body(lv))
