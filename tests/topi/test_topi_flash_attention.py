"""The fused streaming attention kernel (workbench.topi.nn.attention) against a float64 numpy
softmax: masks, bias broadcasting, grouped heads, odd sizes, large logits, fully masked rows;
its memory (no S x T buffer) and its block-size regeneration (sch.regenerate)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import workbench
from workbench.tir import stmt as S
from workbench.tir.functor import post_order_visit
from workbench.tir.schedule import Schedule, ScheduleError
from workbench.tir.schedule.testing import verify_trace_roundtrip
from workbench.topi.nn.attention import (
    FlashAttentionSpec, block_sizes_of, default_block_sizes, flash_attention,
    retile_flash_attention,
)


def reference(q, k, v, bias=None, scale=None, causal=None):
    """float64 softmax(Q K^T * scale + bias, masked) V in BSNH; rows with no visible key -> 0
    (what torch's scaled_dot_product_attention returns since 2.5)."""
    b, s, n, h = q.shape
    t, nk = k.shape[1], k.shape[2]
    qh = q.transpose(0, 2, 1, 3).astype(np.float64)
    kh = np.repeat(k.transpose(0, 2, 1, 3), n // nk, axis=1).astype(np.float64)
    vh = np.repeat(v.transpose(0, 2, 1, 3), n // nk, axis=1).astype(np.float64)
    x = qh @ kh.transpose(0, 1, 3, 2) * (scale if scale is not None else 1 / math.sqrt(h))
    if bias is not None:
        x = x + bias.astype(np.float64)
    if causal is not None:
        off = 0 if causal == "TopLeft" else t - s
        x = np.where(np.arange(t)[None, :] <= np.arange(s)[:, None] + off, x, -np.inf)
    mx = x.max(-1, keepdims=True)
    e = np.exp(x - np.where(np.isneginf(mx), 0, mx))
    tot = e.sum(-1, keepdims=True)
    p = np.divide(e, tot, out=np.zeros_like(e), where=tot > 0)
    return (p @ vh).transpose(0, 2, 1, 3)


def run(func, q, k, v, *rest, out_shape):
    """Run the kernel on BSNH ``q``, ``k``, ``v`` (the keys passed transposed, (B, N_kv, H, T),
    as the kernel takes them)."""
    lib = workbench.compile(func, "llvm")
    k_t = np.ascontiguousarray(k.transpose(0, 2, 3, 1))
    args = [workbench.nd.array(a) for a in (q, k_t, v) + rest] + \
        [workbench.nd.array(np.full(out_shape, np.nan, q.dtype))]
    lib(*args)
    return args[-1].numpy()


def inputs(rng, b, s, n, h, t, nk, hv, mult=1.0):
    return (rng.standard_normal((b, s, n, h)).astype(np.float32) * mult,
            rng.standard_normal((b, t, nk, h)).astype(np.float32),
            rng.standard_normal((b, t, nk, hv)).astype(np.float32))


CASES = [
    # (b, s, n, h, t, nk, hv), causal, bias shape, (block_q, block_k)
    ((1, 37, 4, 16, 45, 4, 16), None, None, (8, 16)),                # odd, S != T
    ((2, 33, 4, 16, 70, 2, 24), "BottomRight", None, (16, 32)),      # GQA, H_v != H
    ((1, 50, 2, 32, 50, 1, 32), "TopLeft", None, (32, 64)),          # multi-query
    ((2, 21, 4, 8, 13, 4, 8), None, (2, 1, 1, 13), (4, 16)),         # padding mask per batch
    ((1, 19, 3, 16, 23, 3, 16), None, (19, 23), (None, None)),       # full (S, T) mask
    ((2, 10, 3, 16, 17, 3, 16), "TopLeft", (2, 3, 10, 17), (3, 16)),  # per-head bias + causal
]


@pytest.mark.parametrize("dims, causal, bias_shape, blocks", CASES)
def test_kernel_matches_float64_softmax(dims, causal, bias_shape, blocks):
    rng = np.random.default_rng(hash((dims, causal)) % 2**32)
    q, k, v = inputs(rng, *dims)
    b, s, n, h, t, nk, hv = dims
    bias = None if bias_shape is None else rng.standard_normal(bias_shape).astype(np.float32)
    spec = FlashAttentionSpec(b, s, n, h, t, nk, hv, causal=causal, bias_shape=bias_shape)
    func = flash_attention(spec, *blocks)
    got = run(func, *((q, k, v) + ((bias,) if bias is not None else ())),
              out_shape=(b, s, n, hv))
    np.testing.assert_allclose(got, reference(q, k, v, bias, None, causal), rtol=1e-5,
                               atol=1e-5)


def test_masks_as_bias_padding_and_fully_masked_rows_give_zeros():
    rng = np.random.default_rng(1)
    q, k, v = inputs(rng, 2, 12, 2, 16, 20, 2, 16)
    keep = np.ones((2, 1, 12, 20), bool)
    keep[0, 0, :, 15:] = False            # padding: the last keys of batch 0
    keep[1, 0, 4, :] = False              # a query that sees nothing
    keep[0, 0, 7, :] = False
    bias = np.where(keep, 0, -np.inf).astype(np.float32)
    spec = FlashAttentionSpec(2, 12, 2, 16, 20, 2, 16, bias_shape=(2, 1, 12, 20))
    got = run(flash_attention(spec, 8, 16), q, k, v, bias, out_shape=(2, 12, 2, 16))
    assert np.isfinite(got).all()
    assert (got[1, 4] == 0).all() and (got[0, 7] == 0).all()
    np.testing.assert_allclose(got, reference(q, k, v, bias), rtol=1e-5, atol=1e-5)


def test_causal_bottom_right_with_more_queries_than_keys_masks_whole_rows():
    rng = np.random.default_rng(2)
    q, k, v = inputs(rng, 1, 20, 2, 16, 7, 2, 16)
    spec = FlashAttentionSpec(1, 20, 2, 16, 7, 2, 16, causal="BottomRight")
    got = run(flash_attention(spec, 8, 16), q, k, v, out_shape=(1, 20, 2, 16))
    assert (got[0, :13] == 0).all()       # rows s < S - T see no key
    np.testing.assert_allclose(got, reference(q, k, v, causal="BottomRight"), rtol=1e-5,
                               atol=1e-5)


def test_large_logits_do_not_overflow():
    rng = np.random.default_rng(3)
    q, k, v = inputs(rng, 1, 40, 2, 64, 90, 2, 64, mult=1500.0)
    spec = FlashAttentionSpec(1, 40, 2, 64, 90, 2, 64, scale=1.0)
    got = run(flash_attention(spec, 16, 32), q, k, v, out_shape=(1, 40, 2, 64))
    ref = reference(q, k, v, scale=1.0)
    scores = np.einsum("bsnh,btnh->bnst", q.astype(np.float64), k.astype(np.float64))
    assert np.abs(scores).max() > 1e4     # exp(score) alone overflows float32
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def test_half_precision_inputs_compute_in_float32():
    rng = np.random.default_rng(5)
    q, k, v = (a.astype(np.float16) for a in inputs(rng, 1, 20, 2, 16, 24, 2, 16))
    spec = FlashAttentionSpec(1, 20, 2, 16, 24, 2, 16, dtype="float16", causal="TopLeft")
    got = run(flash_attention(spec), q, k, v, out_shape=(1, 20, 2, 16))
    assert got.dtype == np.float16
    ref = reference(q.astype(np.float32), k.astype(np.float32), v.astype(np.float32),
                    causal="TopLeft")
    np.testing.assert_allclose(got.astype(np.float32), ref, rtol=2e-3, atol=2e-3)


def test_no_buffer_holds_the_score_matrix():
    s = t = 256
    spec = FlashAttentionSpec(1, s, 2, 64, t, 2, 64, causal="TopLeft")
    func = flash_attention(spec)
    sizes = []

    def visit(node):
        if isinstance(node, S.Block):
            sizes.extend(int(np.prod([d.value for d in b.shape])) for b in node.alloc_buffers)
    post_order_visit(func.body, visit)
    assert sizes and max(sizes) < s * t // 8
    lowered = workbench.lower(func)
    allocs = []
    for f in lowered.functions.values():
        post_order_visit(f.body, lambda n: allocs.append(
            int(np.prod([e.value for e in n.extents]))) if isinstance(n, S.Allocate) else None)
    assert allocs and max(allocs) < s * t // 8


def test_default_block_sizes_fit_short_sequences():
    spec = FlashAttentionSpec(1, 5, 2, 16, 9, 2, 16)
    assert default_block_sizes(spec) == (5, 16)
    assert default_block_sizes(FlashAttentionSpec(1, 512, 12, 64, 512, 12, 64)) == (64, 64)


def test_regenerate_changes_block_sizes_keeps_results_and_replays():
    rng = np.random.default_rng(4)
    q, k, v = inputs(rng, 1, 30, 2, 16, 40, 2, 16)
    spec = FlashAttentionSpec(1, 30, 2, 16, 40, 2, 16, causal="TopLeft")
    func = flash_attention(spec)
    sch = Schedule(func)
    block = sch.get_sblock("flash_attention")
    bq = sch.sample_categorical([4, 8], [0.5, 0.5], decision=1)
    sch.regenerate(block, [bq, 32])
    loops = sch.get_loops(sch.get_sblock("flash_attention"))
    sch.parallel(sch.fuse(*loops))
    new = sch.mod["main"]
    assert block_sizes_of(new) == (8, 32) and block_sizes_of(func) == (30, 48)
    assert [b.name for b in new.buffers] == [b.name for b in func.buffers]
    np.testing.assert_allclose(run(new, q, k, v, out_shape=(1, 30, 2, 16)),
                               reference(q, k, v, causal="TopLeft"), rtol=1e-5, atol=1e-5)
    # the trace round-trips through JSON and Python and replays to the same IR
    verify_trace_roundtrip(sch, func)
    assert any("sch.regenerate(block=" in line for line in sch.trace.as_python())


def test_regenerate_refuses_a_transformed_kernel_and_bad_sizes():
    spec = FlashAttentionSpec(1, 16, 2, 16, 16, 2, 16)
    sch = Schedule(flash_attention(spec))
    block = sch.get_sblock("flash_attention")
    sch.fuse(*sch.get_loops(block))
    with pytest.raises(ScheduleError, match="changed since flash_attention made it"):
        sch.regenerate(block, [8, 16])
    sch = Schedule(flash_attention(spec))
    with pytest.raises(ScheduleError, match="block_k must be a positive multiple of 16"):
        sch.regenerate(sch.get_sblock("flash_attention"), [8, 24])
    with pytest.raises(ValueError, match="not made by flash_attention"):
        retile_flash_attention(sch.mod["main"].replace(attrs={}), 8, 16)


def test_spec_checks_its_arguments():
    with pytest.raises(ValueError, match=r"query heads \(3\) must be a multiple of key heads"):
        FlashAttentionSpec(1, 4, 3, 8, 4, 2, 8)
    with pytest.raises(ValueError, match="causal must be None, 'TopLeft' or 'BottomRight'"):
        FlashAttentionSpec(1, 4, 2, 8, 4, 2, 8, causal="top")
    with pytest.raises(ValueError, match=r"bias \(3, 4\) does not broadcast"):
        FlashAttentionSpec(1, 4, 2, 8, 4, 2, 8, bias_shape=(3, 4))


def _row_tile_extents(func):
    """Extents of the register tile's row loops (``ii``) in ``func``."""
    found = set()
    post_order_visit(func.body, lambda n: found.add(int(n.extent.value)) if isinstance(
        n, S.For) and n.loop_var.name == "ii" else None)
    return found


@pytest.mark.parametrize("causal", [None, "BottomRight"])
def test_symbolic_lengths_compute_whole_row_tiles_then_single_rows(causal):
    """With a symbolic S a query block's rows are whole 4-row register tiles and then single
    rows (a 1-row sequence computes one row, not a tile of 4), and a tail key block with few
    keys computes its scores key by key (a loop over the keys left, no gather); every length,
    a multiple of the tile or not, against float64 numpy."""
    spec = FlashAttentionSpec(1, "s", 2, 16, "t", 2, 16, causal=causal)
    func = flash_attention(spec)
    static = flash_attention(FlashAttentionSpec(1, 64, 2, 16, 70, 2, 16))
    assert _row_tile_extents(func) == {4, 1}
    assert _row_tile_extents(static) == {4}

    def key_loops(f):
        found = []
        post_order_visit(f.body, lambda n: found.append(n) if isinstance(n, S.For) and
                         n.loop_var.name == "j" and not hasattr(n.extent, "value") else None)
        return found
    assert key_loops(func) and not key_loops(static)
    lib = workbench.compile(func, "llvm")
    rng = np.random.default_rng(7)
    for s, t in ((1, 1), (2, 5), (3, 17), (4, 4), (7, 7), (66, 66), (71, 40)):
        q, k, v = inputs(rng, 1, s, 2, 16, t, 2, 16)
        args = [workbench.nd.array(a) for a in (q, np.ascontiguousarray(k.transpose(0, 2, 3, 1)),
                                                v, np.full((1, s, 2, 16), np.nan, np.float32))]
        lib(*args)
        np.testing.assert_allclose(args[-1].numpy(), reference(q, k, v, causal=causal),
                                   rtol=1e-5, atol=1e-5, err_msg=f"S={s} T={t}")
