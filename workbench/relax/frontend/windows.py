"""N-d window ops the importers share, on the 2-d kernels (``relax.nn.conv2d`` /
``max_pool2d`` / ``avg_pool2d``):

- 1-d windows are 2-d ones over ``(N, C, 1, L)``;
- a 3-d convolution stacks the depth taps of each output depth into the channels
  (``(N * OD, KD * C, H, W)``, group-major) and runs one 2-d convolution with the weight's
  depth taps folded the same way;
- a 3-d pool is separable: a 2-d pool with a ``(KD, 1)`` window over ``(N, C, D, H * W)``, then
  one over ``(N, C * OD, H, W)``; maxima and window counts factor per axis, so this is exact;
- a transposed convolution is the convolution of the input with zeros inserted between
  elements (``stride - 1``), padded by ``dilation * (k - 1) - pad``, with the weight's in/out
  channels swapped per group and its taps flipped.

Pads are ONNX's ``[x1_begin, x2_begin, ..., x1_end, x2_end, ...]`` throughout; ``emit`` binds
an expression (the importer's ``emit``).
"""
from __future__ import annotations

from typing import Any, Callable

from workbench.relax import op as R
from workbench.relax.expr import Expr
from workbench.relax.struct_info import TensorStructInfo
from workbench.tir.expr import IntImm

Emit = Callable[[Expr], Expr]
_INT64_MAX = 2 ** 63 - 1


def _dims(e: Expr) -> tuple:
    si = e.struct_info
    if not isinstance(si, TensorStructInfo) or si.shape is None:
        raise NotImplementedError("a tensor of unknown shape")
    return tuple(si.values)


def _static(d: Any) -> int | None:
    return int(d.value) if isinstance(d, IntImm) else None


def conv_nd(emit: Emit, x: Expr, w: Expr, strides: list[int], pads: list[int],
            dilations: list[int], group: int) -> Expr:
    """An N-d convolution (N = 1, 2, 3; NC... data, OI... weight) on ``relax.nn.conv2d``."""
    r = len(_dims(x)) - 2
    if r == 2:
        return emit(R.nn.conv2d(x, w, strides, [pads[0], pads[1], pads[2], pads[3]],
                                    dilations, group))
    if r == 1:
        x2, w2 = emit(R.expand_dims(x, 2)), emit(R.expand_dims(w, 2))
        out = emit(R.nn.conv2d(x2, w2, [1, strides[0]], [0, pads[0], 0, pads[1]],
                                   [1, dilations[0]], group))
        return emit(R.squeeze(out, [2]))
    if r != 3:
        raise NotImplementedError(f"{r}-d convolutions (supported: 1-, 2- and 3-d)")
    return _conv3d(emit, x, w, strides, pads, dilations, group)


def _conv3d(emit: Emit, x: Expr, w: Expr, strides: list[int], pads: list[int],
            dilations: list[int], group: int) -> Expr:
    n, c, depth = _dims(x)[:3]
    o, cg, kd = (_static(d) for d in _dims(w)[:3])
    depth = _static(depth)
    if depth is None or kd is None or o is None or cg is None:
        raise NotImplementedError("3-d convolutions over a dynamic depth or weight shape")
    sd, dd = strides[0], dilations[0]
    if pads[0] or pads[3]:
        width = [(0, 0)] * len(_dims(x))
        width[2] = (pads[0], pads[3])
        x = emit(R.nn.pad(x, width))
    od = (depth + pads[0] + pads[3] - (kd - 1) * dd - 1) // sd + 1
    taps = [emit(R.expand_dims(emit(R.strided_slice(
        x, [2], [k * dd], [k * dd + (od - 1) * sd + 1], [sd])), 2)) for k in range(kd)]
    stacked = emit(R.concat(taps, 2)) if kd > 1 else taps[0]   # (N, C, KD, OD, H, W)
    h, wd = _dims(x)[3:]
    g = group
    parts = emit(R.reshape(stacked, [n, g, cg, kd, od, h, wd]))
    parts = emit(R.permute_dims(parts, [0, 4, 1, 3, 2, 5, 6]))  # N, OD, g, KD, C/g, H, W
    planes = emit(R.reshape(parts, [n * od, c * kd, h, wd]))
    w2 = emit(R.permute_dims(w, [0, 2, 1, 3, 4]))                  # O, KD, C/g, KH, KW
    w2 = emit(R.reshape(w2, [o, kd * cg] + list(_dims(w)[3:])))
    out = emit(R.nn.conv2d(planes, w2, strides[1:], [pads[1], pads[2], pads[4], pads[5]],
                               dilations[1:], group))
    oh, ow = _dims(out)[2:]
    out = emit(R.reshape(out, [n, od, o, oh, ow]))
    return emit(R.permute_dims(out, [0, 2, 1, 3, 4]))


def conv_transpose_nd(emit: Emit, x: Expr, w: Expr, strides: list[int], pads: list[int],
                      dilations: list[int], groups: int, output_padding: list[int]) -> Expr:
    """An N-d transposed convolution (N = 1, 2, 3; weight ``(C_in, C_out / groups, K...)``):
    the convolution of the input with ``stride - 1`` zeros between elements, padded by
    ``dilation * (k - 1) - pad`` (``+ output_padding`` at the end), with the weight's in/out
    channels swapped per group and its taps flipped."""
    r = len(strides)
    kernel = [_static(d) for d in _dims(w)[2:]]
    sizes = [_static(d) for d in _dims(x)[2:]]
    if None in kernel or None in sizes:
        raise NotImplementedError("transposed convolutions of dynamic spatial shapes")
    out_pad = output_padding
    g = groups
    dims = _dims(x)
    # Zeros between elements: (N, C, S1, 1, S2, 1, ...) padded to stride on the unit axes
    # leaves stride - 1 extra zeros after the last element, taken off the end padding below.
    if any(s > 1 for s in strides):
        spread = [dims[0], dims[1]]
        for s in sizes:
            spread += [s, 1]
        y = emit(R.reshape(x, spread))
        width = [(0, 0), (0, 0)]
        for s in strides:
            width += [(0, 0), (0, s - 1)]
        y = emit(R.nn.pad(y, width))
        x = emit(R.reshape(y, [dims[0], dims[1]] + [n * s for n, s in zip(sizes, strides)]))
    begin = [(kernel[i] - 1) * dilations[i] - pads[i] for i in range(r)]
    end = [(kernel[i] - 1) * dilations[i] - pads[r + i] + out_pad[i] - (strides[i] - 1)
           for i in range(r)]
    x = _pad_or_crop(emit, x, begin, end)
    wd = _dims(w)
    cin, cout_g = _static(wd[0]), _static(wd[1])
    if cin is None or cout_g is None:
        raise NotImplementedError("a transposed convolution with a weight of dynamic shape")
    # (C_in, C_out/g, K...) -> (C_out, C_in/g, K...), per group; taps flipped.
    wt = emit(R.reshape(w, [g, cin // g, cout_g] + kernel))
    wt = emit(R.permute_dims(wt, [0, 2, 1] + list(range(3, 3 + r))))
    wt = emit(R.reshape(wt, [g * cout_g, cin // g] + kernel))
    spatial = list(range(2, 2 + r))
    wt = emit(R.strided_slice(wt, spatial, [-1] * r, [-_INT64_MAX] * r, [-1] * r))
    out = conv_nd(emit, x, wt, [1] * r, [0] * (2 * r), dilations, g)
    return out


def _pad_or_crop(emit: Emit, x: Expr, begin: list[int], end: list[int]) -> Expr:
    """``x``'s spatial dims padded with zeros by positive amounts, cropped by negative ones."""
    r = len(begin)
    if any(b < 0 or e < 0 for b, e in zip(begin, end)):
        dims = _dims(x)[2:]
        ends = [_static(d) - max(-e, 0) for d, e in zip(dims, end)]
        x = emit(R.strided_slice(x, list(range(2, 2 + r)), [max(-b, 0) for b in begin],
                                     ends))
    if any(b > 0 or e > 0 for b, e in zip(begin, end)):
        width = [(0, 0), (0, 0)] + [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
        x = emit(R.nn.pad(x, width))
    return x


def _pool2d(kind: str, x: Expr, kernel: list[int], strides: list[int], pads: list[int],
            dilations: list[int], ceil: bool, count_pad: bool) -> Expr:
    if kind == "max":
        return R.nn.max_pool2d(x, kernel, strides, pads, dilations, ceil)
    return R.nn.avg_pool2d(x, kernel, strides, pads, dilations, ceil, count_pad)


def pool_nd(emit: Emit, kind: str, x: Expr, kernel: list[int], strides: list[int],
            pads: list[int], dilations: list[int], ceil: bool, count_pad: bool) -> Expr:
    """A max or average pool over 1, 2 or 3 spatial dims (see the module docstring)."""
    r = len(kernel)
    if r == 2:
        return emit(_pool2d(kind, x, kernel, strides, pads, dilations, ceil, count_pad))
    if r == 1:
        x2 = emit(R.expand_dims(x, 2))
        out = emit(_pool2d(kind, x2, [1, kernel[0]], [1, strides[0]],
                               [0, pads[0], 0, pads[1]], [1, dilations[0]], ceil, count_pad))
        return emit(R.squeeze(out, [2]))
    n, c, d, h, w = _dims(x)
    flat = emit(R.reshape(x, [n, c, d, h * w]))
    deep = emit(_pool2d(kind, flat, [kernel[0], 1], [strides[0], 1], [pads[0], 0, pads[3], 0],
                            [dilations[0], 1], ceil, count_pad))
    od = _dims(deep)[2]
    planes = emit(R.reshape(deep, [n, c * od, h, w]))
    out = emit(_pool2d(kind, planes, kernel[1:], strides[1:],
                           [pads[1], pads[2], pads[4], pads[5]], dilations[1:], ceil, count_pad))
    oh, ow = _dims(out)[2:]
    return emit(R.reshape(out, [n, c, od, oh, ow]))


__all__ = ["conv_nd", "conv_transpose_nd", "pool_nd"]
