"""Winograd convolution F(4x4, 3x3) and F(2x2, 3x3) on the channel-blocked layout (TVM's
``conv2d_nchw_winograd``, after Lavin & Gray, arXiv 1509.09308).

A 3x3, stride-1 convolution computes each m x m output tile from an alpha x alpha input tile
(alpha = m + 2) with alpha^2 products per (input, output) channel pair instead of 9 m^2: 36
instead of 144 for F(4x4), 16 instead of 36 for F(2x2), whose transformed weight is 16/36 the
size (the one used on small images, where F(4x4)'s would be read for a few tiles):

    Y = A^T [ (G g G^T) (.) (B^T d B) ] A

``G g G^T`` (the weight transform) is done once, at compile time
(:func:`winograd_weight_transform`: ``U[xi, nu, O/B, C/B, B_i, B_o]``, xi and nu over alpha:
the weight's shape tells the kernel which F(m, 3) it was made for); per call the kernel runs

1. ``pad_temp``: the input padded to whole tiles;
2. ``data_pack_rows`` / ``data_pack``: ``B^T d B`` for every tile ``p`` and input channel, as two
   alpha-term reductions (rows, then columns): ``V[xi, nu, P, C/B, B]``;
3. ``bgemm``: alpha^2 independent products ``M[xi, nu] = V[xi, nu] @ U[xi, nu]`` over the input
   channels -- the bulk of the work, register-tiled like a blocked convolution;
4. ``inverse_rows`` / ``inverse``: ``A^T M A``, again as two alpha-term reductions, then the
   m x m tiles gathered into the output ``[N][O/B][OH][OW][B]`` (an elementwise epilogue reads
   them directly).

Each transform's coefficient is a select over (output index, reduction index) of a constant
matrix; the default schedule (``workbench.dlight``'s ``SpatialReduction``) unrolls both loops,
so the selects fold to constants and the zero entries vanish.
The four transform blocks carry the annotation ``schedule_rule = "winograd_transform"``
(:data:`TRANSFORM_RULE`): the tuner gives them that custom rule's space
(``meta_schedule/schedule_rule/winograd.py``), not a product's.

F(4x4)'s matrices use the interpolation points 0, 1, -1, 2, -2 and infinity; in float32 the
result differs from direct convolution by about 1e-6 relative (well inside the 1e-4 the model
tests ask for); F(2x2)'s (0, 1, -1, infinity) by less.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.nn.conv2d import get_pad_tuple
from workbench.topi.nn.layout import layout_block, parse_layout
from workbench.topi.nn.pad import pad
from workbench.topi.utils import get_const_int, index_const, index_dtype, is_const_int, shape_str

__all__ = ["conv2d_winograd_nchwc", "winograd_weight_transform", "winograd_matrices",
           "tile_of", "TILE", "ALPHA", "TILES", "TRANSFORM_RULE"]

TILE = 4            # m: the default output tile (F(4x4, 3x3))
ALPHA = TILE + 2    # alpha = m + r - 1 for r = 3

_BT = np.array([[4, 0, -5, 0, 1, 0],
                [0, -4, -4, 1, 1, 0],
                [0, 4, -4, -1, 1, 0],
                [0, -2, -1, 2, 1, 0],
                [0, 2, -1, -2, 1, 0],
                [0, 4, 0, -5, 0, 1]], dtype=np.float64)
_G = np.array([[1 / 4, 0, 0],
               [-1 / 6, -1 / 6, -1 / 6],
               [-1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6],
               [1 / 24, -1 / 12, 1 / 6],
               [0, 0, 1]], dtype=np.float64)
_AT = np.array([[1, 1, 1, 1, 1, 0],
                [0, 1, -1, 2, -2, 0],
                [0, 1, 1, 4, 4, 0],
                [0, 1, -1, 8, -8, 1]], dtype=np.float64)


# F(2x2, 3x3): interpolation points 0, 1, -1 and infinity (4x4 input tiles, 16 products per
# channel pair instead of 36 for 2.25x fewer outputs -- but a transformed weight 16/36 the size)
_BT2 = np.array([[1, 0, -1, 0],
                 [0, 1, 1, 0],
                 [0, -1, 1, 0],
                 [0, 1, 0, -1]], dtype=np.float64)
_G2 = np.array([[1, 0, 0],
                [1 / 2, 1 / 2, 1 / 2],
                [1 / 2, -1 / 2, 1 / 2],
                [0, 0, 1]], dtype=np.float64)
_AT2 = np.array([[1, 1, 1, 0],
                 [0, 1, -1, -1]], dtype=np.float64)
#: ``(B^T, G, A^T)`` by output tile size m; the transformed weight's first dimension (alpha =
#: m + 2) tells a kernel which one it was made for.
_MATRICES = {4: (_BT, _G, _AT), 2: (_BT2, _G2, _AT2)}
TILES = tuple(sorted(_MATRICES))

#: The ``schedule_rule`` annotation of the four transform blocks (TVM's
#: ``winograd_data_pack`` / ``winograd_inverse``): the tuner hands them to the custom rule of
#: that name (``meta_schedule/schedule_rule/winograd.py``) instead of tiling each like a
#: product -- four generic tilings with three write-cache states each made 3^5 design spaces
#: a kernel, ~25 s of space generation per Winograd task.
TRANSFORM_RULE = "winograd_transform"


def tile_of(alpha: int) -> int:
    """The output tile size m of a transformed weight whose first dimension is ``alpha``."""
    if alpha - 2 not in _MATRICES:
        raise ValueError(f"no Winograd F(m, 3) has {alpha}x{alpha} input tiles (m in {TILES})")
    return alpha - 2


def winograd_matrices(tile: int = TILE) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(B^T, G, A^T)`` of F(``tile``, 3) in float64 (``tile`` 4 or 2)."""
    if tile not in _MATRICES:
        raise ValueError(f"winograd_matrices: tile must be one of {TILES}, got {tile!r}")
    return tuple(m.copy() for m in _MATRICES[tile])  # type: ignore[return-value]


def winograd_weight_transform(w: np.ndarray, block: int, tile: int = TILE) -> np.ndarray:
    """An OIHW 3x3 weight (numpy) as ``U[a, a, O/B, I/B, B_i, B_o]`` with ``a = tile + 2``
    (``G g G^T`` of F(``tile``, 3), float64 then rounded once to the weight's dtype); O and I
    are padded with zeros to multiples of ``block``."""
    o, i, kh, kw = w.shape
    if (kh, kw) != (3, 3):
        raise ValueError(f"winograd_weight_transform: expects a 3x3 kernel, got {w.shape}")
    _, g, _ = winograd_matrices(tile)
    alpha = tile + 2
    op_, ip = -(-o // block) * block, -(-i // block) * block
    wp = np.zeros((op_, ip, 3, 3))
    wp[:o, :i] = w
    u = np.einsum("xa,oiab,yb->xyoi", g, wp, g)               # (alpha, alpha, O, I)
    u = u.reshape(alpha, alpha, op_ // block, block, ip // block, block)
    return np.ascontiguousarray(u.transpose(0, 1, 2, 4, 5, 3)).astype(w.dtype)


def _coef(mat: np.ndarray, row: PrimExpr, col: PrimExpr, dtype: str) -> PrimExpr:
    """``mat[row, col]`` for loop variables: a select chain over the non-zero entries (constant
    once the loops are unrolled)."""
    out: PrimExpr = op.const(0.0, dtype)
    for r in range(mat.shape[0]):
        for c in range(mat.shape[1]):
            v = float(mat[r, c])
            if v != 0.0:
                out = op.select(op.all(op.eq(row, r), op.eq(col, c)), op.const(v, dtype), out)
    return out


def _transform(src: Tensor, mat: np.ndarray, axis: int, name: str, c_: Any) -> Tensor:
    """``src`` (``[alpha or m, alpha, P, C/B, B]``) with dimension ``axis`` (0 or 1) multiplied
    by the constant matrix ``mat``: ``out[.., k, ..] = sum_r mat[k, r] * src[.., r, ..]``."""
    r = te.reduce_axis((0, c_(mat.shape[1])), name=f"r_{name}")
    shape = list(src.shape)
    shape[axis] = c_(mat.shape[0])

    def body(*i: PrimExpr) -> PrimExpr:
        idx = list(i)
        idx[axis] = r
        return te.sum(_coef(mat, i[axis], r, src.dtype) * src[tuple(idx)], axis=[r])
    return te.compute(tuple(shape), body, name=name, attrs={"schedule_rule": TRANSFORM_RULE})


def conv2d_winograd_nchwc(data: Tensor, kernel: Tensor, padding: Any,
                          data_layout: str = "NCHW16c", out_layout: str = "NCHW16c",
                          out_dtype: str | None = None) -> Tensor:
    """A 3x3 stride-1 convolution of blocked ``data`` by the Winograd-transformed ``kernel``
    (``U[alpha, alpha, O/B, C/B, B, B]``, :func:`winograd_weight_transform`: alpha 6 for
    F(4x4, 3x3), 4 for F(2x2, 3x3)), output in ``out_layout`` (see the module docstring)."""
    what = f"conv2d_winograd_NCHWc({data_layout} -> {out_layout})"
    b = layout_block(data_layout, "C")
    if b is None or layout_block(out_layout, "C") != b or len(parse_layout(data_layout)) != 5:
        raise ValueError(f"{what}: data and output must be NCHW{{B}}c with the same block")
    if data.ndim != 5 or kernel.ndim != 6:
        raise ValueError(f"{what}: expects 5-d data and a 6-d transformed kernel, got "
                         f"{shape_str(data.shape)} and {shape_str(kernel.shape)}")
    ks = [get_const_int(d) for d in kernel.shape]
    ds = [get_const_int(d) if is_const_int(d) else d for d in data.shape]
    if ks[0] - 2 not in TILES or ks[1] != ks[0] or ks[3] != ds[1] or ks[4] != b or \
            ks[5] != b:
        raise ValueError(f"{what}: kernel {shape_str(kernel.shape)} is not a transformed "
                         f"weight for data {shape_str(data.shape)}")
    out_dtype = out_dtype or data.dtype
    alpha = ks[0]
    m = tile_of(alpha)                      # F(m, 3): the weight was transformed for it
    bt_mat, _, at_mat = winograd_matrices(m)
    n, cb, h, w = ds[0], ds[1], ds[2], ds[3]
    ob = ks[2]
    pt, pl, pb, pr = get_pad_tuple(padding, (3, 3))
    oh, ow = h + pt + pb - 2, w + pl + pr - 2
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{what}: the 3x3 window does not fit data {shape_str(data.shape)}")
    th, tw = -(-oh // m), -(-ow // m)
    it = index_dtype(data, kernel)
    c_ = lambda v: index_const(v, it)  # noqa: E731
    if not isinstance(n, int):
        raise ValueError(f"{what}: the batch must be constant")
    tiles = n * th * tw
    padded = pad(data, (0, 0, pt, pl, 0),
                 (0, 0, th * m + 2 - h - pt, tw * m + 2 - w - pl, 0), name="pad_temp")
    dt = out_dtype
    ra = te.reduce_axis((0, c_(alpha)), name="ra")

    def data_rows(xi: PrimExpr, col: PrimExpr, p: PrimExpr, c: PrimExpr, ci: PrimExpr
                  ) -> PrimExpr:
        nn, y, x = p // c_(th * tw), p // c_(tw) % c_(th) * c_(m), p % c_(tw) * c_(m)
        return te.sum(_coef(bt_mat, xi, ra, dt) *
                      op.cast(dt, padded[nn, c, y + ra, x + col, ci]), axis=[ra])
    rows = te.compute((c_(alpha), c_(alpha), c_(tiles), c_(cb), c_(b)), data_rows,
                      name="data_pack_rows", attrs={"schedule_rule": TRANSFORM_RULE})
    packed = _transform(rows, bt_mat, 1, "data_pack", c_)
    rc = te.reduce_axis((0, c_(cb)), name="rc")
    ri = te.reduce_axis((0, c_(b)), name="ri")
    bgemm = te.compute(
        (c_(alpha), c_(alpha), c_(tiles), c_(ob), c_(b)),
        lambda xi, nu, p, o, oi: te.sum(packed[xi, nu, p, rc, ri] *
                                        op.cast(dt, kernel[xi, nu, o, rc, ri, oi]),
                                        axis=[rc, ri]),
        name="bgemm", attrs={"layout_free_placeholders": [kernel]})
    inv = _transform(_transform(bgemm, at_mat, 0, "inverse_rows", c_), at_mat, 1, "inverse", c_)

    def gather(nn: PrimExpr, o: PrimExpr, y: PrimExpr, x: PrimExpr, oi: PrimExpr) -> PrimExpr:
        p = (nn * c_(th) + y // c_(m)) * c_(tw) + x // c_(m)
        return inv[y % c_(m), x % c_(m), p, o, oi]
    return te.compute((c_(n), c_(ob), c_(oh), c_(ow), c_(b)), gather,
                      name="conv2d_winograd_NCHWc", tag="conv2d_winograd_NCHWc")
