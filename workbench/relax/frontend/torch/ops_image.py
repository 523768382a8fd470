"""PyTorch converters: resampling and padding of images (upsample_nearest2d /
upsample_bilinear2d / upsample_bicubic2d, grid_sampler_2d, constant / reflection /
replication padding), on ``relax.image.resize2d``, ``relax.image.grid_sample`` and
``relax.nn.pad``.

PyTorch's rules in ONNX's terms: nearest is ``asymmetric`` coordinates rounded down;
bilinear and bicubic are ``half_pixel`` (``align_corners``: ``align_corners``), bicubic with
a = -0.75; a given scale factor (not the sizes' ratio) drives the mapping.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from workbench.relax import op as R
from workbench.relax.expr import Expr
from workbench.relax.frontend.torch._registry import converter
from workbench.relax.frontend.torch._util import ndim, shape_of
from workbench.tir.expr import IntImm


def _sizes(x: Expr, output_size: Any, scale_factors: Any) -> tuple[list[int], Any]:
    h, w = (int(d.value) if isinstance(d, IntImm) else None for d in shape_of(x)[2:])
    if h is None or w is None:
        raise NotImplementedError("upsampling of dynamic spatial sizes")
    if output_size:
        return [int(s) for s in output_size], None
    sh, sw = (float(s) for s in scale_factors)
    return [int(math.floor(h * sh)), int(math.floor(w * sw))], (sh, sw)


def _upsample(method: str):
    def convert(imp: Any, node: Any, x: Expr, output_size: Any, *rest: Any) -> Expr:
        if method == "nearest":
            align, scales = False, rest[0] if rest else None
        else:
            align, scales = bool(rest[0]), rest[1] if len(rest) > 1 else None
        size, sc = _sizes(x, output_size, scales)
        if method == "nearest":
            return R.image.resize2d(x, size, method="nearest_neighbor", scales=sc,
                                    coordinate_transformation_mode="asymmetric",
                                    rounding_method="floor")
        return R.image.resize2d(x, size, method=method, scales=None if align else sc,
                                coordinate_transformation_mode="align_corners" if align
                                else "half_pixel", cubic_alpha=-0.75)
    return convert


converter("upsample_nearest2d.vec")(_upsample("nearest"))
converter("upsample_bilinear2d.vec")(_upsample("linear"))
converter("upsample_bicubic2d.vec")(_upsample("cubic"))

_GRID_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_GRID_PADDING = {0: "zeros", 1: "border", 2: "reflection"}


@converter("grid_sampler_2d.default", "grid_sampler.default")
def _grid_sampler_2d(imp: Any, node: Any, x: Expr, grid: Expr, interpolation_mode: int,
                     padding_mode: int, align_corners: bool) -> Expr:
    return R.image.grid_sample(x, grid, _GRID_MODES[int(interpolation_mode)],
                               padding_mode=_GRID_PADDING[int(padding_mode)],
                               align_corners=bool(align_corners))


def _widths(x: Expr, pad: Sequence[int]) -> list[tuple[int, int]]:
    """torch's pad list (last dim first: left, right, top, bottom, ...) as per-dim pairs."""
    rank = ndim(x)
    width = [(0, 0)] * rank
    for k in range(len(pad) // 2):
        width[rank - 1 - k] = (int(pad[2 * k]), int(pad[2 * k + 1]))
    return width


def _pad(imp: Any, x: Expr, pad: Sequence[int], mode: str, value: float = 0.0) -> Expr:
    width = _widths(x, pad)
    if any(b < 0 or a < 0 for b, a in width):  # negative padding crops
        axes = [d for d, (b, a) in enumerate(width) if b < 0 or a < 0]
        ends = [width[d][1] if width[d][1] < 0 else 2 ** 63 - 1 for d in axes]
        x = imp.emit(R.strided_slice(x, axes, [max(-width[d][0], 0) for d in axes], ends))
        width = [(max(b, 0), max(a, 0)) for b, a in width]
    if not any(b or a for b, a in width):
        return x
    return R.nn.pad(x, width, mode, value)


@converter("constant_pad_nd.default")
def _constant_pad(imp: Any, node: Any, x: Expr, pad: Sequence[int], value: float = 0) -> Expr:
    return _pad(imp, x, pad, "constant", float(value))


for _dims in (1, 2, 3):
    converter(f"reflection_pad{_dims}d.default")(
        lambda imp, node, x, pad: _pad(imp, x, pad, "reflect"))
    converter(f"replication_pad{_dims}d.default")(
        lambda imp, node, x, pad: _pad(imp, x, pad, "edge"))


@converter("pad.default")
def _pad_default(imp: Any, node: Any, x: Expr, pad: Sequence[int], mode: str = "constant",
                 value: Any = None) -> Expr:
    modes = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
             "circular": "wrap"}
    if mode not in modes:
        raise NotImplementedError(f"pad mode {mode!r}")
    return _pad(imp, x, pad, modes[mode], float(value or 0.0))


__all__: list[str] = []
