"""2-d pooling: ``pool2d`` (max/avg, padding, dilation, ceil_mode, count_include_pad),
``adaptive_pool`` / ``adaptive_avg_pool2d`` and ``global_pool`` (TVM's signatures).

The layout string names the dimensions ("NCHW", "NHWC"); only H and W are pooled. Max pools
pad with the dtype's lowest value, average pools with 0 and then divide a ``pool_sum`` stage by
the window's element count in a ``pool_avg`` stage.
"""
from __future__ import annotations

from typing import Any, Sequence

from workbench import te
from workbench.te.tensor import Tensor
from workbench.tir import op
from workbench.tir.expr import PrimExpr
from workbench.topi.nn.pad import pad
from workbench.topi.utils import as_tuple, get_const_int, index_const, index_dtype, layout_dims


def _hw_axes(layout: str, ndim: int, what: str) -> tuple[int, int]:
    if len(layout) != ndim or "H" not in layout or "W" not in layout:
        raise ValueError(f"{what}: layout {layout!r} does not describe a {ndim}-d tensor with "
                         "H and W dimensions")
    return layout.index("H"), layout.index("W")


def _static_hw(data: Tensor, layout: str, what: str) -> tuple[int, int]:
    """H and W as ints: any dim but H and W (batch, channels) may be symbolic."""
    other = "".join(c for c in layout if c not in "HW")
    dims = layout_dims(data.shape, layout, f"{what}: data", symbolic=other)
    return dims["H"], dims["W"]


def _pool_out(size: int, lo: int, hi: int, k: int, s: int, d: int, ceil_mode: bool) -> int:
    span = size + lo + hi - ((k - 1) * d + 1)
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    # PyTorch/TVM rule: the last window must start inside the input or the low padding.
    if ceil_mode and (out - 1) * s >= size + lo:
        out -= 1
    return out


def pool2d(data: Tensor, kernel: Sequence[int], stride: Sequence[int],
           dilation: Sequence[int], padding: Sequence[int], pool_type: str,
           ceil_mode: bool = False, layout: str = "NCHW",
           count_include_pad: bool = True) -> Tensor:
    """Max or average pooling over H and W.

    ``padding`` is ``(top, left, bottom, right)`` (or 2 / 1 values). An average divides by the
    window size clipped to the padded input when ``count_include_pad``, else by the number of
    input elements in the window.
    """
    what = f"pool2d({pool_type})"
    if pool_type not in ("max", "avg"):
        raise ValueError(f"pool2d: pool_type must be 'max' or 'avg', got {pool_type!r}")
    ha, wa = _hw_axes(layout, data.ndim, what)
    kh, kw = as_tuple(kernel, 2, f"{what}: kernel")
    sh, sw = as_tuple(stride, 2, f"{what}: stride")
    dh, dw = as_tuple(dilation, 2, f"{what}: dilation")
    pads = [get_const_int(p) for p in ([padding] if isinstance(padding, int) else padding)]
    pt, pl, pb, pr = (pads * 4)[:4] if len(pads) == 1 else (
        (pads[0], pads[1], pads[0], pads[1]) if len(pads) == 2 else tuple(pads))
    h, w = _static_hw(data, layout, what)
    oh = _pool_out(h, pt, pb, kh, sh, dh, ceil_mode)
    ow = _pool_out(w, pl, pr, kw, sw, dw, ceil_mode)
    # ceil_mode may read past the declared padding: pad enough for the last window.
    eb = max(pb, (oh - 1) * sh + (kh - 1) * dh + 1 - h - pt)
    er = max(pr, (ow - 1) * sw + (kw - 1) * dw + 1 - w - pl)
    before, after = [0] * data.ndim, [0] * data.ndim
    before[ha], before[wa], after[ha], after[wa] = pt, pl, eb, er
    fill = op.min_value(data.dtype) if pool_type == "max" else op.const(0, data.dtype)
    padded = pad(data, before, after, pad_value=fill, name="pad_temp")
    it = index_dtype(data)
    ry = te.reduce_axis((0, index_const(kh, it)), name="rv0")
    rx = te.reduce_axis((0, index_const(kw, it)), name="rv1")
    out_shape = list(data.shape)
    out_shape[ha], out_shape[wa] = op.const(oh, it), op.const(ow, it)

    def window(i: Sequence[PrimExpr]) -> tuple:
        idx = list(i)
        idx[ha] = i[ha] * sh + ry * dh
        idx[wa] = i[wa] * sw + rx * dw
        return tuple(idx)
    if pool_type == "max":
        return te.compute(tuple(out_shape), lambda *i: te.max(padded[window(i)], axis=[ry, rx]),
                          name="pool_max", tag="pool_max")
    total = te.compute(tuple(out_shape), lambda *i: te.sum(padded[window(i)], axis=[ry, rx]),
                       name="pool_sum", tag="pool_sum")

    def count(o: PrimExpr, stride_: int, k: int, d: int, lo: int, hi: int, size: int) -> PrimExpr:
        start = o * stride_ - lo
        end = start + (k - 1) * d
        if count_include_pad:
            end = op.min(end, size + hi - 1)
        else:
            start, end = op.max(start, 0), op.min(end, size - 1)
        return (end - start) // d + 1

    def avg(*i: PrimExpr) -> PrimExpr:
        n = (count(i[ha], sh, kh, dh, pt, pb, h) * count(i[wa], sw, kw, dw, pl, pr, w))
        return op.div(total[i], op.cast(data.dtype, op.max(n, 1)))
    return te.compute(tuple(out_shape), avg, name="pool_avg", tag="elemwise")


def adaptive_pool(data: Tensor, output_size: Sequence[int] | int, pool_type: str,
                  layout: str = "NCHW") -> Tensor:
    """Pool H and W into ``output_size`` bins: bin ``i`` covers
    ``[floor(i*in/out), ceil((i+1)*in/out))`` (PyTorch's and TVM's rule)."""
    what = f"adaptive_pool({pool_type})"
    if pool_type not in ("max", "avg"):
        raise ValueError(f"adaptive_pool: pool_type must be 'max' or 'avg', got {pool_type!r}")
    ha, wa = _hw_axes(layout, data.ndim, what)
    oh, ow = as_tuple(output_size, 2, f"{what}: output_size")
    h, w = _static_hw(data, layout, what)

    def bounds(o: Any, size: int, out: int) -> tuple[Any, Any]:
        return (o * size) // out, ((o + 1) * size + out - 1) // out
    # Reduce over the widest bin with a where= guard (reduce extents stay constant).
    kh = max(bounds(i, h, oh)[1] - bounds(i, h, oh)[0] for i in range(oh))
    kw = max(bounds(j, w, ow)[1] - bounds(j, w, ow)[0] for j in range(ow))
    it = index_dtype(data)
    ry = te.reduce_axis((0, index_const(kh, it)), name="rv0")
    rx = te.reduce_axis((0, index_const(kw, it)), name="rv1")
    out_shape = list(data.shape)
    out_shape[ha], out_shape[wa] = op.const(oh, it), op.const(ow, it)

    def reduce(reducer):
        def f(*i: PrimExpr) -> PrimExpr:
            (h0, h1), (w0, w1) = bounds(i[ha], h, oh), bounds(i[wa], w, ow)
            idx = list(i)
            idx[ha], idx[wa] = h0 + ry, w0 + rx
            cond = op.logical_and(ry < h1 - h0, rx < w1 - w0)
            return reducer(data[tuple(idx)], axis=[ry, rx], where=cond)
        return f
    if pool_type == "max":
        return te.compute(tuple(out_shape), reduce(te.max), name="adaptive_pool_max",
                          tag="adaptive_pool_max")
    total = te.compute(tuple(out_shape), reduce(te.sum), name="adaptive_pool_sum",
                       tag="adaptive_pool_sum")

    def avg(*i: PrimExpr) -> PrimExpr:
        (h0, h1), (w0, w1) = bounds(i[ha], h, oh), bounds(i[wa], w, ow)
        return op.div(total[i], op.cast(data.dtype, (h1 - h0) * (w1 - w0)))
    return te.compute(tuple(out_shape), avg, name="adaptive_pool_avg", tag="elemwise")


def adaptive_avg_pool2d(data: Tensor, output_size: Sequence[int] | int,
                        layout: str = "NCHW") -> Tensor:
    """Adaptive average pooling to ``output_size`` (see :func:`adaptive_pool`)."""
    return adaptive_pool(data, output_size, "avg", layout)


def global_pool(data: Tensor, pool_type: str, layout: str = "NCHW") -> Tensor:
    """Pool all of H and W into one element (``adaptive_pool`` to 1x1)."""
    return adaptive_pool(data, (1, 1), pool_type, layout)


def max_pool2d_with_indices(data: Tensor, kernel: Sequence[int], stride: Sequence[int],
                            dilation: Sequence[int], padding: Sequence[int],
                            ceil_mode: bool = False) -> tuple[Tensor, Tensor]:
    """NCHW max pooling and where each maximum is: its row-major flat index into ``data``
    (``((n * C + c) * H + h) * W + w``, int64; the first maximum in window order wins --
    onnxruntime's and PyTorch's rule, PyTorch's index being this one modulo H * W)."""
    from workbench.topi.reduction import _argmax
    ha, wa = _hw_axes("NCHW", data.ndim, "max_pool2d_with_indices")
    kh, kw = as_tuple(kernel, 2, "max_pool2d_with_indices: kernel")
    sh, sw = as_tuple(stride, 2, "max_pool2d_with_indices: stride")
    dh, dw = as_tuple(dilation, 2, "max_pool2d_with_indices: dilation")
    pt, pl, pb, pr = (get_const_int(p) for p in padding)
    h, w = _static_hw(data, "NCHW", "max_pool2d_with_indices")
    oh = _pool_out(h, pt, pb, kh, sh, dh, ceil_mode)
    ow = _pool_out(w, pl, pr, kw, sw, dw, ceil_mode)
    it = index_dtype(data)
    ry = te.reduce_axis((0, index_const(kh, it)), name="rv0")
    rx = te.reduce_axis((0, index_const(kw, it)), name="rv1")
    out_shape = (data.shape[0], data.shape[1], op.const(oh, it), op.const(ow, it))
    lowest = op.min_value(data.dtype)

    def f(n: PrimExpr, c: PrimExpr, i: PrimExpr, j: PrimExpr) -> tuple:
        y = i * sh + ry * dh - pt
        x = j * sw + rx * dw - pl
        inside = op.all(y >= 0, y < h, x >= 0, x < w)
        value = op.if_then_else(inside, data[n, c, y, x], lowest)
        flat = ((op.cast("int64", n) * op.cast("int64", data.shape[1]) + op.cast("int64", c))
                * h + op.cast("int64", y)) * w + op.cast("int64", x)
        return _argmax((op.if_then_else(inside, flat, op.const(-1, "int64")), value),
                       axis=[ry, rx])
    both = te.compute(out_shape, f, name="pool_max_idx_temp", tag="comm_reduce_idx")
    values = te.compute(out_shape, lambda *i: both[1][i], name="pool_max", tag="injective")
    indices = te.compute(out_shape, lambda *i: both[0][i], name="pool_max_indices",
                         tag="injective")
    return values, indices
