"""2-d pooling: max_pool2d, avg_pool2d, adaptive_avg_pool2d (NCHW or NHWC), and
max_pool2d_with_indices (NCHW: the maxima and their flat indices into the input)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.nn.convolution import out_extent, pad4, pair
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo, TupleStructInfo
from workbench.tir.expr import IntImm


def _check_layout(name: str, layout: str) -> None:
    """NCHW, NHWC or a channel-blocked NCHW ("NCHW16c")."""
    from workbench.topi.nn.layout import parse_layout
    if layout in ("NCHW", "NHWC"):
        return
    try:
        ok = layout.startswith("NCHW") and len(parse_layout(layout)) == 5
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"{name}: layout must be 'NCHW', 'NHWC' or a blocked 'NCHW{{b}}c', "
                         f"got {layout!r}")


def _topi_layout(layout: str) -> str:
    """One letter per dimension, as topi's pools take it: "NCHW16c" -> "NCHWc"."""
    return "".join(ch for ch in layout if ch.isalpha())


def _pool(name: str, data: Expr, pool_size: Any, strides: Any, padding: Any, dilation: Any,
          ceil_mode: bool, count_include_pad: bool, layout: str, out_layout: str | None) -> Call:
    _check_layout(name, layout)
    if out_layout not in (None, layout):
        raise ValueError(f"{name}: out_layout must equal layout ({layout})")
    attrs = {"pool_size": pair(pool_size, "pool_size"), "strides": pair(strides, "strides"),
             "padding": pad4(padding), "dilation": pair(dilation, "dilation"),
             "ceil_mode": bool(ceil_mode), "count_include_pad": bool(count_include_pad),
             "layout": layout, "out_layout": layout}
    return make_call(f"relax.nn.{name}", (data,), attrs)


def max_pool2d(data: Expr, pool_size: Any = (1, 1), strides: Any = (1, 1),
               padding: Any = (0, 0), dilation: Any = (1, 1), ceil_mode: bool = False,
               count_include_pad: bool = False, layout: str = "NCHW",
               out_layout: str | None = None) -> Call:
    """Maximum over ``pool_size`` windows of H and W."""
    return _pool("max_pool2d", data, pool_size, strides, padding, dilation, ceil_mode,
                 count_include_pad, layout, out_layout)


def avg_pool2d(data: Expr, pool_size: Any = (1, 1), strides: Any = (1, 1),
               padding: Any = (0, 0), dilation: Any = (1, 1), ceil_mode: bool = False,
               count_include_pad: bool = False, layout: str = "NCHW",
               out_layout: str | None = None) -> Call:
    """Average over ``pool_size`` windows of H and W (padding counted when
    ``count_include_pad``)."""
    return _pool("avg_pool2d", data, pool_size, strides, padding, dilation, ceil_mode,
                 count_include_pad, layout, out_layout)


def max_pool2d_with_indices(data: Expr, pool_size: Any = (1, 1), strides: Any = (1, 1),
                            padding: Any = (0, 0), dilation: Any = (1, 1),
                            ceil_mode: bool = False) -> Call:
    """``(max_pool2d(data), indices)`` on NCHW data: each maximum's row-major flat index into
    ``data`` (int64; the first maximum in window order)."""
    attrs = {"pool_size": pair(pool_size, "pool_size"), "strides": pair(strides, "strides"),
             "padding": pad4(padding), "dilation": pair(dilation, "dilation"),
             "ceil_mode": bool(ceil_mode), "count_include_pad": False, "layout": "NCHW",
             "out_layout": "NCHW"}
    return make_call("relax.nn.max_pool2d_with_indices", (data,), attrs)


def adaptive_avg_pool2d(data: Expr, output_size: int | Sequence[int] | None = None,
                        layout: str = "NCHW", out_layout: str | None = None) -> Call:
    """Average H and W into ``output_size`` bins (None keeps the input size)."""
    _check_layout("adaptive_avg_pool2d", layout)
    if out_layout not in (None, layout):
        raise ValueError(f"adaptive_avg_pool2d: out_layout must equal layout ({layout})")
    size = None if output_size is None else pair(output_size, "output_size")
    return make_call("relax.nn.adaptive_avg_pool2d", (data,),
                     {"output_size": size, "layout": layout, "out_layout": layout})


def _infer_pool(call: Call, ctx: Any) -> StructInfo:
    a = call.attrs
    x = I.tensor_arg(call, 0, "data")
    lay = a["layout"]
    nd = len(_topi_layout(lay))
    if x.ndim not in (-1, nd):
        raise I.error(call, f"data must be {nd}-d ({lay}), got {I.dims_text(x.values)}")
    if x.shape is None:
        return TensorStructInfo(None, x.dtype, nd)
    ha, wa = lay.index("H"), lay.index("W")
    (kh, kw), (sh, sw), (dh, dw) = a["pool_size"], a["strides"], a["dilation"]
    pt, pl, pb, pr = a["padding"]
    i64 = lambda v: IntImm("int64", v)  # noqa: E731
    out = list(x.values)
    out[ha] = out_extent(x.values[ha], pt, pb, i64(kh), sh, dh, a["ceil_mode"])
    out[wa] = out_extent(x.values[wa], pl, pr, i64(kw), sw, dw, a["ceil_mode"])
    for d in (ha, wa):
        if I.const_int(out[d]) is not None and I.const_int(out[d]) <= 0:
            raise I.error(call, f"pool_size {a['pool_size']} does not fit data "
                                f"{I.dims_text(x.values)} with padding {a['padding']}")
    return TensorStructInfo(tuple(out), x.dtype)


def_infer("relax.nn.max_pool2d")(_infer_pool)
def_infer("relax.nn.avg_pool2d")(_infer_pool)


@def_infer("relax.nn.max_pool2d_with_indices")
def _infer_pool_indices(call: Call, ctx: Any) -> StructInfo:
    values = _infer_pool(call, ctx)
    return TupleStructInfo((values, TensorStructInfo(values.shape, "int64", values.ndim)))


@def_infer("relax.nn.adaptive_avg_pool2d")
def _infer_adaptive(call: Call, ctx: Any) -> StructInfo:
    x = I.tensor_arg(call, 0, "data")
    lay = call.attrs["layout"]
    nd = len(_topi_layout(lay))
    if x.ndim not in (-1, nd):
        raise I.error(call, f"data must be {nd}-d ({lay}), got {I.dims_text(x.values)}")
    size = call.attrs["output_size"]
    if x.shape is None or size is None:
        return x if size is None else TensorStructInfo(None, x.dtype, nd)
    out = list(x.values)
    out[lay.index("H")], out[lay.index("W")] = IntImm("int64", size[0]), IntImm("int64", size[1])
    return TensorStructInfo(tuple(out), x.dtype)


def _legalize_pool(kind: str):
    def legalize(bb: Any, call: Call) -> Expr:
        from workbench.topi.nn import pool2d
        a = call.attrs
        return bb.call_te(pool2d, call.args[0], list(a["pool_size"]), list(a["strides"]),
                          list(a["dilation"]), list(a["padding"]), kind, a["ceil_mode"],
                          _topi_layout(a["layout"]), a["count_include_pad"],
                          primfunc_name_hint=f"{kind}_pool2d")
    return legalize


def_legalize("relax.nn.max_pool2d")(_legalize_pool("max"))
def_legalize("relax.nn.avg_pool2d")(_legalize_pool("avg"))


@def_legalize("relax.nn.max_pool2d_with_indices")
def _legalize_pool_indices(bb: Any, call: Call) -> Expr:
    from workbench.topi.nn import max_pool2d_with_indices as te_pool
    a = call.attrs
    return bb.call_te(te_pool, call.args[0], list(a["pool_size"]), list(a["strides"]),
                      list(a["dilation"]), list(a["padding"]), a["ceil_mode"],
                      primfunc_name_hint="max_pool2d_with_indices")


@def_legalize("relax.nn.adaptive_avg_pool2d")
def _legalize_adaptive(bb: Any, call: Call) -> Expr:
    from workbench.topi.nn import adaptive_avg_pool2d as te_adaptive
    si = call.struct_info
    lay = call.attrs["layout"]
    size = [si.values[lay.index("H")], si.values[lay.index("W")]]
    size = [int(s.value) for s in size]
    return bb.call_te(te_adaptive, call.args[0], size, _topi_layout(lay),
                      primfunc_name_hint="adaptive_avg_pool2d")


# ---- numpy ------------------------------------------------------------------------------------

def _to_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    from workbench.relax.op.layout import to_layout_numpy
    return x if layout == "NCHW" else to_layout_numpy(x, layout, "NCHW")


def _from_nchw(x: np.ndarray, layout: str) -> np.ndarray:
    from workbench.relax.op.layout import to_layout_numpy
    return x if layout == "NCHW" else to_layout_numpy(x, "NCHW", layout)


def _np_out(size: int, lo: int, hi: int, k: int, s: int, d: int, ceil_mode: bool) -> int:
    span = size + lo + hi - ((k - 1) * d + 1)
    out = (span + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= size + lo:
        out -= 1
    return out


def _np_pool(kind: str):
    def impl(x: np.ndarray, pool_size: tuple, strides: tuple, padding: tuple, dilation: tuple,
             ceil_mode: bool, count_include_pad: bool, layout: str, **_: Any) -> np.ndarray:
        xs = _to_nchw(x, layout).astype("float64")
        (kh, kw), (sh, sw), (dh, dw), (pt, pl, pb, pr) = pool_size, strides, dilation, padding
        h, w = xs.shape[2:]
        oh = _np_out(h, pt, pb, kh, sh, dh, ceil_mode)
        ow = _np_out(w, pl, pr, kw, sw, dw, ceil_mode)
        eb = max(pb, (oh - 1) * sh + (kh - 1) * dh + 1 - h - pt)
        er = max(pr, (ow - 1) * sw + (kw - 1) * dw + 1 - w - pl)
        fill = -np.inf if kind == "max" else 0.0
        xp = np.pad(xs, ((0, 0), (0, 0), (pt, eb), (pl, er)), constant_values=fill)
        # Which padded positions count towards an average's divisor.
        valid = np.zeros(xp.shape[2:])
        if count_include_pad:
            valid[:pt + h + pb, :pl + w + pr] = 1
        else:
            valid[pt:pt + h, pl:pl + w] = 1
        windows, counts = [], np.zeros((oh, ow))
        for ky in range(kh):
            for kx in range(kw):
                ys = slice(ky * dh, ky * dh + sh * (oh - 1) + 1, sh)
                xsl = slice(kx * dw, kx * dw + sw * (ow - 1) + 1, sw)
                windows.append(xp[:, :, ys, xsl])
                counts += valid[ys, xsl]
        stack = np.stack(windows)
        out = stack.max(axis=0) if kind == "max" else stack.sum(axis=0) / np.maximum(counts, 1)
        return _from_nchw(out, layout).astype(x.dtype)
    return impl


def_numpy("relax.nn.max_pool2d")(_np_pool("max"))
def_numpy("relax.nn.avg_pool2d")(_np_pool("avg"))


@def_numpy("relax.nn.max_pool2d_with_indices")
def _np_pool_indices(x: np.ndarray, pool_size: tuple, strides: tuple, padding: tuple,
                     dilation: tuple, ceil_mode: bool, **_: Any) -> tuple:
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw), (pt, pl, pb, pr) = pool_size, strides, dilation, padding
    oh = _np_out(h, pt, pb, kh, sh, dh, ceil_mode)
    ow = _np_out(w, pl, pr, kw, sw, dw, ceil_mode)
    values = np.full((n, c, oh, ow), -np.inf)
    indices = np.full((n, c, oh, ow), -1, np.int64)
    plane = (np.arange(n)[:, None] * c + np.arange(c)[None, :]) * h * w   # (N, C)
    for i in range(oh):
        for j in range(ow):
            for ky in range(kh):
                for kx in range(kw):
                    y, xx = i * sh + ky * dh - pt, j * sw + kx * dw - pl
                    if 0 <= y < h and 0 <= xx < w:
                        v = x[:, :, y, xx]
                        better = v > values[:, :, i, j]
                        values[:, :, i, j] = np.where(better, v, values[:, :, i, j])
                        indices[:, :, i, j] = np.where(better, plane + y * w + xx,
                                                       indices[:, :, i, j])
    return values.astype(x.dtype), indices


@def_numpy("relax.nn.adaptive_avg_pool2d")
def _np_adaptive(x: np.ndarray, output_size: Any, layout: str, **_: Any) -> np.ndarray:
    xs = _to_nchw(x, layout).astype("float64")
    h, w = xs.shape[2:]
    oh, ow = output_size if output_size is not None else (h, w)
    out = np.zeros(xs.shape[:2] + (oh, ow))
    for i in range(oh):
        h0, h1 = (i * h) // oh, -((-(i + 1) * h) // oh)
        for j in range(ow):
            w0, w1 = (j * w) // ow, -((-(j + 1) * w) // ow)
            out[:, :, i, j] = xs[:, :, h0:h1, w0:w1].mean(axis=(2, 3))
    return _from_nchw(out, layout).astype(x.dtype)


__all__ = ["max_pool2d", "avg_pool2d", "adaptive_avg_pool2d", "max_pool2d_with_indices"]
