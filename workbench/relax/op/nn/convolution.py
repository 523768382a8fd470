"""``conv2d`` with NCHW/OIHW or NHWC/HWIO layouts, strides, padding, dilation and groups."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from workbench.relax.expr import Call, Expr
from workbench.relax.op import _infer as I
from workbench.relax.op.registry import def_infer, def_legalize, def_numpy, make_call
from workbench.relax.struct_info import StructInfo, TensorStructInfo
from workbench.tir import op as tir_op
from workbench.tir.expr import IntImm, PrimExpr

_KERNEL_LAYOUT = {"NCHW": "OIHW", "NHWC": "HWIO"}


def pad4(padding: int | Sequence[int]) -> tuple[int, int, int, int]:
    """``(top, left, bottom, right)`` from 1, 2 or 4 values (TVM's convention)."""
    p = (padding,) if isinstance(padding, int) else tuple(int(x) for x in padding)
    if len(p) == 1:
        return (p[0],) * 4  # type: ignore[return-value]
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    if len(p) == 4:
        return p  # type: ignore[return-value]
    raise ValueError(f"padding must have 1, 2 or 4 values, got {padding!r}")


def pair(v: int | Sequence[int], what: str) -> tuple[int, int]:
    p = (v, v) if isinstance(v, int) else tuple(int(x) for x in v)
    if len(p) == 1:
        p = (p[0], p[0])
    if len(p) != 2:
        raise ValueError(f"{what} must be an int or 2 ints, got {v!r}")
    return p  # type: ignore[return-value]


def conv2d(data: Expr, weight: Expr, strides: Any = (1, 1), padding: Any = (0, 0),
           dilation: Any = (1, 1), groups: int = 1, data_layout: str = "NCHW",
           kernel_layout: str | None = None, out_layout: str | None = None,
           out_dtype: str | None = None) -> Call:
    """2-d convolution. NCHW data takes an OIHW weight, NHWC data an HWIO weight; ``padding``
    is 1, 2 or 4 values (top, left, bottom, right); the weight's input channels are
    ``C / groups``. Channel-blocked layouts (``out_layout="NCHW16c"`` with data ``NCHW16c`` and
    an ``OIHW16i16o`` weight, NCHW data and an ``OIHW16o`` weight, or a depthwise ``OIHW16o``
    weight: :mod:`workbench.topi.nn.conv2d_nchwc`) are what ``ConvertLayoutNCHWc`` makes."""
    from workbench.topi.nn.layout import is_blocked
    kernel_layout = kernel_layout or _KERNEL_LAYOUT.get(data_layout, "")
    out_layout = out_layout or data_layout
    if is_blocked(out_layout):
        _check_blocked_layouts(data_layout, kernel_layout, out_layout)
    else:
        if _KERNEL_LAYOUT.get(data_layout) != kernel_layout:
            raise ValueError(f"conv2d: supported layouts are NCHW with OIHW and NHWC with HWIO "
                             f"(or blocked ones), got data_layout={data_layout!r}, "
                             f"kernel_layout={kernel_layout!r}")
        if out_layout != data_layout:
            raise ValueError(f"conv2d: out_layout must equal data_layout ({data_layout})")
    attrs = {"strides": pair(strides, "strides"), "padding": pad4(padding),
             "dilation": pair(dilation, "dilation"), "groups": int(groups),
             "data_layout": data_layout, "kernel_layout": kernel_layout,
             "out_layout": out_layout, "out_dtype": out_dtype or "void"}
    return make_call("relax.nn.conv2d", (data, weight), attrs)


def _check_blocked_layouts(data_layout: str, kernel_layout: str, out_layout: str) -> None:
    from workbench.topi.nn.layout import layout_block, parse_layout, primal_layout
    try:
        ok = primal_layout(out_layout) == "NCHW" and primal_layout(data_layout) == "NCHW" and \
            primal_layout(kernel_layout) == "OIHW" and len(parse_layout(out_layout)) == 5 and \
            layout_block(kernel_layout, "O") == layout_block(out_layout, "C") and \
            len(parse_layout(data_layout)) in (4, 5)
    except ValueError as e:
        raise ValueError(f"conv2d: {e}") from None
    if not ok:
        raise ValueError(f"conv2d: a blocked out_layout ({out_layout!r}) needs NCHW or NCHW{{b}}c "
                         f"data and an OIHW[{{b}}i]{{B}}o kernel with the output's block, got "
                         f"data_layout={data_layout!r}, kernel_layout={kernel_layout!r}")


def out_extent(size: PrimExpr, lo: int, hi: int, k: PrimExpr, stride: int, dil: int,
               ceil_mode: bool = False) -> PrimExpr:
    """Sliding-window output extent (the conv/pool formula), simplified."""
    from workbench.tir.arith.analyzer import Analyzer
    i64 = lambda v: IntImm("int64", v)  # noqa: E731
    span = tir_op.sub(tir_op.add(size, i64(lo + hi)),
                      tir_op.add(tir_op.mul(tir_op.sub(k, i64(1)), i64(dil)), i64(1)))
    if ceil_mode:
        span = tir_op.add(span, i64(stride - 1))
    out = Analyzer().simplify(tir_op.add(tir_op.floordiv(span, i64(stride)), i64(1)))
    if ceil_mode and isinstance(out, IntImm) and isinstance(size, IntImm) and \
            (out.value - 1) * stride >= size.value + lo:
        out = i64(out.value - 1)  # the last window must start inside the input or low padding
    return out


@def_infer("relax.nn.conv2d")
def _infer_conv2d(call: Call, ctx: Any) -> StructInfo:
    a = call.attrs
    x, w = I.tensor_arg(call, 0, "data"), I.tensor_arg(call, 1, "weight")
    dtype = a["out_dtype"] if a["out_dtype"] != "void" else \
        I.same_dtype(call, [("data", x), ("weight", w)])
    dl, kl, ol = a["data_layout"], a["kernel_layout"], a["out_layout"]
    for name, si, lay in (("data", x, dl), ("weight", w, kl)):
        nd = sum(ch.isalpha() for ch in lay)
        if si.ndim not in (-1, nd):
            raise I.error(call, f"{name} must be {nd}-d ({lay}), got {I.dims_text(si.values)}")
    if x.shape is None or w.shape is None:
        return TensorStructInfo(None, dtype, sum(ch.isalpha() for ch in ol))
    if len(dl) == 4 and len(kl) == 4 and len(ol) == 4:
        n, c, h, wd = (x.values[dl.index(ch)] for ch in "NCHW")
        o, i, kh, kw = (w.values[kl.index(ch)] for ch in "OIHW")
    else:
        from workbench.relax.op.layout import logical_dims
        xd, wd_ = logical_dims(x.values, dl), logical_dims(w.values, kl)
        n, c, h, wd = (xd[ch] for ch in "NCHW")
        o, i, kh, kw = (wd_[ch] for ch in "OIHW")
        n, c, h, wd, o, i, kh, kw = (IntImm("int64", v) if isinstance(v, int) else v
                                     for v in (n, c, h, wd, o, i, kh, kw))
    g = a["groups"]
    cin = I.const_int(c)
    if cin is not None and I.const_int(i) is not None and cin != I.const_int(i) * g:
        raise I.error(call, f"data {I.dims_text(x.values)} ({dl}) has {cin} input channels but "
                            f"weight {I.dims_text(w.values)} ({kl}) expects "
                            f"{I.const_int(i)} x groups={g} = {I.const_int(i) * g}")
    if I.const_int(o) is not None and I.const_int(o) % g:
        raise I.error(call, f"the {I.const_int(o)} output channels of weight "
                            f"{I.dims_text(w.values)} do not divide into groups={g}")
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = a["strides"], a["dilation"], a["padding"]
    oh, ow = out_extent(h, pt, pb, kh, sh, dh), out_extent(wd, pl, pr, kw, sw, dw)
    for name, e in (("height", oh), ("width", ow)):
        if I.const_int(e) is not None and I.const_int(e) <= 0:
            raise I.error(call, f"the output {name} is {I.const_int(e)}: the kernel "
                                f"{I.dims_text(w.values)} does not fit data "
                                f"{I.dims_text(x.values)} with this padding")
    dims = {"N": n, "C": o, "H": oh, "W": ow}
    if len(a["out_layout"]) != 4:
        from workbench.relax.op.layout import blocked_shape
        shape = blocked_shape({k: (I.const_int(v) if I.const_int(v) is not None else v)
                               for k, v in dims.items()}, a["out_layout"])
        return TensorStructInfo(tuple(IntImm("int64", v) if isinstance(v, int) else v
                                      for v in shape), dtype)
    return TensorStructInfo(tuple(dims[ch] for ch in dl), dtype)


@def_legalize("relax.nn.conv2d")
def _legalize_conv2d(bb: Any, call: Call) -> Expr:
    from workbench.topi.nn import conv2d as te_conv2d
    a = call.attrs
    if a["out_layout"] != a["data_layout"] or len(a["out_layout"]) != 4:
        from workbench.topi.nn.conv2d_nchwc import conv2d_nchwc
        depthwise = "i" not in a["kernel_layout"] and len(a["data_layout"]) != 4
        return bb.call_te(conv2d_nchwc, call.args[0], call.args[1], list(a["strides"]),
                          list(a["padding"]), list(a["dilation"]), a["groups"],
                          a["data_layout"], a["kernel_layout"], a["out_layout"],
                          out_dtype=call.struct_info.dtype,
                          primfunc_name_hint="depthwise_conv2d" if depthwise else "conv2d")
    return bb.call_te(te_conv2d, call.args[0], call.args[1], list(a["strides"]),
                      list(a["padding"]), list(a["dilation"]), data_layout=a["data_layout"],
                      kernel_layout=a["kernel_layout"], out_dtype=call.struct_info.dtype,
                      groups=a["groups"], primfunc_name_hint="conv2d")


@def_numpy("relax.nn.conv2d")
def _numpy_conv2d(x: np.ndarray, w: np.ndarray, strides: tuple, padding: tuple,
                  dilation: tuple, groups: int, data_layout: str, kernel_layout: str,
                  out_dtype: str = "void", out_layout: str | None = None, **_: Any
                  ) -> np.ndarray:
    if max(len(data_layout), len(kernel_layout), len(out_layout or "")) > 4:
        from workbench.relax.op.layout import to_layout_numpy
        x = to_layout_numpy(x, data_layout, "NCHW")
        w = to_layout_numpy(w, kernel_layout, "OIHW")
        out = _numpy_conv2d(x, w, strides, padding, dilation, groups, "NCHW", "OIHW",
                            out_dtype)
        return to_layout_numpy(out, "NCHW", out_layout)
    dtype = x.dtype if out_dtype == "void" else np.dtype(out_dtype)
    if data_layout == "NHWC":
        x = x.transpose(0, 3, 1, 2)
        w = w.transpose(3, 2, 0, 1)  # HWIO -> OIHW
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = strides, dilation, padding
    xp = np.pad(x.astype("float64"), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    n, c, h, wd = xp.shape
    o, cg, kh, kw = w.shape
    oh = (h - (kh - 1) * dh - 1) // sh + 1
    ow = (wd - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    og = o // groups
    for g in range(groups):
        xs = xp[:, g * cg:(g + 1) * cg]
        ws = w[g * og:(g + 1) * og].astype("float64")
        for ky in range(kh):
            for kx in range(kw):
                patch = xs[:, :, ky * dh: ky * dh + sh * (oh - 1) + 1: sh,
                           kx * dw: kx * dw + sw * (ow - 1) + 1: sw]
                out[:, g * og:(g + 1) * og] += np.einsum("nchw,oc->nohw", patch, ws[:, :, ky, kx])
    if data_layout == "NHWC":
        out = out.transpose(0, 2, 3, 1)
    return out.astype(dtype)




# ---- Winograd -----------------------------------------------------------------------------------

def conv2d_winograd(data: Expr, weight: Expr, padding: Any = (1, 1),
                    data_layout: str = "NCHW16c", out_layout: str | None = None,
                    out_dtype: str | None = None) -> Call:
    """A 3x3, stride-1 convolution by Winograd's F(4x4, 3x3) or F(2x2, 3x3) on blocked data,
    whose weight is already transformed (``U[a, a, O/B, C/B, B, B]``, a = 6 or 4: the weight
    says which,
    :func:`workbench.topi.nn.conv2d_winograd.winograd_weight_transform`; Relay's
    ``contrib_conv2d_winograd_without_weight_transform``). ``ConvertLayoutNCHWc`` makes it."""
    from workbench.topi.nn.layout import layout_block, parse_layout
    out_layout = out_layout or data_layout
    b = layout_block(data_layout, "C")
    if b is None or len(parse_layout(data_layout)) != 5 or out_layout != data_layout:
        raise ValueError(f"conv2d_winograd: data_layout must be NCHW{{B}}c and out_layout the "
                         f"same, got {data_layout!r} / {out_layout!r}")
    return make_call("relax.nn.conv2d_winograd", (data, weight),
                     {"padding": pad4(padding), "data_layout": data_layout,
                      "out_layout": out_layout, "out_dtype": out_dtype or "void"})


@def_infer("relax.nn.conv2d_winograd")
def _infer_conv2d_winograd(call: Call, ctx: Any) -> StructInfo:
    from workbench.topi.nn.conv2d_winograd import TILES
    a = call.attrs
    x, w = I.tensor_arg(call, 0, "data"), I.tensor_arg(call, 1, "weight")
    dtype = a["out_dtype"] if a["out_dtype"] != "void" else \
        I.same_dtype(call, [("data", x), ("weight", w)])
    if x.ndim not in (-1, 5) or w.ndim not in (-1, 6):
        raise I.error(call, f"expects 5-d blocked data and a 6-d transformed weight, got "
                            f"{I.dims_text(x.values)} and {I.dims_text(w.values)}")
    if x.shape is None or w.shape is None:
        return TensorStructInfo(None, dtype, 5)
    n, cb, h, wd, b = x.values
    al, al2, ob, wcb, bi, bo = (I.const_int(v) for v in w.values)
    if al is None or al - 2 not in TILES or al2 != al or wcb != I.const_int(cb) or \
            bi != I.const_int(b) or bo != I.const_int(b):
        raise I.error(call, f"weight {I.dims_text(w.values)} is not a Winograd-transformed "
                            f"weight for data {I.dims_text(x.values)}")
    pt, pl, pb, pr = a["padding"]
    i64 = lambda v: IntImm("int64", v)  # noqa: E731
    oh = out_extent(h, pt, pb, i64(3), 1, 1)
    ow = out_extent(wd, pl, pr, i64(3), 1, 1)
    return TensorStructInfo((n, i64(ob), oh, ow, b), dtype)


@def_legalize("relax.nn.conv2d_winograd")
def _legalize_conv2d_winograd(bb: Any, call: Call) -> Expr:
    from workbench.topi.nn.conv2d_winograd import conv2d_winograd_nchwc
    a = call.attrs
    return bb.call_te(conv2d_winograd_nchwc, call.args[0], call.args[1], list(a["padding"]),
                      a["data_layout"], a["out_layout"], out_dtype=call.struct_info.dtype,
                      primfunc_name_hint="conv2d_winograd")


@def_numpy("relax.nn.conv2d_winograd")
def _numpy_conv2d_winograd(x: np.ndarray, u: np.ndarray, padding: tuple, data_layout: str,
                           out_dtype: str = "void", **_: Any) -> np.ndarray:
    """Winograd's algorithm in float64: input tiles transformed, multiplied by the transformed
    weight channel by channel, transformed back."""
    from workbench.topi.nn.conv2d_winograd import tile_of, winograd_matrices
    alpha = u.shape[0]
    tile = tile_of(alpha)           # the weight says which F(m, 3) it was made for
    bt, _, at = winograd_matrices(tile)
    dtype = x.dtype if out_dtype == "void" else np.dtype(out_dtype)
    n, cb, h, w, b = x.shape
    pt, pl, pb, pr = padding
    oh, ow = h + pt + pb - 2, w + pl + pr - 2
    th, tw = -(-oh // tile), -(-ow // tile)
    xp = np.zeros((n, cb, th * tile + 2, tw * tile + 2, b))
    xp[:, :, pt:pt + h, pl:pl + w] = x
    tiles = np.stack([np.stack([xp[:, :, i * tile:i * tile + alpha, j * tile:j * tile + alpha]
                                for j in range(tw)], 2) for i in range(th)], 2)
    # tiles: (n, cb, th, tw, alpha, alpha, b) -> V[xi, nu, n, th, tw, cb, b]
    v = np.einsum("xa,nctsabk,yb->xyntsck", bt, tiles, bt)
    m = np.einsum("xyntsck,xyockl->xyntsol", v, u.astype(np.float64))
    y = np.einsum("ix,xyntsol,jy->ntsijol", at, m, at)     # (n, th, tw, m, m, ob, b)
    ob = u.shape[2]
    out = y.transpose(0, 5, 1, 3, 2, 4, 6).reshape(n, ob, th * tile, tw * tile, b)
    return out[:, :, :oh, :ow].astype(dtype)


__all__ = ["conv2d", "conv2d_winograd", "pad4", "pair", "out_extent"]
