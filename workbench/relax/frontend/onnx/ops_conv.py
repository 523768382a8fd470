"""ONNX converters: convolutions (Conv, ConvTranspose) and window pools (MaxPool,
AveragePool, LpPool, global pools, MaxUnpool) over 1, 2 and 3 spatial dimensions.

The N-d convolutions, transposed convolutions and pools are the shared ones of
:mod:`workbench.relax.frontend.windows` (on the 2-d kernels); this module reads ONNX's
attributes (``auto_pad``, ``output_shape``, ...) into their pads.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from workbench.relax import op as R
from workbench.relax.expr import Expr, TupleGetItem
from workbench.relax.frontend.onnx._registry import Unavailable, converter
from workbench.relax.frontend.windows import _dims, _static, conv_nd, conv_transpose_nd, pool_nd


def _static_spatial(node: Any, x: Expr) -> list[int]:
    sizes = [_static(d) for d in _dims(x)[2:]]
    if None in sizes:
        raise NotImplementedError(f"{node.op_type} over dynamic spatial sizes "
                                  f"{_dims(x)[2:]}")
    return sizes  # type: ignore[return-value]


def _same_pads(size: int, k: int, s: int, d: int, upper: bool) -> tuple[int, int]:
    out = -(-size // s)
    total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
    small, big = total // 2, total - total // 2
    return (small, big) if upper else (big, small)


def window_args(node: Any, x: Expr, attrs: dict, kernel: list[int]
                ) -> tuple[list[int], list[int], list[int]]:
    """``(strides, dilations, pads)`` of a window op over ``len(kernel)`` spatial dims, with
    ``auto_pad`` resolved (``SAME_*`` needs static spatial sizes)."""
    r = len(kernel)
    strides = list(attrs.get("strides") or [1] * r)
    dilations = list(attrs.get("dilations") or [1] * r)
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        sizes = _static_spatial(node, x)
        pairs = [_same_pads(sizes[i], kernel[i], strides[i], dilations[i],
                            auto == "SAME_UPPER") for i in range(r)]
        pads = [p[0] for p in pairs] + [p[1] for p in pairs]
    elif auto == "VALID":
        pads = [0] * (2 * r)
    else:
        pads = list(attrs.get("pads") or [0] * (2 * r))
    return strides, dilations, pads


def _rank_check(imp: Any, node: Any) -> str | None:
    for a in node.attribute:
        if a.name == "kernel_shape" and len(a.ints) not in (1, 2, 3):
            return f"{len(a.ints)}-d windows (supported: 1-, 2- and 3-d)"
    return None


# ---- convolution ---------------------------------------------------------------------------------

def _add_bias(imp: Any, out: Expr, inputs: list) -> Expr:
    if len(inputs) > 2 and inputs[2] is not None:
        rank = len(_dims(out))
        bias = imp.emit(R.reshape(imp.expr(inputs[2]), [1, -1] + [1] * (rank - 2)))
        out = imp.emit(R.add(out, bias))
    return out


def _kernel(node: Any, w: Expr, attrs: dict) -> list[int]:
    kernel = attrs.get("kernel_shape") or [_static(d) for d in _dims(w)[2:]]
    if None in kernel:
        raise NotImplementedError(f"{node.op_type} with a weight of dynamic spatial shape")
    return list(kernel)


@converter("Conv", check=_rank_check)
def _conv(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x, w = imp.expr(inputs[0]), imp.expr(inputs[1])
    strides, dilations, pads = window_args(node, x, attrs, _kernel(node, w, attrs))
    out = conv_nd(imp.emit, x, w, strides, pads, dilations, attrs.get("group", 1))
    return _add_bias(imp, out, inputs)


def _transpose_pads(node: Any, attrs: dict, sizes: list[int], kernel: list[int],
                    strides: list[int], dilations: list[int], out_pad: list[int]
                    ) -> list[int]:
    """ConvTranspose's pads, from ``pads`` or solved from ``output_shape`` / ``auto_pad``."""
    r = len(kernel)
    auto = attrs.get("auto_pad", "NOTSET")
    target = attrs.get("output_shape")
    if target is not None and len(target) > r:
        target = target[-r:]
    if target is None and auto in ("SAME_UPPER", "SAME_LOWER"):
        target = [sizes[i] * strides[i] for i in range(r)]
    if target is None:
        return list(attrs.get("pads") or [0] * (2 * r))
    begin, end = [], []
    for i in range(r):
        total = strides[i] * (sizes[i] - 1) + out_pad[i] + (kernel[i] - 1) * dilations[i] + 1 \
            - target[i]
        small, big = total // 2, total - total // 2
        upper = auto == "SAME_UPPER"
        begin.append(small if upper else big)
        end.append(big if upper else small)
    return begin + end


@converter("ConvTranspose", check=_rank_check)
def _conv_transpose(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x, w = imp.expr(inputs[0]), imp.expr(inputs[1])
    kernel = _kernel(node, w, attrs)
    r = len(kernel)
    sizes = _static_spatial(node, x)
    strides = list(attrs.get("strides") or [1] * r)
    dilations = list(attrs.get("dilations") or [1] * r)
    out_pad = list(attrs.get("output_padding") or [0] * r)
    pads = _transpose_pads(node, attrs, sizes, kernel, strides, dilations, out_pad)
    out = conv_transpose_nd(imp.emit, x, w, strides, pads, dilations,
                            attrs.get("group", 1), out_pad)
    return _add_bias(imp, out, inputs)


# ---- pooling ---------------------------------------------------------------------------------------

def _max_pool_indices(imp: Any, x: Expr, kernel: list[int], strides: list[int],
                      pads: list[int], dilations: list[int], ceil: bool,
                      storage_order: int) -> list:
    """MaxPool with its Indices output (1-d and 2-d): flat indices into the input, row-major
    (``storage_order=0``) or with each plane column-major (1)."""
    one_d = len(kernel) == 1
    if one_d:
        x = imp.emit(R.expand_dims(x, 2))
        kernel, strides, dilations = [1] + kernel, [1] + strides, [1] + dilations
        pads = [0, pads[0], 0, pads[1]]
    both = imp.emit(R.nn.max_pool2d_with_indices(x, kernel, strides, pads, dilations, ceil))
    values, idx = imp.emit(TupleGetItem(both, 0)), imp.emit(TupleGetItem(both, 1))
    if storage_order:
        h, w = (_static(d) for d in _dims(x)[2:])
        c = lambda v: imp.expr(np.asarray(v, "int64"))  # noqa: E731
        plane = imp.emit(R.floor_divide(idx, c(h * w)))
        rest = imp.emit(R.floor_mod(idx, c(h * w)))
        y, xx = imp.emit(R.floor_divide(rest, c(w))), imp.emit(R.floor_mod(rest, c(w)))
        idx = imp.emit(R.add(imp.emit(R.multiply(plane, c(h * w))),
                             imp.emit(R.add(imp.emit(R.multiply(xx, c(h))), y))))
    if one_d:
        values, idx = imp.emit(R.squeeze(values, [2])), imp.emit(R.squeeze(idx, [2]))
    return [values, idx]


def _pool(kind: str):
    def convert(imp: Any, node: Any, inputs: list, attrs: dict) -> Any:
        x = imp.expr(inputs[0])
        kernel = list(attrs["kernel_shape"])
        strides, dilations, pads = window_args(node, x, attrs, kernel)
        ceil = bool(attrs.get("ceil_mode", 0))
        wants_indices = kind == "max" and len(node.output) > 1 and node.output[1]
        if wants_indices and len(kernel) <= 2:
            return _max_pool_indices(imp, x, kernel, strides, pads, dilations, ceil,
                                     attrs.get("storage_order", 0))
        out = pool_nd(imp.emit, kind, x, kernel, strides, pads, dilations, ceil,
                      bool(attrs.get("count_include_pad", 0)))
        if wants_indices:
            return [out, Unavailable("3-d MaxPool's indices")]
        return out
    return convert


converter("MaxPool", check=_rank_check)(_pool("max"))
converter("AveragePool", check=_rank_check)(_pool("avg"))


def _abs_pow(imp: Any, x: Expr, p: int) -> Expr:
    """``|x| ** p`` (p = 1 and 2 without a power)."""
    if p == 1:
        return imp.emit(R.abs(x))
    if p == 2:
        return imp.emit(R.multiply(x, x))
    return imp.emit(R.power(imp.emit(R.abs(x)), imp.expr(np.asarray(p, x.struct_info.dtype))))


def _root(imp: Any, x: Expr, p: int) -> Expr:
    if p == 1:
        return x
    if p == 2:
        return R.sqrt(x)
    return R.power(x, imp.expr(np.asarray(1.0 / p, x.struct_info.dtype)))


@converter("LpPool", check=_rank_check)
def _lp_pool(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    """``(sum of |x|^p over each window) ** (1/p)``: the window sums are a depthwise
    convolution with a kernel of ones (zero padding adds nothing)."""
    x = imp.expr(inputs[0])
    kernel = list(attrs["kernel_shape"])
    strides, dilations, pads = window_args(node, x, attrs, kernel)
    r = len(kernel)
    if attrs.get("ceil_mode", 0):  # pad the end so the last partial window is kept
        sizes = _static_spatial(node, x)
        for i in range(r):
            span = sizes[i] + pads[i] + pads[r + i] - (kernel[i] - 1) * dilations[i] - 1
            pads[r + i] += (-span) % strides[i]
    c = _static(_dims(x)[1])
    if c is None:
        raise NotImplementedError("LpPool over a dynamic number of channels")
    p = int(attrs.get("p", 2))
    ones = imp.expr(np.ones([c, 1] + kernel, dtype=x.struct_info.dtype))
    sums = conv_nd(imp.emit, _abs_pow(imp, x, p), ones, strides, pads, dilations, c)
    return _root(imp, sums, p)


@converter("GlobalLpPool")
def _global_lp_pool(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    p = int(attrs.get("p", 2))
    sums = imp.emit(R.sum(_abs_pow(imp, x, p), list(range(2, len(_dims(x)))), keepdims=True))
    return _root(imp, sums, p)


def _unpool_tiles(imp: Any, x: Expr, idx: Expr, strides: list[int], out_shape: list[int]
                  ) -> Expr:
    """MaxUnpool of non-overlapping windows (kernel = stride, no padding): each output element
    can only come from the window it lies in, so it is that window's value where the window's
    index (taken within its (n, c) plane) names this element, else 0 -- O(1) per element."""
    dims = [_static(d) for d in _dims(x)]
    r = len(strides)
    spread, wide, tiled = dims[:2], dims[:2], dims[:2]
    for n, s in zip(dims[2:], strides):
        spread, wide, tiled = spread + [n, 1], wide + [n, s], tiled + [n * s]

    def tile(t: Expr) -> Expr:
        t = imp.emit(R.broadcast_to(imp.emit(R.reshape(t, spread)), wide))
        t = imp.emit(R.reshape(t, tiled))
        lo = [min(a, b) for a, b in zip(tiled[2:], out_shape[2:])]
        if lo != tiled[2:]:
            t = imp.emit(R.strided_slice(t, list(range(2, 2 + r)), [0] * r, lo))
        if lo != out_shape[2:]:
            t = imp.emit(R.nn.pad(t, [(0, 0), (0, 0)] + [(0, o - n) for o, n in
                                                           zip(out_shape[2:], lo)]))
        return t
    plane = int(np.prod(out_shape[2:]))
    positions = imp.expr(np.arange(plane, dtype=np.int64).reshape(out_shape[2:]))
    here = imp.emit(R.floor_mod(imp.emit(R.astype(idx, "int64")),
                                imp.expr(np.asarray(plane, np.int64))))
    hit = imp.emit(R.equal(tile(here), positions))
    zero = imp.expr(np.zeros((), dtype=x.struct_info.dtype))
    return R.where(hit, tile(x), zero)


@converter("MaxUnpool")
def _max_unpool(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    """Each value written at its index (MaxPool's flat index into the whole output) of a
    zero tensor: for non-overlapping windows a select per output element, else a 1-d
    scatter (work: output size x number of values)."""
    x, idx = imp.expr(inputs[0]), imp.expr(inputs[1])
    dims = _dims(x)
    kernel = list(attrs["kernel_shape"])
    r = len(kernel)
    strides = list(attrs.get("strides") or [1] * r)
    pads = list(attrs.get("pads") or [0] * (2 * r))
    if len(inputs) > 2 and inputs[2] is not None:
        k = imp.known(inputs[2])
        if k is None or k.dtype == object:
            raise NotImplementedError("MaxUnpool with an output_shape computed at run time")
        out_shape = [int(v) for v in k.reshape(-1)]
    else:
        sizes = _static_spatial(node, x)
        out_shape = [_static(dims[0]), _static(dims[1])] + [
            (sizes[i] - 1) * strides[i] + kernel[i] - pads[i] - pads[r + i] for i in range(r)]
    if None in out_shape:
        raise NotImplementedError("MaxUnpool with a dynamic batch or channel count")
    if kernel == strides and not any(pads) and None not in [_static(d) for d in dims]:
        return _unpool_tiles(imp, x, idx, strides, out_shape)
    total = int(np.prod(out_shape))
    zeros = imp.expr(np.zeros([total], dtype=x.struct_info.dtype))
    flat = imp.emit(R.scatter_elements(zeros, imp.emit(R.reshape(idx, [-1])),
                                       imp.emit(R.reshape(x, [-1])), 0))
    return R.reshape(flat, out_shape)


@converter("GlobalAveragePool")
def _global_avg(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    return R.mean(x, list(range(2, len(_dims(x)))), keepdims=True)


@converter("GlobalMaxPool")
def _global_max(imp: Any, node: Any, inputs: list, attrs: dict) -> Expr:
    x = imp.expr(inputs[0])
    return R.max(x, list(range(2, len(_dims(x)))), keepdims=True)


__all__ = ["window_args"]
